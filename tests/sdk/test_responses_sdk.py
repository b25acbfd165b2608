"""The Responses API (`/v1/responses`) through the official `openai` SDK, unchanged
except for the base URL: plain and streamed responses, `text.format` schemas,
`responses.parse` with a Pydantic model, forced tool calls, `previous_response_id`,
kept responses (retrieve, delete), refusals before inference; and
`chat.completions.parse` with a Pydantic model."""
import json

import jsonschema
import openai
import pytest
from pydantic import BaseModel

WEATHER = {"type": "object",
           "properties": {"location": {"type": "string", "maxLength": 24},
                          "unit": {"enum": ["c", "f"]}},
           "required": ["location", "unit"], "additionalProperties": False}
TIME = {"type": "object", "properties": {"tz": {"enum": ["UTC", "CET", "JST"]}},
        "required": ["tz"], "additionalProperties": False}
TOOLS = [
    {"type": "function", "name": "get_weather", "description": "Current weather for one city.",
     "parameters": WEATHER, "strict": True},
    {"type": "function", "name": "get_time", "description": "The time in a time zone.",
     "parameters": TIME, "strict": True},
]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
STATUS = {"type": "object",
          "properties": {"status": {"type": "string", "enum": ["ok", "needs_review"]},
                         "note": {"type": ["string", "null"], "maxLength": 40}},
          "required": ["status", "note"], "additionalProperties": False}


class City(BaseModel):
    name: str
    population: int
    capital: bool


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server["base"] + "/v1", api_key="unused", max_retries=0)


def stats(oai):
    return oai.get("/stats", cast_to=object)


def test_plain_response(oai, server):
    r = oai.responses.create(model=server["model"], input="Say hello.", max_output_tokens=24,
                             extra_body={"seed": 1})
    assert r.id.startswith("resp_") and r.object == "response"
    assert r.status in ("completed", "incomplete")
    assert r.output[-1].type == "message" and r.output[-1].role == "assistant"
    assert isinstance(r.output_text, str) and r.output_text
    assert r.usage.input_tokens > 0 and 0 < r.usage.output_tokens <= 24
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.output_tokens_details.reasoning_tokens == 0


def test_stream_text_is_the_deltas(oai, server):
    events = list(oai.responses.create(model=server["model"], input="Count to five.",
                                       max_output_tokens=32, stream=True, extra_body={"seed": 2}))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    for k in ("response.output_item.added", "response.content_part.added",
              "response.output_text.delta", "response.output_text.done",
              "response.content_part.done", "response.output_item.done"):
        assert k in kinds, kinds
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    done = [e for e in events if e.type == "response.output_text.done"][0]
    assert deltas and done.text == deltas
    assert events[-1].response.output_text == deltas
    if kinds[-1] == "response.incomplete":
        assert events[-1].response.incomplete_details.reason == "max_output_tokens"


def test_sdk_stream_helper_assembles_the_response(oai, server):
    fmt = {"format": {"type": "json_schema", "name": "result", "strict": True, "schema": STATUS}}
    raw = list(oai.responses.create(model=server["model"], input="Status as JSON.", text=fmt,
                                    max_output_tokens=64, stream=True, extra_body={"seed": 3}))
    deltas = "".join(e.delta for e in raw if e.type == "response.output_text.delta")
    assert raw[-1].type == "response.completed"
    with oai.responses.stream(model=server["model"], input="Status as JSON.", text=fmt,
                              max_output_tokens=64, extra_body={"seed": 3}) as s:
        texts = [e.delta for e in s if e.type == "response.output_text.delta"]
        final = s.get_final_response()
    assert final.output_text == deltas == "".join(texts)
    jsonschema.validate(json.loads(final.output_text), STATUS)


def test_text_format_json_schema_validates(oai, server):
    for seed in (1, 2, 3):
        r = oai.responses.create(
            model=server["model"], input='Return status "ok" and a null note as JSON.',
            max_output_tokens=64, extra_body={"seed": seed},
            text={"format": {"type": "json_schema", "name": "result", "strict": True,
                             "schema": STATUS}})
        jsonschema.validate(json.loads(r.output_text), STATUS)
        assert r.model_extra["llamay"]["constraint"] == "schema"


def test_json_object_format(oai, server):
    r = oai.responses.create(model=server["model"], input="A JSON object, please.",
                             max_output_tokens=48, text={"format": {"type": "json_object"}},
                             extra_body={"seed": 4})
    json.loads(r.output_text)


def test_responses_parse_pydantic(oai, server):
    r = oai.responses.parse(model=server["model"], input="Describe Paris.", text_format=City,
                            max_output_tokens=64, extra_body={"seed": 5})
    assert isinstance(r.output_parsed, City), r.output_text
    assert City.model_validate_json(r.output_text) == r.output_parsed


def test_chat_completions_parse_pydantic(oai, server):
    r = oai.chat.completions.parse(model=server["model"], response_format=City, max_tokens=64,
                                   messages=[{"role": "user", "content": "Describe Paris."}],
                                   seed=6)
    assert isinstance(r.choices[0].message.parsed, City), r.choices[0].message.content


