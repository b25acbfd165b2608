"""Reasoning models through the official SDKs: "free to think, strict to answer".

The model is a random-weight Qwen3 with Qwen3's real tokenizer and chat template
(scripts/make-test-qwen3), so `<think>`, `</think>` and `<|im_start|>` are its real
tokens and `enable_thinking` its real toggle. Random weights never close their thinking
on their own: every test here ends thinking through the budget, which is the point
(the closing marker forced past it, then the constraint from the next token).
"""
import json
import urllib.request

import anthropic
import jsonschema
import ollama
import openai
import pytest

STATUS = {"type": "object",
          "properties": {"status": {"type": "string", "enum": ["ok", "needs_review"]},
                         "note": {"type": ["string", "null"], "maxLength": 24}},
          "required": ["status", "note"], "additionalProperties": False}
FMT = {"type": "json_schema", "json_schema": {"name": "result", "strict": True, "schema": STATUS}}
ASK = [{"role": "user", "content": 'Return status "ok" and a null note as JSON.'}]
OFF_TAIL = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
ON_TAIL = "<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def oai(qwen3_server):
    return openai.OpenAI(base_url=qwen3_server["base"] + "/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def ant(qwen3_server):
    return anthropic.Anthropic(base_url=qwen3_server["base"], api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def oll(qwen3_server):
    return ollama.Client(host=qwen3_server["base"])


def no_markers(text):
    assert "<think>" not in text and "</think>" not in text, text


def check_answer(text):
    no_markers(text)
    jsonschema.validate(json.loads(text), STATUS)


# --- OpenAI chat ----------------------------------------------------------------------

def test_chat_thinks_then_answers_to_the_schema(oai, qwen3_server):
    for seed in (1, 2, 3):
        r = oai.chat.completions.create(model=qwen3_server["model"], messages=ASK, max_tokens=96,
                                        response_format=FMT, seed=seed, temperature=1.0,
                                        extra_body={"llamay_echo_prompt": True})
        m = r.choices[0].message
        assert m.model_extra["reasoning_content"].strip(), m
        no_markers(m.model_extra["reasoning_content"])
        check_answer(m.content)
        assert r.model_extra["llamay"]["prompt"].endswith(ON_TAIL)
        # The default budget is half the limit: thinking, then the closing marker.
        reasoning = r.usage.completion_tokens_details.reasoning_tokens
        assert 2 <= reasoning <= 96 // 2 + 1, r.usage
        assert r.choices[0].finish_reason == "stop"


def test_chat_stream_separates_reasoning_deltas(oai, qwen3_server):
    chunks = list(oai.chat.completions.create(model=qwen3_server["model"], messages=ASK,
                                              max_tokens=64, response_format=FMT, seed=4,
                                              temperature=1.0, stream=True))
    reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or ""
                        for c in chunks if c.choices)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert reasoning.strip()
    no_markers(reasoning)
    check_answer(content)
    # All the thinking comes before any of the answer.
    kinds = [("r" if getattr(c.choices[0].delta, "reasoning_content", None) else "c")
             for c in chunks if c.choices and (c.choices[0].delta.content
                                               or getattr(c.choices[0].delta, "reasoning_content", None))]
    assert "".join(kinds).rstrip("c").count("c") == 0, kinds


@pytest.mark.parametrize("extra", [
    {"reasoning_effort": "none"},
    {"chat_template_kwargs": {"enable_thinking": False}},
])
def test_chat_off_toggles_render_the_template_off(oai, qwen3_server, extra):
    r = oai.chat.completions.create(model=qwen3_server["model"], messages=ASK, max_tokens=48,
                                    response_format=FMT, seed=5, temperature=1.0,
                                    extra_body={**extra, "llamay_echo_prompt": True})
    m = r.choices[0].message
    assert r.model_extra["llamay"]["prompt"].endswith(OFF_TAIL)
    assert not m.model_extra.get("reasoning_content")
    assert r.usage.completion_tokens_details.reasoning_tokens == 0
    check_answer(m.content)


@pytest.mark.parametrize("budget", [1, 5, 17])
def test_chat_thinking_budget_is_honoured(oai, qwen3_server, budget):
    r = oai.chat.completions.create(model=qwen3_server["model"], messages=ASK, max_tokens=80,
                                    response_format=FMT, seed=budget, temperature=1.0,
                                    extra_body={"llamay_thinking_budget": budget})
    reasoning = r.usage.completion_tokens_details.reasoning_tokens
    # The budget counts the opening marker; the closing one comes on top.
    assert reasoning == budget + 1, r.usage
    check_answer(r.choices[0].message.content)
    low = oai.chat.completions.create(model=qwen3_server["model"], messages=ASK, max_tokens=80,
                                      response_format=FMT, seed=budget, temperature=1.0,
                                      reasoning_effort="low")
    assert low.usage.completion_tokens_details.reasoning_tokens <= 80 // 4 + 1


def test_the_closing_marker_is_impossible_in_the_answer(oai, qwen3_server):
    # The grammar itself would allow `</think>`; the answer's guard never lets it be written.
    grammar = 'root ::= "</think" [a-z>]'
    for think in (True, False):
        for seed in range(6):
            extra = {"llamay_grammar": grammar}
            if not think:
                extra["reasoning_effort"] = "none"
            r = oai.chat.completions.create(model=qwen3_server["model"], messages=ASK,
                                            max_tokens=24, seed=seed, temperature=1.0,
                                            extra_body=extra)
            c = r.choices[0].message.content
            assert c.startswith("</think") and len(c) == len("</think") + 1, c
            assert c != "</think>", c


# --- Responses -----------------------------------------------------------------------

def test_responses_reasoning_items_and_toggle(oai, qwen3_server):
    fmt = {"format": {"type": "json_schema", "name": "result", "strict": True, "schema": STATUS}}
    r = oai.responses.create(model=qwen3_server["model"], input=ASK[0]["content"], text=fmt,
                             max_output_tokens=96, temperature=1.0, extra_body={"seed": 6})
    kinds = [o.type for o in r.output]
    assert kinds == ["reasoning", "message"], kinds
    assert r.output[0].content[0].type == "reasoning_text" and r.output[0].content[0].text.strip()
    check_answer(r.output_text)
    assert 2 <= r.usage.output_tokens_details.reasoning_tokens <= 96 // 2 + 1
    events = list(oai.responses.create(model=qwen3_server["model"], input=ASK[0]["content"],
                                       text=fmt, max_output_tokens=96, temperature=1.0,
                                       stream=True, extra_body={"seed": 6}))
    deltas = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert deltas == r.output[0].content[0].text
    off = oai.responses.create(model=qwen3_server["model"], input=ASK[0]["content"], text=fmt,
                               max_output_tokens=48, reasoning={"effort": "none"},
                               extra_body={"seed": 6, "llamay_echo_prompt": True})
    assert [o.type for o in off.output] == ["message"]
    assert off.model_extra["llamay"]["prompt"].endswith(OFF_TAIL)
    assert off.usage.output_tokens_details.reasoning_tokens == 0
    check_answer(off.output_text)


# --- Anthropic -----------------------------------------------------------------------

def test_anthropic_thinking_blocks_budget_and_disabled(ant, qwen3_server):
    fmt = {"format": {"type": "json_schema", "schema": STATUS}}
    r = ant.messages.create(model=qwen3_server["model"], max_tokens=96, messages=ASK,
                            output_config=fmt,
                            thinking={"type": "enabled", "budget_tokens": 12},
                            extra_body={"seed": 7, "temperature": 1.0})
    assert [b.type for b in r.content] == ["thinking", "text"], r.content
    assert r.content[0].thinking.strip()
    no_markers(r.content[0].thinking)
    check_answer(r.content[1].text)
    assert r.model_extra["llamay"]["reasoning_tokens"] == 12 + 1
    with ant.messages.stream(model=qwen3_server["model"], max_tokens=96, messages=ASK,
                             output_config=fmt,
                             thinking={"type": "enabled", "budget_tokens": 12},
                             extra_body={"seed": 7, "temperature": 1.0}) as s:
        final = s.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == r.content[0].thinking
    check_answer(final.content[1].text)
    off = ant.messages.create(model=qwen3_server["model"], max_tokens=48, messages=ASK,
                              output_config=fmt, thinking={"type": "disabled"},
                              extra_body={"seed": 7, "llamay_echo_prompt": True})
    assert [b.type for b in off.content] == ["text"]
    assert off.model_extra["llamay"]["prompt"].endswith(OFF_TAIL)
    check_answer(off.content[0].text)
    with pytest.raises(anthropic.BadRequestError):
        ant.messages.create(model=qwen3_server["model"], max_tokens=48, messages=ASK,
                            thinking={"type": "enabled", "budget_tokens": 48})


# --- Ollama --------------------------------------------------------------------------

def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def test_ollama_think_true_and_false(oll, qwen3_server):
    r = oll.chat(model=qwen3_server["model"], messages=ASK, format=STATUS, think=True,
                 options={"num_predict": 96, "seed": 8, "temperature": 1.0})
    assert r.message.thinking and r.message.thinking.strip()
    no_markers(r.message.thinking)
    check_answer(r.message.content)
    parts = list(oll.chat(model=qwen3_server["model"], messages=ASK, format=STATUS, think=True,
                          stream=True, options={"num_predict": 96, "seed": 8, "temperature": 1.0}))
    assert "".join(p.message.thinking or "" for p in parts) == r.message.thinking
    check_answer("".join(p.message.content or "" for p in parts))
    off = oll.chat(model=qwen3_server["model"], messages=ASK, format=STATUS, think=False,
                   options={"num_predict": 48, "seed": 8})
    assert not off.message.thinking
    check_answer(off.message.content)
    raw = post(qwen3_server["base"], "/api/chat",
               {"model": qwen3_server["model"], "messages": ASK, "format": STATUS, "think": False,
                "stream": False, "llamay_echo_prompt": True, "options": {"num_predict": 48}})
    assert raw["llamay"]["prompt"].endswith(OFF_TAIL)
    g = oll.generate(model=qwen3_server["model"], prompt=ASK[0]["content"], format=STATUS,
                     think=True, options={"num_predict": 96, "seed": 9, "temperature": 1.0})
    assert g.thinking and g.thinking.strip()
    check_answer(g.response)
