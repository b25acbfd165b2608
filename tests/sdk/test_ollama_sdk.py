"""The official `ollama` SDK against llamay, unchanged except for the host."""
import json

import jsonschema
import ollama
import pytest

SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 30},
                         "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                         "tls": {"type": "boolean"}},
          "required": ["name", "port", "tls"]}
PROMPT = "Give me a JSON object with keys name, port and tls for a local server."


@pytest.fixture(scope="module")
def client(server):
    return ollama.Client(host=server["base"])


def test_chat(client, server):
    r = client.chat(model=server["model"], messages=[{"role": "user", "content": "Say hello."}],
                    options={"num_predict": 12, "temperature": 0})
    assert r.message.role == "assistant" and r.message.content.strip()
    assert r.done and r.done_reason in ("stop", "length")
    assert r.eval_count > 0


def test_chat_stream(client, server):
    parts = list(client.chat(model=server["model"], stream=True,
                             messages=[{"role": "user", "content": "Say hello."}],
                             options={"num_predict": 12, "temperature": 0}))
    assert parts[-1].done and not any(p.done for p in parts[:-1])
    assert "".join(p.message.content for p in parts).strip()


def test_format_schema(client, server):
    r = client.chat(model=server["model"], messages=[{"role": "user", "content": PROMPT}],
                    format=SCHEMA, options={"num_predict": 80, "temperature": 0})
    assert r.done_reason == "stop", r.message.content
    jsonschema.validate(json.loads(r.message.content), SCHEMA)


def test_format_json(client, server):
    r = client.generate(model=server["model"], prompt=PROMPT, format="json",
                        options={"num_predict": 80, "temperature": 0})
    assert r.done_reason == "stop", r.response
    json.loads(r.response)


def test_generate(client, server):
    r = client.generate(model=server["model"], prompt="The capital of France is",
                        options={"num_predict": 6, "temperature": 0})
    assert r.response.strip() and r.done


def test_tags_and_ps(client, server):
    names = [m.model for m in client.list().models]
    assert server["model"] in names
    assert server["model"] in [m.model for m in client.ps().models]


def test_refusal(client, server):
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model=server["model"], messages=[{"role": "user", "content": "x"}],
                    format={"type": "object", "if": {}, "then": {}})
    assert e.value.status_code == 400
    assert "uses \"if\"" in str(e.value)