def calls_of(r, only=None):
    calls = [o for o in r.output if o.type == "function_call"]
    assert calls, r.output
    for c in calls:
        assert c.call_id.startswith("call_") and c.name in SCHEMAS
        assert c.name == (only or c.name)
        jsonschema.validate(json.loads(c.arguments), SCHEMAS[c.name])
    return calls


def test_tool_choice_required_and_named(oai, server):
    for seed in (1, 2):
        r = oai.responses.create(model=server["model"], input="Weather in Paris?", tools=TOOLS,
                                 tool_choice="required", max_output_tokens=96,
                                 extra_body={"seed": seed})
        calls_of(r)
        assert r.model_extra["llamay"]["constraint"] == "tools"
    for seed in (3, 4):
        r = oai.responses.create(model=server["model"], input="Weather in Paris?", tools=TOOLS,
                                 tool_choice={"type": "function", "name": "get_time"},
                                 max_output_tokens=96, extra_body={"seed": seed})
        calls_of(r, only="get_time")
    r = oai.responses.create(model=server["model"], input="Weather in Paris and Tokyo?",
                             tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
                             max_output_tokens=96, extra_body={"seed": 5})
    assert len(calls_of(r)) == 1


def test_streamed_call_arguments_arrive_piece_by_piece(oai, server):
    events = list(oai.responses.create(model=server["model"], input="Weather in Paris?",
                                       tools=TOOLS[:1], tool_choice="required", stream=True,
                                       max_output_tokens=96, extra_body={"seed": 7}))
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert len(done) == 1
    pieces = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert len([p for p in pieces if p]) >= 5, pieces
    acc = ""
    for p in pieces:
        acc += p
        assert done[0].arguments.startswith(acc)
    assert acc == done[0].arguments
    jsonschema.validate(json.loads(done[0].arguments), WEATHER)
    final = events[-1].response
    calls = [o for o in final.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].arguments == acc


def test_previous_response_id_continues_and_tool_results_go_back(oai, server):
    r1 = oai.responses.create(model=server["model"], input="My name is Ada.",
                              instructions="Answer in French.", max_output_tokens=16,
                              extra_body={"seed": 1, "llamay_echo_prompt": True})
    assert "Answer in French." in r1.model_extra["llamay"]["prompt"]
    assert r1.instructions == "Answer in French."
    r2 = oai.responses.create(model=server["model"], input="What is my name?",
                              previous_response_id=r1.id, max_output_tokens=16,
                              extra_body={"seed": 1, "llamay_echo_prompt": True})
    prompt = r2.model_extra["llamay"]["prompt"]
    assert "My name is Ada." in prompt and r1.output_text in prompt
    # Instructions are not carried over to a continuation (OpenAI's rule).
    assert "Answer in French." not in prompt
    assert prompt.index("My name is Ada.") < prompt.index("What is my name?")
    assert r2.previous_response_id == r1.id
    # A call, then its result sent back against the response that made it.
    r3 = oai.responses.create(model=server["model"], input="Weather in Paris?", tools=TOOLS[:1],
                              tool_choice="required", max_output_tokens=96,
                              extra_body={"seed": 2})
    call = calls_of(r3)[0]
    r4 = oai.responses.create(model=server["model"], previous_response_id=r3.id, tools=TOOLS[:1],
                              input=[{"type": "function_call_output", "call_id": call.call_id,
                                      "output": '{"temp": 21}'}],
                              max_output_tokens=16,
                              extra_body={"seed": 2, "llamay_echo_prompt": True})
    assert '{"temp": 21}' in r4.model_extra["llamay"]["prompt"]
    assert call.name in r4.model_extra["llamay"]["prompt"]


def test_kept_responses_retrieve_and_delete(oai, server):
    r = oai.responses.create(model=server["model"], input="Hi.", max_output_tokens=8)
    got = oai.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text
    oai.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(r.id)
    unkept = oai.responses.create(model=server["model"], input="Hi.", max_output_tokens=8,
                                  store=False)
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(unkept.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.create(model=server["model"], input="Hi.", previous_response_id=unkept.id)


def test_refusals_come_before_inference(oai, server):
    before = stats(oai)
    bad = {"type": "object", "properties": {"a": {"not": {"type": "string"}}}}
    with pytest.raises(openai.BadRequestError) as e:
        oai.responses.create(model=server["model"], input="x",
                             text={"format": {"type": "json_schema", "name": "x", "schema": bad}})
    assert e.value.code == "unsupported_schema"
    assert 'properties.a uses "not"' in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        oai.responses.create(model=server["model"], input="x", tools=[{"type": "web_search"}])
    assert '"web_search"' in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        oai.responses.create(model=server["model"], input="x", reasoning={"effort": "none"})
    assert "thinking" in e.value.message
    after = stats(oai)
    assert after["completed"] == before["completed"], (before, after)
