"""Tool calls through the official `openai`, `anthropic` and `ollama` SDKs, unchanged
except for the base URL: forced calls fit their tool's schema, named choices hold,
`none` offers nothing, single-call choices make one call, streams carry a call piece
by piece (whole on Ollama's shape and with `whole_tool_calls`), text streams with a
tool offered, and a full loop (call, run the tool, send the result back) works."""
import json
import re
from concurrent.futures import ThreadPoolExecutor

import anthropic
import jsonschema
import ollama
import openai
import pytest

# The seed's weather tool.
WEATHER = {"type": "object",
           "properties": {"location": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
           "required": ["location", "unit"]}
TIME = {"type": "object",
        "properties": {"tz": {"type": "string", "enum": ["UTC", "CET", "JST"]}},
        "required": ["tz"]}
OPENAI_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for one city.",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "description": "The time in a time zone.",
                                      "parameters": TIME}},
]
ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in OPENAI_TOOLS]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASK = [{"role": "user", "content": "What is the weather in Paris and in Tokyo?"}]
CALL_ID = re.compile(r"^call_[0-9a-f]{12}$")


def run_tool(name, args):
    """The test's own tools: what a caller would execute."""
    jsonschema.validate(args, SCHEMAS[name])
    if name == "get_weather":
        return json.dumps({"location": args["location"], "temp": 21, "unit": args["unit"]})
    return json.dumps({"tz": args["tz"], "time": "12:00"})


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server["base"] + "/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def ant(server):
    return anthropic.Anthropic(base_url=server["base"], api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def oll(server):
    return ollama.Client(host=server["base"])


def check_openai_calls(choice, only=None):
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert calls
    for c in calls:
        assert CALL_ID.match(c.id) and c.type == "function"
        assert c.function.name == (only or c.function.name) and c.function.name in SCHEMAS
        jsonschema.validate(json.loads(c.function.arguments), SCHEMAS[c.function.name])
    return calls


# --- openai ---------------------------------------------------------------------------

def test_openai_tool_required_weather(oai, server):
    for seed in (1, 2):
        r = oai.chat.completions.create(model=server["model"], messages=ASK, tools=OPENAI_TOOLS[:1],
                                        tool_choice="required", max_tokens=96, seed=seed)
        check_openai_calls(r.choices[0], only="get_weather")


def test_openai_tool_named_picks_it_for_20_seeds(oai, server):
    def one(seed):
        r = oai.chat.completions.create(
            model=server["model"], messages=ASK, tools=OPENAI_TOOLS, max_tokens=64, seed=seed,
            tool_choice={"type": "function", "function": {"name": "get_time"}})
        return check_openai_calls(r.choices[0], only="get_time")
    with ThreadPoolExecutor(8) as ex:
        assert all(list(ex.map(one, range(300, 320))))


def test_openai_tool_none_is_text(oai, server):
    r = oai.chat.completions.create(model=server["model"], messages=ASK, tools=OPENAI_TOOLS,
                                    tool_choice="none", max_tokens=16, seed=1)
    m = r.choices[0].message
    assert m.tool_calls is None and m.content
    assert r.choices[0].finish_reason != "tool_calls"


def test_openai_tool_parallel_false_is_one_call(oai, server):
    for seed in (3, 4):
        r = oai.chat.completions.create(model=server["model"], messages=ASK, tools=OPENAI_TOOLS,
                                        tool_choice="required", parallel_tool_calls=False,
                                        max_tokens=128, seed=seed)
        assert len(check_openai_calls(r.choices[0])) == 1


def test_openai_tool_loop(oai, server):
    r = oai.chat.completions.create(model=server["model"], messages=ASK, tools=OPENAI_TOOLS,
                                    tool_choice="required", parallel_tool_calls=False,
                                    max_tokens=96, seed=5)
    msg = r.choices[0].message
    call = check_openai_calls(r.choices[0])[0]
    result = run_tool(call.function.name, json.loads(call.function.arguments))
    history = ASK + [msg.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": result}]
    nxt = oai.chat.completions.create(model=server["model"], messages=history, tools=OPENAI_TOOLS,
                                      max_tokens=24, seed=5)
    assert nxt.choices[0].message.content or nxt.choices[0].message.tool_calls
    assert nxt.usage.prompt_tokens > r.usage.prompt_tokens


def assert_streamed(pieces, final):
    """A call's argument deltas: several, each concatenation a prefix of the final
    arguments text, which is valid JSON."""
    assert len([p for p in pieces if p]) >= 5, pieces
    acc = ""
    for p in pieces:
        acc += p
        assert final.startswith(acc), (acc, final)
    assert acc == final
    return json.loads(final)


def test_openai_tool_stream_sends_the_call_piece_by_piece(oai, server):
    chunks = list(oai.chat.completions.create(
        model=server["model"], messages=ASK, tools=OPENAI_TOOLS, stream=True, max_tokens=96, seed=6,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}))
    deltas = [d for c in chunks if c.choices and c.choices[0].delta.tool_calls
              for d in c.choices[0].delta.tool_calls]
    # The id, type and name come first, as OpenAI sends them; then only arguments.
    assert CALL_ID.match(deltas[0].id) and deltas[0].function.name == "get_weather"
    assert all(d.id is None and d.function.name is None and d.index == 0 for d in deltas[1:])
    pieces = [d.function.arguments for d in deltas]
    args = assert_streamed(pieces, "".join(pieces))
    jsonschema.validate(args, WEATHER)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert not "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    # whole_tool_calls restores one delta per call.
    chunks = list(oai.chat.completions.create(
        model=server["model"], messages=ASK, tools=OPENAI_TOOLS, stream=True, max_tokens=96, seed=6,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        extra_body={"llamay_options": {"whole_tool_calls": True}}))
    deltas = [c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert len(deltas) == 1 and json.loads(deltas[0][0].function.arguments) == args


def test_openai_text_streams_with_a_tool_offered(oai, server):
    ask = [{"role": "user", "content": "Tell me a short story about a lighthouse keeper."}]
    chunks = list(oai.chat.completions.create(
        model=server["model"], messages=ask, tools=OPENAI_TOOLS[:1], stream=True, max_tokens=48, seed=1))
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(texts) >= 30, texts
    assert not any(c.choices[0].delta.tool_calls for c in chunks if c.choices)


# --- anthropic ------------------------------------------------------------------------

def tool_uses(m):
    uses = [b for b in m.content if b.type == "tool_use"]
    assert m.stop_reason == "tool_use" and uses, m
    for u in uses:
        assert CALL_ID.match(u.id)
        jsonschema.validate(u.input, SCHEMAS[u.name])
    return uses


@pytest.mark.parametrize("choice,name,single", [
    ({"type": "any"}, None, False),
    ({"type": "tool", "name": "get_time"}, "get_time", False),
    ({"type": "any", "disable_parallel_tool_use": True}, None, True),
])
def test_anthropic_tool_choices(ant, server, choice, name, single):
    for seed in (1, 2, 3):
        m = ant.messages.create(model=server["model"], max_tokens=96, messages=ASK, tools=ANTHROPIC_TOOLS,
                                tool_choice=choice, extra_body={"seed": seed})
        uses = tool_uses(m)
        assert not single or len(uses) == 1
        assert name is None or all(u.name == name for u in uses)


def test_anthropic_tool_named_picks_it_for_20_seeds(ant, server):
    def one(seed):
        m = ant.messages.create(model=server["model"], max_tokens=64, messages=ASK, tools=ANTHROPIC_TOOLS,
                                tool_choice={"type": "tool", "name": "get_time"}, extra_body={"seed": seed})
        return all(u.name == "get_time" for u in tool_uses(m))
    with ThreadPoolExecutor(8) as ex:
        assert all(list(ex.map(one, range(400, 420))))


def test_anthropic_tool_none_is_text(ant, server):
    m = ant.messages.create(model=server["model"], max_tokens=16, messages=ASK, tools=ANTHROPIC_TOOLS,
                            tool_choice={"type": "none"}, extra_body={"seed": 1})
    assert m.stop_reason != "tool_use"
    assert [b.type for b in m.content] == ["text"] and m.content[0].text


def test_anthropic_tool_loop(ant, server):
    m = ant.messages.create(model=server["model"], max_tokens=96, messages=ASK, tools=ANTHROPIC_TOOLS,
                            tool_choice={"type": "any", "disable_parallel_tool_use": True},
                            extra_body={"seed": 7})
    use = tool_uses(m)[0]
    history = ASK + [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                   "content": run_tool(use.name, use.input)}]}]
    nxt = ant.messages.create(model=server["model"], max_tokens=24, messages=history, tools=ANTHROPIC_TOOLS,
                              extra_body={"seed": 7})
    assert nxt.content and nxt.usage.input_tokens > m.usage.input_tokens


