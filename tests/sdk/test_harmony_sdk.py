"""gpt-oss's harmony format through the official SDKs.

The model is a random-weight gpt-oss over the real o200k_harmony vocabulary
(scripts/make-moe-models gpt-oss-harmony): harmony's markers are its real tokens, and
llamay prompts it as OpenAI's renderer does. Its text is noise; what is checked is
that the `analysis` channel arrives as each SDK's reasoning, `final` as the answer
(under the schema when one is asked), `commentary to=functions.NAME` as a tool call
valid under the tool's schema, and that no harmony marker shows anywhere.
"""
import json

import anthropic
import jsonschema
import ollama
import openai
import pytest

MARKERS = ["<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|call|>", "<|return|>",
           "<|constrain|>"]
PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 12},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
FMT = {"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": PERSON}}
WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "maxLength": 10},
                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time",
                                           "parameters": {"type": "object", "properties": {}}}}]
ASK = [{"role": "user", "content": "Who are you? Answer as JSON."}]


@pytest.fixture(scope="module")
def oai(harmony_server):
    return openai.OpenAI(base_url=harmony_server["base"] + "/v1", api_key="unused",
                         max_retries=0)


def clean(text):
    for m in MARKERS:
        assert m not in text, (m, text)


def test_chat_reasoning_apart_and_the_schema_on_the_answer(oai, harmony_server):
    for seed in (1, 2, 3):
        r = oai.chat.completions.create(model=harmony_server["model"], messages=ASK,
                                        max_tokens=64, response_format=FMT, seed=seed,
                                        temperature=1.0, reasoning_effort="low")
        m = r.choices[0].message
        reasoning = m.model_extra["reasoning_content"]
        assert reasoning.strip()
        clean(reasoning)
        clean(m.content)
        jsonschema.validate(json.loads(m.content), PERSON)
        assert r.usage.completion_tokens_details.reasoning_tokens >= 4


def test_chat_required_and_named_calls_are_valid(oai, harmony_server):
    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice in ("required", named):
        for seed in (1, 2):
            r = oai.chat.completions.create(model=harmony_server["model"], max_tokens=64,
                                            messages=[{"role": "user",
                                                       "content": "Weather in Oslo?"}],
                                            tools=TOOLS, tool_choice=choice, seed=seed,
                                            temperature=1.0)
            c = r.choices[0]
            assert c.finish_reason == "tool_calls", c
            (call,) = c.message.tool_calls
            args = json.loads(call.function.arguments)
            if call.function.name == "get_weather":
                jsonschema.validate(args, WEATHER)
            else:
                assert choice == "required" and call.function.name == "get_time", call
                assert args == {}
            clean(c.message.model_extra["reasoning_content"])


def test_chat_auto_is_parsed_as_a_call_or_an_answer(oai, harmony_server):
    kinds = set()
    for seed in range(6):
        r = oai.chat.completions.create(model=harmony_server["model"], max_tokens=48,
                                        messages=[{"role": "user", "content": "Weather?"}],
                                        tools=TOOLS, seed=seed, temperature=1.0)
        m = r.choices[0].message
        if m.tool_calls:
            kinds.add("call")
            for call in m.tool_calls:
                args = json.loads(call.function.arguments)
                if call.function.name == "get_weather":
                    jsonschema.validate(args, WEATHER)
                else:
                    assert call.function.name == "get_time" and args == {}
        else:
            kinds.add("answer")
            clean(m.content or "")
    assert kinds, "every reply was read"


def test_chat_stream_sends_reasoning_then_the_call(oai, harmony_server):
    chunks = list(oai.chat.completions.create(
        model=harmony_server["model"], max_tokens=64, stream=True, seed=5, temperature=1.0,
        messages=[{"role": "user", "content": "Weather in Oslo?"}], tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}))
    reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or ""
                        for c in chunks if c.choices)
    args = "".join(tc.function.arguments or "" for c in chunks if c.choices
                   for tc in (c.choices[0].delta.tool_calls or []))
    assert reasoning.strip()
    clean(reasoning)
    jsonschema.validate(json.loads(args), WEATHER)


def test_responses_reasoning_item_and_schema_message(oai, harmony_server):
    r = oai.responses.create(model=harmony_server["model"], input="Who are you? JSON please.",
                             max_output_tokens=64, reasoning={"effort": "low"},
                             text={"format": {"type": "json_schema", "name": "person",
                                              "schema": PERSON, "strict": True}})
    kinds = [item.type for item in r.output]
    assert kinds[0] == "reasoning" and "message" in kinds, kinds
    thought = r.output[0].content[0].text
    assert thought.strip()
    clean(thought)
    clean(r.output_text)
    jsonschema.validate(json.loads(r.output_text), PERSON)


def test_anthropic_thinking_block_then_text(harmony_server):
    ant = anthropic.Anthropic(base_url=harmony_server["base"], api_key="unused",
                              max_retries=0)
    r = ant.messages.create(model=harmony_server["model"], max_tokens=48,
                            thinking={"type": "enabled", "budget_tokens": 16},
                            messages=[{"role": "user", "content": "hi"}])
    kinds = [b.type for b in r.content]
    assert kinds[0] == "thinking", kinds
    assert r.content[0].thinking.strip()
    for b in r.content:
        clean(b.thinking if b.type == "thinking" else b.text)


def test_ollama_thinking_apart_and_format_on_the_answer(harmony_server):
    oll = ollama.Client(host=harmony_server["base"])
    r = oll.chat(model=harmony_server["model"], think="medium", format=PERSON,
                 messages=ASK, options={"num_predict": 64, "seed": 2})
    assert r.message.thinking and r.message.thinking.strip()
    clean(r.message.thinking)
    clean(r.message.content)
    jsonschema.validate(json.loads(r.message.content), PERSON)
