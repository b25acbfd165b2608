"""Embeddings through the official `openai` and `ollama` SDKs, and rerank through plain
HTTP in llama.cpp's shape, against `llamay serve -embed -rerank`; vectors and scores are
checked against llama.cpp's references (crates/testdata/embed, scripts/embed-reference).
"""
import base64
import json
import math
import os
import struct
import subprocess
import urllib.error
import urllib.request

import ollama
import openai
import pytest

from conftest import ROOT, _start, _stop

def _script_path(script, name):
    out = subprocess.check_output(["python3", os.path.join(ROOT, "scripts", script), name],
                                  text=True)
    return out.split(" ", 1)[1].strip()


def _reference(name):
    with open(os.path.join(ROOT, "crates", "testdata", "embed", name + ".json"),
              encoding="utf-8") as f:
        return json.load(f)


def _floats(b64):
    raw = base64.b64decode(b64)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def _cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


@pytest.fixture(scope="module")
def embed_server():
    model = subprocess.check_output(
        ["python3", os.path.join(ROOT, "scripts", "fetch-test-models"), "--path", "smollm2"],
        text=True).strip()
    proc, info = _start(model, extra=(
        "-embed", _script_path("fetch-embed-models", "minilm"),
        "-rerank", _script_path("fetch-embed-models", "reranker")))
    yield info["base"]
    _stop(proc)


CASES = _reference("minilm")["cases"][::9]


def test_openai_embeddings_float(embed_server):
    client = openai.OpenAI(base_url=embed_server + "/v1", api_key="none")
    texts = [c["text"] for c in CASES]
    r = client.embeddings.create(model="", input=texts, encoding_format="float")
    assert len(r.data) == len(texts)
    for d, c in zip(r.data, CASES):
        assert _cosine(d.embedding, _floats(c["embedding"])) >= 0.9999, c["text"]
    assert r.usage.prompt_tokens == sum(len(c["ids"]) for c in CASES)


def test_openai_embeddings_base64(embed_server):
    # The SDK asks for base64 by default and decodes it itself (numpy-free path too).
    client = openai.OpenAI(base_url=embed_server + "/v1", api_key="none")
    r = client.embeddings.create(model="", input=CASES[1]["text"])
    assert len(r.data[0].embedding) == 384
    assert _cosine(r.data[0].embedding, _floats(CASES[1]["embedding"])) >= 0.9999
    raw = client.embeddings.with_raw_response.create(
        model="", input=CASES[2]["text"], encoding_format="base64", dimensions=64)
    body = json.loads(raw.text)
    v = _floats(body["data"][0]["embedding"])
    assert len(v) == 64 and abs(sum(x * x for x in v) - 1.0) < 1e-4


def test_openai_embeddings_errors(embed_server):
    client = openai.OpenAI(base_url=embed_server + "/v1", api_key="none")
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model="", input=["fine", "word " * 700])
    assert "input[1]" in str(e.value)


def test_ollama_embed(embed_server):
    # The SDK wants a model name: the -embed model's, as the server reports it.
    name = openai.OpenAI(base_url=embed_server + "/v1", api_key="none").embeddings.create(
        model="", input="x").model
    client = ollama.Client(host=embed_server)
    texts = [c["text"] for c in CASES[:6]]
    r = client.embed(model=name, input=texts)
    assert len(r.embeddings) == len(texts)
    for v, c in zip(r.embeddings, CASES):
        assert _cosine(v, _floats(c["embedding"])) >= 0.9999
    assert r.prompt_eval_count > 0
    one = client.embeddings(model=name, prompt=CASES[0]["text"])
    assert _cosine(one.embedding, _floats(CASES[0]["embedding"])) >= 0.9999


def test_rerank_plain_http_llama_cpp_shape(embed_server):
    ref = _reference("reranker")["sets"][:10]
    for s in ref:
        req = urllib.request.Request(
            embed_server + "/v1/rerank",
            data=json.dumps({"query": s["query"], "documents": s["documents"],
                             "top_n": 2}).encode(),
            headers={"content-type": "application/json"})
        with urllib.request.urlopen(req) as r:
            body = json.load(r)
        want = sorted(((x["score"], i) for i, x in enumerate(s["results"])), reverse=True)[:2]
        got = [(x["relevance_score"], x["index"]) for x in body["results"]]
        assert [i for _, i in got] == [i for _, i in want]
        for (gs, _), (ws, _) in zip(got, want):
            assert abs(gs - ws) <= 1e-3
    req = urllib.request.Request(embed_server + "/rerank", data=b'{"query": "q", "documents": []}',
                                 headers={"content-type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 400
    assert json.load(e.value)["error"]["code"] == 400
