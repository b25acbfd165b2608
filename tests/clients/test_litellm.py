"""LiteLLM's completion() on llamay: the "openai/" provider on /v1, and the "ollama_chat/"
and "ollama/" providers on the server root (LiteLLM's own Ollama clients)."""
import json

import litellm
import pytest

litellm.telemetry = False

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "the city"}},
            "required": ["city"],
        },
    },
}
CAPITAL = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
STORY = [{"role": "user", "content": "Write a short story about a cat who likes the sea."}]


def _openai(server, **kw):
    return litellm.completion(model=f"openai/{server.model}", api_base=server.v1, api_key="x", **kw)


def test_openai_provider_completion(qwen):
    resp = _openai(qwen, messages=CAPITAL, temperature=0, max_tokens=16)
    assert "paris" in resp.choices[0].message.content.lower()


def test_openai_provider_tool_call(qwen):
    """tools with a named tool_choice: the call comes back with JSON arguments naming the city."""
    resp = _openai(
        qwen,
        messages=[{"role": "user", "content": "What is the weather like in Paris?"}],
        tools=[WEATHER_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        temperature=0,
        max_tokens=64,
    )
    calls = resp.choices[0].message.tool_calls
    assert calls and calls[0].function.name == "get_weather"
    assert "paris" in json.loads(calls[0].function.arguments)["city"].lower()


def test_openai_provider_streaming(smol, figure):
    chunks = _openai(smol, messages=STORY, max_tokens=100, stream=True)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    figure("content_chunks", len(pieces))
    assert len(pieces) >= 10
    assert "".join(pieces).strip()


def test_openai_provider_streaming_with_a_tool_offered(smol, figure):
    """stream=True with a tool offered and a text answer: the text arrives in many chunks."""
    chunks = _openai(smol, messages=STORY, max_tokens=100, stream=True, tools=[WEATHER_TOOL])
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    figure("content_chunks", len(pieces))
    assert "".join(pieces).strip()
    assert len(pieces) >= 10, f"text came in {len(pieces)} chunk(s)"


def test_openai_provider_streamed_tool_call(qwen, figure):
    """stream=True with a named tool_choice: LiteLLM reassembles the call from its
    deltas; the arguments parse and name the city, and they arrive in pieces."""
    chunks = _openai(
        qwen,
        messages=[{"role": "user", "content": "What is the weather like in Paris?"}],
        tools=[WEATHER_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        temperature=0,
        max_tokens=64,
        stream=True,
    )
    name, pieces = None, []
    for c in chunks:
        for call in (c.choices[0].delta.tool_calls or []) if c.choices else []:
            name = call.function.name or name
            if call.function.arguments:
                pieces.append(call.function.arguments)
    figure("argument_chunks", len(pieces))
    assert name == "get_weather"
    assert "paris" in json.loads("".join(pieces))["city"].lower()
    assert len(pieces) >= 2, f"the arguments came in {len(pieces)} piece(s)"


def test_ollama_chat_provider(qwen):
    """model="ollama_chat/<name>": LiteLLM posts to /api/chat (its body has no JSON content type)."""
    resp = litellm.completion(model=f"ollama_chat/{qwen.model}", api_base=qwen.base, messages=CAPITAL, temperature=0)
    assert "paris" in resp.choices[0].message.content.lower()


def test_ollama_chat_provider_streaming(smol, figure):
    chunks = litellm.completion(
        model=f"ollama_chat/{smol.model}", api_base=smol.base, messages=STORY, max_tokens=100, stream=True
    )
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    figure("content_chunks", len(pieces))
    assert len(pieces) >= 10


def test_ollama_chat_provider_tool_call(qwen):
    resp = litellm.completion(
        model=f"ollama_chat/{qwen.model}",
        api_base=qwen.base,
        messages=[{"role": "user", "content": "What is the weather like in Paris? Use the get_weather tool."}],
        tools=[WEATHER_TOOL],
        temperature=0,
    )
    calls = resp.choices[0].message.tool_calls
    assert calls and calls[0].function.name == "get_weather", resp
    assert isinstance(json.loads(calls[0].function.arguments)["city"], str)


def test_ollama_generate_provider(qwen):
    """model="ollama/<name>": LiteLLM posts the prompt to /api/generate."""
    resp = litellm.completion(model=f"ollama/{qwen.model}", api_base=qwen.base, messages=CAPITAL, temperature=0)
    assert "paris" in resp.choices[0].message.content.lower()


def test_context_overflow_is_context_window_exceeded(smol_ctx256, long_prompt):
    """An over-long prompt (-ctx 256): LiteLLM maps the 400 to its ContextWindowExceededError
    (what its Router's context-window fallbacks key on)."""
    with pytest.raises(litellm.ContextWindowExceededError):
        _openai(smol_ctx256, messages=[{"role": "user", "content": long_prompt}], max_tokens=16)
