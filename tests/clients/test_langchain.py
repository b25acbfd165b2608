"""LangChain: langchain-openai's ChatOpenAI on /v1 and langchain-ollama's ChatOllama on the
server root, as their docs show them."""
import json

import ollama
import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.tools import tool
from langchain_ollama import ChatOllama
from langchain_openai import ChatOpenAI
from langchain_openai.chat_models.base import OpenAIContextOverflowError
from pydantic import BaseModel, Field


class City(BaseModel):
    """A city and the country it is in."""

    name: str = Field(description="the city's name")
    country: str = Field(description="the country the city is in")


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"It is sunny in {city}."


def _chat(server, **kw):
    return ChatOpenAI(model=server.model, base_url=server.v1, api_key="x", temperature=0, **kw)


def test_structured_output_json_schema(qwen):
    """with_structured_output(method="json_schema"): response_format json_schema; the
    answer comes back as a City."""
    city = _chat(qwen).with_structured_output(City, method="json_schema").invoke(
        "Which city is the capital of France?"
    )
    assert isinstance(city, City)
    assert "paris" in city.name.lower()
    assert "france" in city.country.lower()


def test_structured_output_json_mode(qwen):
    """with_structured_output(method="json_mode"): response_format json_object; the keys
    are named in the prompt, LangChain parses the answer into a City."""
    city = _chat(qwen).with_structured_output(City, method="json_mode").invoke(
        "Which city is the capital of France? Answer in JSON with the keys name and country."
    )
    assert isinstance(city, City)
    assert "paris" in city.name.lower()


def test_bind_tools_returns_parsed_tool_calls(qwen):
    """bind_tools with tool_choice naming the tool: a tool call whose args LangChain
    parsed into a dict that names the city."""
    msg = _chat(qwen).bind_tools([get_weather], tool_choice="get_weather").invoke(
        "What is the weather like in Paris?"
    )
    assert len(msg.tool_calls) == 1, msg
    call = msg.tool_calls[0]
    assert call["name"] == "get_weather"
    assert isinstance(call["args"], dict)
    assert "paris" in call["args"]["city"].lower()
    assert not msg.invalid_tool_calls


def test_bind_tools_auto_call(qwen):
    """bind_tools with the default tool_choice (auto): the model may call; when it does
    the call is the offered tool with a string city."""
    msg = _chat(qwen).bind_tools([get_weather]).invoke("What is the weather like in Paris? Use the tool.")
    assert not msg.invalid_tool_calls
    for call in msg.tool_calls:
        assert call["name"] == "get_weather"
        assert isinstance(call["args"].get("city"), str)


def test_stream_with_a_tool_bound_yields_text_chunks(smol, figure):
    """.stream() of a text answer with a tool bound (every agent binds its tools on every
    turn): the text must arrive in many chunks, not all at the end."""
    llm = _chat(smol, max_tokens=120).bind_tools([get_weather])
    chunks = [c for c in llm.stream("Write a short story about a cat who likes the sea.")]
    text_chunks = [c for c in chunks if isinstance(c.content, str) and c.content]
    figure("text_chunks", len(text_chunks))
    assert "".join(c.content for c in text_chunks).strip()
    assert len(text_chunks) >= 10, f"text came in {len(text_chunks)} chunk(s)"


def test_stream_without_tools_yields_text_chunks(smol, figure):
    """The same stream without tools: the baseline the previous check is held to."""
    chunks = [c for c in _chat(smol, max_tokens=120).stream("Write a short story about a cat who likes the sea.")]
    text_chunks = [c for c in chunks if isinstance(c.content, str) and c.content]
    figure("text_chunks", len(text_chunks))
    assert len(text_chunks) >= 10


def test_chat_ollama_invoke(qwen):
    """ChatOllama on the server root: /api/chat answers."""
    msg = ChatOllama(model=qwen.model, base_url=qwen.base, temperature=0).invoke(
        "What is the capital of France? Answer in one word."
    )
    assert "paris" in msg.content.lower()


def test_chat_ollama_format_json_returns_an_object(qwen):
    """ChatOllama(format="json"): the content parses as a JSON object."""
    msg = ChatOllama(model=qwen.model, base_url=qwen.base, format="json", temperature=0, num_predict=64).invoke(
        "What is the capital of France? Reply in JSON."
    )
    value = json.loads(msg.content)
    assert isinstance(value, dict), msg.content


def test_chat_ollama_bind_tools(qwen):
    """ChatOllama.bind_tools: /api/chat with tools; the call comes back parsed."""
    msg = ChatOllama(model=qwen.model, base_url=qwen.base, temperature=0).bind_tools([get_weather]).invoke(
        "What is the weather like in Paris? Use the get_weather tool."
    )
    assert msg.tool_calls, msg
    assert msg.tool_calls[0]["name"] == "get_weather"
    assert "paris" in msg.tool_calls[0]["args"]["city"].lower()


def test_chat_openai_context_overflow_is_langchains_type(smol_ctx256, long_prompt):
    """A prompt over the context (-ctx 256): LangChain classifies the 400 as a context
    overflow (langchain_openai's OpenAIContextOverflowError, a langchain_core
    ContextOverflowError), which is what its summarising/trimming middleware catches."""
    with pytest.raises(OpenAIContextOverflowError) as err:
        _chat(smol_ctx256).invoke(long_prompt)
    assert isinstance(err.value, ContextOverflowError)


def test_chat_ollama_context_overflow_has_ollamas_wording(smol_ctx256, long_prompt):
    """ChatOllama classifies no error itself: the caller sees the ollama client's
    ResponseError, so its text should be Ollama's own ("the input length exceeds the
    context length"), which code written against Ollama matches on."""
    with pytest.raises(ollama.ResponseError) as err:
        ChatOllama(model=smol_ctx256.model, base_url=smol_ctx256.base).invoke(long_prompt)
    assert "the input length exceeds the context length" in str(err.value)
