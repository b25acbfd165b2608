"""The capability catalog (`/v1/catalog/models`) and Ollama's `capabilities`, for the
test models (SmolLM2 served, the random Qwen3 and the Gemma 3 base model in the store),
and the 400s a request gets, before inference, for what its model cannot do."""
import json
import os
import shutil
import subprocess
import tempfile
import urllib.request

import anthropic
import ollama
import openai
import pytest

from conftest import ROOT, _start, _stop

LIMITS = {"properties_per_object": 64, "enum_members": 64, "any_of_alternatives": 256,
          "pattern_states": 2000, "recursion_depth": 64, "whitespace_budget": 64}


def _path(script, *args):
    return subprocess.check_output(["python3", os.path.join(ROOT, "scripts", script), *args],
                                   text=True).strip()


@pytest.fixture(scope="module")
def catalog_server():
    smollm2 = _path("fetch-test-models", "--path", "smollm2")
    gemma3 = _path("fetch-test-models", "--path", "gemma3")
    qwen3 = _path("make-test-qwen3")
    # Beside the models, so the store can hard-link instead of copying.
    store = tempfile.mkdtemp(prefix="llamay-catalog-", dir=os.path.dirname(qwen3))
    empty = tempfile.mkdtemp(prefix="llamay-no-ollama-")
    env = {**os.environ, "LLAMAY_MODELS": store, "OLLAMA_MODELS": empty}
    binary = os.environ.get("LLAMAY_BIN", os.path.join(ROOT, "target", "release", "llamay"))
    for path, name in ((qwen3, "qwen3-random:tiny"), (gemma3, "gemma3-base:270m")):
        subprocess.run([binary, "import", path, name], env=env, check=True,
                       stdout=subprocess.DEVNULL)
    proc, info = _start(smollm2, env=env)
    yield info
    _stop(proc)
    shutil.rmtree(store, ignore_errors=True)
    shutil.rmtree(empty, ignore_errors=True)


def get(base, path):
    with urllib.request.urlopen(base + path) as r:
        return json.load(r)


def test_catalog_lists_the_test_models_with_their_capabilities(catalog_server):
    data = {m["id"]: m for m in get(catalog_server["base"], "/v1/catalog/models")["data"]}
    smol, qwen, gemma = data[catalog_server["model"]], data["qwen3-random:tiny"], data["gemma3-base:270m"]
    assert smol["loaded"] and not qwen["loaded"]
    assert (smol["architecture"], qwen["architecture"], gemma["architecture"]) == ("llama", "qwen3", "gemma3")
    for m in (smol, qwen, gemma):
        assert m["schema_limits"] == LIMITS
        quote = m["constraints"]["quote"]
        assert quote["source_bytes"] >= 1 << 20 and "whitespace" in quote["normalize"]
        assert m["context_length"] > 0
        chat = m["endpoints"]["/v1/chat/completions"]
        assert {"json_schema", "json_object", "grammar"} <= set(chat["formats"])
        assert m["endpoints"]["/v1/messages"]["formats"] == ["text", "json_schema", "grammar"]
    assert smol["capabilities"] == ["completion", "tools"]
    assert smol["tool_calling"] and smol["strict_tools"] and smol["parallel_tool_calls"]
    assert smol["reasoning"] is None
    assert smol["reasoning_controls"] == {"thinking_toggle": False, "budget": False, "effort": []}
    assert qwen["capabilities"] == ["completion", "tools", "thinking"]
    assert qwen["reasoning"] == {"convention": "qwen3", "open": "<think>", "close": "</think>"}
    assert qwen["reasoning_controls"]["thinking_toggle"] and qwen["reasoning_controls"]["budget"]
    # A base model without a chat template: completion only.
    assert gemma["capabilities"] == ["completion"]
    assert not gemma["tool_calling"] and not gemma["endpoints"]["/v1/chat/completions"]["tool_calling"]


def test_ollama_show_reports_capabilities(catalog_server):
    oll = ollama.Client(host=catalog_server["base"])
    assert oll.show(catalog_server["model"]).capabilities == ["completion", "tools"]
    assert oll.show("qwen3-random:tiny").capabilities == ["completion", "tools", "thinking"]
    assert oll.show("gemma3-base:270m").capabilities == ["completion"]


TOOL = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def test_asking_for_a_missing_capability_is_a_400_naming_it(catalog_server):
    base = catalog_server["base"]
    oai = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    ant = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0)
    oll = ollama.Client(host=base)
    before = get(base, "/v1/stats")["completed"]
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(model="gemma3-base:270m", messages=msgs, tools=TOOL,
                                    tool_choice="required", max_tokens=8)
    assert 'capability "tools"' in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        oai.responses.create(model="gemma3-base:270m", input="hi", max_output_tokens=8,
                             tools=[{"type": "function", "name": "f", "parameters": {"type": "object"}}])
    assert 'capability "tools"' in e.value.message
    for extra in ({"reasoning_effort": "none"}, {"chat_template_kwargs": {"enable_thinking": False}}):
        with pytest.raises(openai.BadRequestError) as e:
            oai.chat.completions.create(model=catalog_server["model"], messages=msgs,
                                        max_tokens=8, extra_body=extra)
        assert 'capability "thinking"' in e.value.message
    with pytest.raises(anthropic.BadRequestError) as e:
        ant.messages.create(model=catalog_server["model"], max_tokens=8, messages=msgs,
                            thinking={"type": "disabled"})
    assert 'capability "thinking"' in e.value.message
    with pytest.raises(ollama.ResponseError) as e:
        oll.chat(model=catalog_server["model"], messages=msgs, think=False)
    assert e.value.status_code == 400 and 'capability "thinking"' in e.value.error
    assert get(base, "/v1/stats")["completed"] == before