def test_anthropic_tool_stream_sends_the_input_piece_by_piece(ant, server):
    with ant.messages.stream(model=server["model"], max_tokens=96, messages=ASK, tools=ANTHROPIC_TOOLS,
                             tool_choice={"type": "tool", "name": "get_weather"},
                             extra_body={"seed": 8}) as s:
        events = list(s)
        final = s.get_final_message()
    starts = [e for e in events if e.type == "content_block_start" and e.content_block.type == "tool_use"]
    assert len(starts) == 1 and CALL_ID.match(starts[0].content_block.id)
    pieces = [e.delta.partial_json for e in events
              if e.type == "content_block_delta" and e.delta.type == "input_json_delta"]
    args = assert_streamed(pieces, "".join(pieces))
    [use] = tool_uses(final)
    assert use.name == "get_weather" and use.input == args


# --- ollama ---------------------------------------------------------------------------
# Ollama's API has no tool_choice: llamay reads one from `options` (which its SDK passes
# through), and a forced choice on this route makes exactly one call.

def ollama_call(resp):
    calls = resp.message.tool_calls
    assert calls and len(calls) == 1, resp
    f = calls[0].function
    jsonschema.validate(dict(f.arguments), SCHEMAS[f.name])
    return f


def test_ollama_tool_forced_and_named(oll, server):
    for seed in (1, 2):
        r = oll.chat(model=server["model"], messages=ASK, tools=OPENAI_TOOLS[:1],
                     options={"num_predict": 96, "seed": seed, "tool_choice": "required"})
        assert ollama_call(r).name == "get_weather" and not r.message.content
        r = oll.chat(model=server["model"], messages=ASK, tools=OPENAI_TOOLS,
                     options={"num_predict": 64, "seed": seed,
                              "tool_choice": {"type": "function", "function": {"name": "get_time"}}})
        assert ollama_call(r).name == "get_time"


