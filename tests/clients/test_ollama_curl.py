"""Ollama's documented curl examples, run with the real curl exactly as the docs print
them (`curl URL -d '{...}'`, no -H: curl then sends
`Content-Type: application/x-www-form-urlencoded`), only the host and the model name
substituted. A request a web page could make (an Origin header from another site) must
still be refused.
"""
import json
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="no curl")

GENERATE = """{
  "model": "MODEL",
  "prompt": "Why is the sky blue?"
}"""

CHAT = """{
  "model": "MODEL",
  "messages": [
    {
      "role": "user",
      "content": "why is the sky blue?"
    }
  ]
}"""

EMBED = """{
  "model": "MODEL",
  "input": "Why is the sky blue?"
}"""


def _curl(url, body, *headers):
    """curl URL [-H ...] -d BODY, as the docs write it; -s and -w only shape curl's own
    output (the status code on the last line)."""
    args = ["curl", "-s", "-w", "\n%{http_code}", url]
    for h in headers:
        args += ["-H", h]
    args += ["-d", body]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True).stdout
    text, _, code = out.rpartition("\n")
    return int(code), text


def _ndjson(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_generate_example(smol):
    code, text = _curl(smol.base + "/api/generate", GENERATE.replace("MODEL", smol.model))
    assert code == 200, text
    lines = _ndjson(text)
    assert lines[-1]["done"] is True
    assert "".join(l.get("response", "") for l in lines).strip()


def test_chat_example(smol):
    code, text = _curl(smol.base + "/api/chat", CHAT.replace("MODEL", smol.model))
    assert code == 200, text
    lines = _ndjson(text)
    assert lines[-1]["done"] is True
    assert "".join(l["message"]["content"] for l in lines if "message" in l).strip()


def test_embed_example(smol):
    code, text = _curl(smol.base + "/api/embed", EMBED.replace("MODEL", smol.model))
    assert code == 200, text
    body = json.loads(text)
    assert len(body["embeddings"]) == 1 and len(body["embeddings"][0]) > 100


@pytest.mark.parametrize("content_type", [None, "application/json"])
def test_cross_site_request_is_refused(smol, content_type):
    """What a page on another site can send (its Origin header, a body with or without a
    JSON type): 403, with no generation."""
    headers = ["Origin: https://evil.example"]
    if content_type:
        headers.append(f"Content-Type: {content_type}")
    code, text = _curl(smol.base + "/api/chat", CHAT.replace("MODEL", smol.model), *headers)
    assert code == 403, text
