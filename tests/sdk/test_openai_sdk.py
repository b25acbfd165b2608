"""The official `openai` SDK against llamay, unchanged except for the base URL."""
import json

import jsonschema
import openai
import pytest

# The seed's order schema ($ref, anyOf, numeric bounds, multipleOf, patterns).
ORDER_SCHEMA = {
    "$defs": {"line": {"type": "object",
        "properties": {"item": {"type": "string", "maxLength": 40},
                       "qty": {"type": "integer", "minimum": 1, "maximum": 999},
                       "unit_price": {"type": "number", "minimum": 0, "multipleOf": 0.01}},
        "required": ["item", "qty", "unit_price"]}},
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "pattern": "^[0-9]{1,6}$"},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}, "minItems": 1, "maxItems": 5},
        "delivery": {"anyOf": [
            {"type": "object", "properties": {"city": {"type": "string"},
                                              "postcode": {"type": "string", "pattern": "^[0-9]{5}$"}},
             "required": ["city", "postcode"]},
            {"type": "null"}]}},
    "required": ["order_id", "lines", "delivery"],
}
ORDER_PROMPT = "Order 7 from Acme: 3 widgets at 4.50 EUR each, ship to Lyon, postcode 69001."


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server["base"] + "/v1", api_key="unused", max_retries=0)


def test_plain_chat(client, server):
    r = client.chat.completions.create(
        model=server["model"], max_tokens=12, temperature=0,
        messages=[{"role": "user", "content": "Say hello."}])
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content.strip()
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0
    assert r.model == server["model"]


def test_streaming_chat_with_usage(client, server):
    stream = client.chat.completions.create(
        model=server["model"], max_tokens=12, temperature=0, stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "Say hello."}])
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage
    assert text.strip()
    assert finish in ("stop", "length")
    assert usage is not None and usage.completion_tokens > 0


def test_json_schema_order(client, server):
    r = client.chat.completions.create(
        model=server["model"], temperature=0, max_tokens=200,
        messages=[{"role": "user", "content": ORDER_PROMPT}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "order", "schema": ORDER_SCHEMA}})
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    doc = json.loads(r.choices[0].message.content)
    jsonschema.validate(doc, ORDER_SCHEMA)
    extra = r.model_extra["llamay"]
    assert extra["constraint"] == "schema"


def test_json_object(client, server):
    r = client.chat.completions.create(
        model=server["model"], temperature=0, max_tokens=150,
        messages=[{"role": "user", "content": "Give me a JSON object with keys name and port."}],
        response_format={"type": "json_object"},
        extra_body={"llamay_grammar": None})
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    json.loads(r.choices[0].message.content)
    assert r.model_extra["llamay"]["constraint"] == "json"


def test_refusal_is_a_bad_request(client, server):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=server["model"], max_tokens=5,
            messages=[{"role": "user", "content": "x"}],
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
                "type": "object", "properties": {"a": {"not": {"type": "string"}}}}}})
    assert "properties.a uses \"not\"" in str(e.value)


def test_models_list(client, server):
    ids = [m.id for m in client.models.list()]
    assert server["model"] in ids


def test_legacy_completion(client, server):
    r = client.completions.create(model=server["model"], prompt="The capital of France is",
                                  max_tokens=5, temperature=0)
    assert r.choices[0].text.strip()
    assert r.usage.completion_tokens == 5