def test_ollama_tool_named_picks_it_for_20_seeds(oll, server):
    def one(seed):
        r = oll.chat(model=server["model"], messages=ASK, tools=OPENAI_TOOLS,
                     options={"num_predict": 64, "seed": seed,
                              "tool_choice": {"type": "function", "function": {"name": "get_time"}}})
        return ollama_call(r).name == "get_time"
    with ThreadPoolExecutor(8) as ex:
        assert all(list(ex.map(one, range(500, 520))))


def test_ollama_tool_auto_never_leaks_a_call_into_content(oll, server):
    r = oll.chat(model=server["model"], messages=ASK, tools=OPENAI_TOOLS, options={"num_predict": 48, "seed": 1})
    assert "<tool_call>" not in (r.message.content or "")
    for c in r.message.tool_calls or []:
        assert c.function.name in SCHEMAS


def test_ollama_tool_loop(oll, server):
    r = oll.chat(model=server["model"], messages=ASK, tools=OPENAI_TOOLS[:1],
                 options={"num_predict": 96, "seed": 9, "tool_choice": "required"})
    f = ollama_call(r)
    history = ASK + [r.message, {"role": "tool", "tool_name": f.name, "content": run_tool(f.name, dict(f.arguments))}]
    nxt = oll.chat(model=server["model"], messages=history, tools=OPENAI_TOOLS[:1],
                   options={"num_predict": 24, "seed": 9})
    assert nxt.done and nxt.prompt_eval_count > r.prompt_eval_count


def test_ollama_tool_stream_sends_the_call_whole(oll, server):
    parts = list(oll.chat(model=server["model"], messages=ASK, tools=OPENAI_TOOLS[:1], stream=True,
                          options={"num_predict": 96, "seed": 10, "tool_choice": "required"}))
    with_calls = [p for p in parts if p.message.tool_calls]
    assert len(with_calls) == 1
    ollama_call(with_calls[0])
    assert parts[-1].done and not "".join(p.message.content or "" for p in parts)


# --- long arguments, every shape ------------------------------------------------------
# A call whose arguments run to dozens of tokens streams them in as many deltas on
# chat, Responses and Anthropic alike (issue #45).

NOTE = {"type": "object",
        "properties": {"title": {"type": "string", "minLength": 20, "maxLength": 60},
                       "body": {"type": "string", "minLength": 80, "maxLength": 200}},
        "required": ["title", "body"]}
NOTE_ASK = [{"role": "user", "content": "Save a note about the trip to Paris next week."}]


def test_long_arguments_stream_in_many_deltas_on_every_shape(oai, ant, server):
    def check(pieces):
        args = assert_streamed(pieces, "".join(pieces))
        jsonschema.validate(args, NOTE)
        assert len([p for p in pieces if p]) >= 20, pieces
        return len(pieces)

    tool = {"type": "function", "function": {"name": "save_note", "parameters": NOTE}}
    chunks = list(oai.chat.completions.create(
        model=server["model"], messages=NOTE_ASK, tools=[tool], stream=True, max_tokens=160,
        seed=3, tool_choice={"type": "function", "function": {"name": "save_note"}}))
    chat = check([d.function.arguments for c in chunks if c.choices and c.choices[0].delta.tool_calls
                  for d in c.choices[0].delta.tool_calls])
    events = list(oai.responses.create(
        model=server["model"], input=NOTE_ASK[0]["content"], stream=True, max_output_tokens=160,
        tools=[{"type": "function", "name": "save_note", "parameters": NOTE}], tool_choice="required",
        extra_body={"seed": 3}))
    responses = check([e.delta for e in events if e.type == "response.function_call_arguments.delta"])
    with ant.messages.stream(model=server["model"], max_tokens=160, messages=NOTE_ASK,
                             tools=[{"name": "save_note", "input_schema": NOTE}],
                             tool_choice={"type": "tool", "name": "save_note"},
                             extra_body={"seed": 3}) as s:
        pieces = [e.delta.partial_json for e in s
                  if e.type == "content_block_delta" and e.delta.type == "input_json_delta"]
    anthropic_ = check(pieces)
    print(f"argument deltas: chat {chat}, responses {responses}, anthropic {anthropic_}")
