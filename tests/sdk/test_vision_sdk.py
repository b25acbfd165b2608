"""Images through the official SDKs (openai chat and Responses, anthropic, ollama) on
`llamay serve` of the tiny random-weight Gemma 3 with the random `gemma3` projector
(`-mmproj`, scripts/make-vision-models): a picture plus a JSON schema returns a
document that validates, streamed or not, and a second request about the same
picture reports cached prompt tokens covering it."""
import base64
import json
import os
import struct
import zlib

import anthropic
import jsonschema
import ollama
import openai
import pytest

from conftest import ROOT, _model, _start, _stop

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["n"],
    "additionalProperties": False,
}
QUESTION = "How many things are in this picture?"


def png(width, height, seed):
    """An RGB PNG written by hand (no imaging library in the SDK venv)."""
    rows = b"".join(
        b"\x00" + bytes((x * seed + y * 7 + c * 31) % 256 for x in range(width) for c in range(3))
        for y in range(height)
    )

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


PICTURE = base64.b64encode(png(40, 30, 3)).decode()
URL = "data:image/png;base64," + PICTURE


@pytest.fixture(scope="module")
def vision_server():
    model = os.path.join(ROOT, "..", "shared", "ref", "tiny", "tiny-gemma3-Q6_K.gguf")
    projector = _model("make-vision-models", "--path", "gemma3-F32")
    # `--mmproj`: the one-dash spelling is read as `-m mproj` until the parser's fix.
    proc, info = _start(model, ctx="512", extra=("--mmproj", projector))
    yield info
    _stop(proc)


def check(text):
    jsonschema.validate(json.loads(text), SCHEMA)


def test_openai_chat(vision_server):
    c = openai.OpenAI(base_url=vision_server["base"] + "/v1", api_key="none")
    messages = [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": URL}},
        {"type": "text", "text": QUESTION}]}]
    fmt = {"type": "json_schema", "json_schema": {"name": "n", "schema": SCHEMA}}
    r = c.chat.completions.create(model=vision_server["model"], messages=messages,
                                  response_format=fmt, max_tokens=48)
    check(r.choices[0].message.content)
    again = c.chat.completions.create(model=vision_server["model"], messages=messages,
                                      response_format=fmt, max_tokens=48)
    # The whole prompt but its last token (fed for the logits): the picture's rows too.
    assert again.usage.prompt_tokens_details.cached_tokens == again.usage.prompt_tokens - 1, again.usage
    stream = c.chat.completions.create(model=vision_server["model"], messages=messages,
                                       response_format=fmt, max_tokens=48, stream=True)
    check("".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices))


def test_openai_responses(vision_server):
    c = openai.OpenAI(base_url=vision_server["base"] + "/v1", api_key="none")
    inp = [{"role": "user", "content": [
        {"type": "input_image", "image_url": URL},
        {"type": "input_text", "text": QUESTION}]}]
    fmt = {"format": {"type": "json_schema", "name": "n", "schema": SCHEMA}}
    r = c.responses.create(model=vision_server["model"], input=inp, text=fmt, max_output_tokens=48)
    check(r.output_text)
    again = c.responses.create(model=vision_server["model"], input=inp, text=fmt, max_output_tokens=48)
    assert again.usage.input_tokens_details.cached_tokens == again.usage.input_tokens - 1, again.usage
    with c.responses.stream(model=vision_server["model"], input=inp, text=fmt,
                            max_output_tokens=48) as s:
        text = "".join(e.delta for e in s if e.type == "response.output_text.delta")
    check(text)


def test_anthropic(vision_server):
    c = anthropic.Anthropic(base_url=vision_server["base"], api_key="none")
    messages = [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PICTURE}},
        {"type": "text", "text": QUESTION}]}]
    extra = {"output_format": {"type": "json_schema", "schema": SCHEMA}}
    r = c.messages.create(model=vision_server["model"], messages=messages, max_tokens=48,
                          extra_body=extra)
    check(r.content[0].text)
    again = c.messages.create(model=vision_server["model"], messages=messages, max_tokens=48,
                              extra_body=extra)
    assert again.usage.cache_read_input_tokens == again.usage.input_tokens - 1, again.usage
    with c.messages.stream(model=vision_server["model"], messages=messages, max_tokens=48,
                           extra_body=extra) as s:
        check("".join(s.text_stream))


def test_ollama(vision_server):
    c = ollama.Client(host=vision_server["base"])
    messages = [{"role": "user", "content": QUESTION, "images": [PICTURE]}]
    r = c.chat(model=vision_server["model"], messages=messages, format=SCHEMA,
               options={"num_predict": 48})
    check(r.message.content)
    parts = c.chat(model=vision_server["model"], messages=messages, format=SCHEMA,
                   options={"num_predict": 48}, stream=True)
    check("".join(p.message.content or "" for p in parts))
    show = c.show(vision_server["model"])
    assert "vision" in show.capabilities
