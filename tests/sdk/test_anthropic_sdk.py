"""The official `anthropic` SDK against llamay, unchanged except for the base URL."""
import json

import anthropic
import jsonschema
import pytest

SCHEMA = {"type": "object",
          "properties": {"city": {"type": "string", "maxLength": 20},
                         "postcode": {"type": "string", "pattern": "^[0-9]{5}$"}},
          "required": ["city", "postcode"]}


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server["base"], api_key="unused", max_retries=0)


def test_plain_message(client, server):
    m = client.messages.create(model=server["model"], max_tokens=12, extra_body={"temperature": 0},
                               messages=[{"role": "user", "content": "Say hello."}])
    assert m.role == "assistant"
    assert m.content[0].type == "text" and m.content[0].text.strip()
    assert m.stop_reason in ("end_turn", "max_tokens")
    assert m.usage.output_tokens > 0


def test_streaming_message(client, server):
    with client.messages.stream(model=server["model"], max_tokens=12, extra_body={"temperature": 0},
                                system="You are terse.",
                                messages=[{"role": "user", "content": "Say hello."}]) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text.strip()
    assert final.content[0].text == text
    assert final.stop_reason in ("end_turn", "max_tokens")


def test_llamay_schema(client, server):
    m = client.messages.create(
        model=server["model"], max_tokens=60,
        messages=[{"role": "user", "content": "Ship to Lyon, postcode 69001. Give the address as JSON."}],
        extra_body={"llamay_schema": SCHEMA, "temperature": 0})
    assert m.stop_reason == "end_turn"
    jsonschema.validate(json.loads(m.content[0].text), SCHEMA)


def test_output_config_format(client, server):
    m = client.messages.create(
        model=server["model"], max_tokens=60,
        messages=[{"role": "user", "content": "Ship to Lyon, postcode 69001. Give the address as JSON."}],
        output_config={"format": {"type": "json_schema", "schema": SCHEMA}},
        extra_body={"temperature": 0})
    assert m.stop_reason == "end_turn"
    jsonschema.validate(json.loads(m.content[0].text), SCHEMA)
    assert m.model_extra["llamay"]["constraint"] == "schema"


def test_stop_sequence(client, server):
    m = client.messages.create(model=server["model"], max_tokens=40,
                               stop_sequences=[" "], extra_body={"temperature": 0},
                               messages=[{"role": "user", "content": "Write a sentence about cats."}])
    assert m.stop_reason in ("stop_sequence", "max_tokens")
    if m.stop_reason == "stop_sequence":
        assert m.stop_sequence == " "


def test_refusal(client, server):
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model=server["model"], max_tokens=5,
                               messages=[{"role": "user", "content": "x"}],
                               extra_body={"llamay_schema": {"patternProperties": {"a": {}}}})
    assert "patternProperties" in str(e.value)
