"""Tool calls on a real model that was trained for them (Qwen2.5-Coder-0.5B-Instruct,
whose own chat template renders the tools), through the official SDKs: the seed's
weather question with `tool_choice: "auto"` comes back as a parsed call (the model
writes it without its tags, and llamay reads it as Ollama does), `required` calls for
both cities, a named tool holds, `none` answers in prose; the same on the Anthropic and
Ollama shapes. Greedy decoding, so every run sees the same text."""
import json

import anthropic
import jsonschema
import ollama
import openai
import pytest

WEATHER = {"type": "object",
           "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
           "required": ["city", "unit"]}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for one city.", "parameters": WEATHER}}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "Current weather for one city.",
                    "input_schema": WEATHER}]
PARIS = [{"role": "user", "content": "What is the weather in Paris?"}]
BOTH = [{"role": "user", "content": "What is the weather in Paris and in Tokyo?"}]


@pytest.fixture(scope="module")
def oai(qwen_server):
    return openai.OpenAI(base_url=qwen_server["base"] + "/v1", api_key="unused", max_retries=0)


def calls_of(choice):
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content is None, choice.message
    out = []
    for c in choice.message.tool_calls:
        assert c.function.name == "get_weather"
        args = json.loads(c.function.arguments)
        jsonschema.validate(args, WEATHER)
        out.append(args)
    return out


def test_auto_reads_the_models_own_call(oai, qwen_server):
    r = oai.chat.completions.create(model=qwen_server["model"], messages=PARIS, tools=TOOLS,
                                    tool_choice="auto", temperature=0, max_tokens=80)
    calls = calls_of(r.choices[0])
    assert len(calls) == 1 and calls[0]["city"] == "Paris", calls


def test_required_calls_for_both_cities(oai, qwen_server):
    r = oai.chat.completions.create(model=qwen_server["model"], messages=BOTH, tools=TOOLS,
                                    tool_choice="required", temperature=0, max_tokens=120)
    cities = {c["city"] for c in calls_of(r.choices[0])}
    assert {"Paris", "Tokyo"} <= cities, cities


def test_a_named_tool_holds(oai, qwen_server):
    r = oai.chat.completions.create(
        model=qwen_server["model"], messages=PARIS, tools=TOOLS, temperature=0, max_tokens=80,
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert calls_of(r.choices[0])[0]["city"] == "Paris"


def test_none_answers_in_prose(oai, qwen_server):
    r = oai.chat.completions.create(model=qwen_server["model"], messages=PARIS, tools=TOOLS,
                                    tool_choice="none", temperature=0, max_tokens=40)
    c = r.choices[0]
    assert c.finish_reason in ("stop", "length")
    assert not c.message.tool_calls and c.message.content


def test_anthropic_auto_and_any(qwen_server):
    ant = anthropic.Anthropic(base_url=qwen_server["base"], api_key="unused", max_retries=0)
    for choice in ({"type": "auto"}, {"type": "any"}):
        m = ant.messages.create(model=qwen_server["model"], max_tokens=120, messages=PARIS,
                                tools=ANTHROPIC_TOOLS, tool_choice=choice,
                                extra_body={"temperature": 0})
        assert m.stop_reason == "tool_use", (choice, m)
        uses = [b for b in m.content if b.type == "tool_use"]
        assert uses and uses[0].name == "get_weather", m.content
        jsonschema.validate(uses[0].input, WEATHER)
        assert uses[0].input["city"] == "Paris"


def test_ollama_reads_the_call(qwen_server):
    oll = ollama.Client(host=qwen_server["base"])
    r = oll.chat(model=qwen_server["model"], messages=PARIS, tools=TOOLS,
                 options={"temperature": 0, "num_predict": 80})
    calls = r.message.tool_calls
    assert calls and calls[0].function.name == "get_weather", r.message
    jsonschema.validate(dict(calls[0].function.arguments), WEATHER)
    assert calls[0].function.arguments["city"] == "Paris"
