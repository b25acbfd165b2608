"""Anthropic's structured output in its current shapes through the official
`anthropic` SDK: `output_config.format` (and `messages.parse` with a Pydantic model,
which the SDK sends as one), the beta's top-level `output_format`, and `strict: true`
tools."""
import json

import anthropic
import jsonschema
import pytest
from pydantic import BaseModel

STATUS = {"type": "object",
          "properties": {"status": {"type": "string", "enum": ["ok", "needs_review"]},
                         "note": {"type": ["string", "null"], "maxLength": 40}},
          "required": ["status", "note"], "additionalProperties": False}
WEATHER = {"type": "object",
           "properties": {"location": {"type": "string", "maxLength": 24},
                          "unit": {"enum": ["c", "f"]}},
           "required": ["location", "unit"], "additionalProperties": False}
STRICT_TOOLS = [{"name": "get_weather", "description": "Current weather for one city.",
                 "input_schema": WEATHER, "strict": True}]
ASK = [{"role": "user", "content": 'Return status "ok" and a null note as JSON.'}]


class City(BaseModel):
    name: str
    population: int


@pytest.fixture(scope="module")
def ant(server):
    return anthropic.Anthropic(base_url=server["base"], api_key="unused", max_retries=0)


def test_output_config_format(ant, server):
    for seed in (1, 2, 3):
        r = ant.messages.create(model=server["model"], max_tokens=64, messages=ASK,
                                output_config={"format": {"type": "json_schema", "schema": STATUS}},
                                extra_body={"seed": seed})
        jsonschema.validate(json.loads(r.content[0].text), STATUS)
        assert r.model_extra["llamay"]["constraint"] == "schema"


def test_messages_parse_pydantic(ant, server):
    r = ant.messages.parse(model=server["model"], max_tokens=64, output_format=City,
                           messages=[{"role": "user", "content": "Describe Paris."}],
                           extra_body={"seed": 4})
    assert isinstance(r.parsed_output, City), r.content


def test_beta_output_format(ant, server):
    # This SDK release no longer has the keyword; the wire field is still the beta's.
    r = ant.beta.messages.create(model=server["model"], max_tokens=64, messages=ASK,
                                 betas=["structured-outputs-2025-11-13"],
                                 extra_body={"seed": 5, "output_format": {
                                     "type": "json_schema", "schema": STATUS}})
    jsonschema.validate(json.loads(r.content[0].text), STATUS)
    bad = {"type": "object", "properties": {"a": {"not": {}}}}
    with pytest.raises(anthropic.BadRequestError) as e:
        ant.beta.messages.create(model=server["model"], max_tokens=8, messages=ASK,
                                 betas=["structured-outputs-2025-11-13"],
                                 extra_body={"output_format": {"type": "json_schema", "schema": bad}})
    assert 'uses "not"' in e.value.message


def test_strict_tools_forced_calls_match_their_schema(ant, server):
    for seed in (1, 2, 3):
        r = ant.messages.create(model=server["model"], max_tokens=96, tools=STRICT_TOOLS,
                                tool_choice={"type": "any"}, extra_body={"seed": seed},
                                messages=[{"role": "user", "content": "Weather in Paris?"}])
        uses = [b for b in r.content if b.type == "tool_use"]
        assert uses and r.stop_reason == "tool_use"
        for u in uses:
            jsonschema.validate(u.input, WEATHER)
    r = ant.beta.messages.create(model=server["model"], max_tokens=96, tools=STRICT_TOOLS,
                                 tool_choice={"type": "tool", "name": "get_weather"},
                                 betas=["structured-outputs-2025-11-13"], extra_body={"seed": 4},
                                 messages=[{"role": "user", "content": "Weather in Paris?"}])
    uses = [b for b in r.content if b.type == "tool_use"]
    assert uses and all(u.name == "get_weather" for u in uses)
    jsonschema.validate(uses[0].input, WEATHER)
