"""The OpenAI Agents SDK (openai-agents) on llamay, set up as its docs show for other
providers: set_default_openai_client(AsyncOpenAI(base_url=...)), tracing disabled, and
each of its two model APIs (Chat Completions and Responses)."""
import asyncio

import pytest
from agents import (
    Agent,
    ModelSettings,
    Runner,
    function_tool,
    set_default_openai_api,
    set_default_openai_client,
    set_tracing_disabled,
)
from openai import AsyncOpenAI
from openai.types.responses import ResponseTextDeltaEvent
from pydantic import BaseModel

set_tracing_disabled(True)

APIS = ["chat_completions", "responses"]
weather_calls = []


@function_tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    weather_calls.append(city)
    return f"The weather in {city} is sunny and 23 degrees Celsius."


class City(BaseModel):
    name: str
    country: str


def _run(server, api, work):
    """Points the SDK at `server` through `api` and runs `work()` (a coroutine function),
    closing the client inside the same event loop."""

    async def main():
        client = AsyncOpenAI(base_url=server.v1, api_key="x")
        set_default_openai_client(client)
        set_default_openai_api(api)
        try:
            return await work()
        finally:
            await client.close()

    return asyncio.run(main())


@pytest.mark.parametrize("api", APIS)
def test_run_returns_output(qwen, api):
    agent = Agent(
        name="Assistant",
        instructions="Answer in one short sentence.",
        model=qwen.model,
        model_settings=ModelSettings(temperature=0, max_tokens=64),
    )
    result = _run(qwen, api, lambda: Runner.run(agent, "What is the capital of France?"))
    assert "paris" in result.final_output.lower()


@pytest.mark.parametrize("api", APIS)
def test_run_calls_a_function_tool(qwen, api):
    """An Agent with a function_tool, tool_choice naming it: the SDK parses the call's
    arguments, runs the tool with the city, and (tool_use_behavior="stop_on_first_tool")
    the run's output is the tool's result. The stop is there because the 0.5B test model
    at temperature 0 calls the tool again after every result instead of answering (its
    prompt was checked against the GGUF's own chat template)."""
    weather_calls.clear()
    agent = Agent(
        name="Weather",
        instructions="You report the weather.",
        model=qwen.model,
        tools=[get_weather],
        tool_use_behavior="stop_on_first_tool",
        model_settings=ModelSettings(temperature=0, max_tokens=96, tool_choice="get_weather"),
    )
    result = _run(qwen, api, lambda: Runner.run(agent, "What is the weather like in Paris?"))
    assert len(weather_calls) == 1 and "paris" in weather_calls[0].lower()
    assert "sunny" in result.final_output


@pytest.mark.parametrize("api", APIS)
def test_structured_output_with_a_tool_offered(qwen, api):
    """output_type=City with a tool offered: the SDK sends the tools and a json_schema
    response format together (llamay's tools_or_schema); the output parses as a City."""
    agent = Agent(
        name="Geo",
        model=qwen.model,
        tools=[get_weather],
        output_type=City,
        model_settings=ModelSettings(temperature=0, max_tokens=96),
    )
    result = _run(
        qwen, api, lambda: Runner.run(agent, "Name the city that is the capital of France, and its country.")
    )
    assert isinstance(result.final_output, City)
    assert "france" in result.final_output.country.lower()


# An answer SmolLM2 ends by itself at temperature 0 (about 130 tokens with a tool offered,
# 60 without): the SDK's Responses path raises on a `response.incomplete` stream, which
# is what a max_output_tokens cut sends.
RAIN = "Explain in one paragraph how rain forms."


async def _stream_text_deltas(agent, prompt):
    result = Runner.run_streamed(agent, prompt)
    deltas = []
    async for event in result.stream_events():
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            if event.data.delta:
                deltas.append(event.data.delta)
    return deltas, result.final_output


@pytest.mark.parametrize("api", APIS)
def test_run_streamed_with_a_tool_yields_text_deltas(smol, api, figure):
    """Runner.run_streamed, a tool offered, a text answer: raw_response_event text deltas
    arrive as the text is written (many), not as one piece at the end."""
    agent = Agent(
        name="Writer",
        model=smol.model,
        tools=[get_weather],
        model_settings=ModelSettings(temperature=0, max_tokens=400),
    )
    deltas, final = _run(smol, api, lambda: _stream_text_deltas(agent, RAIN))
    figure("text_delta_events", len(deltas))
    assert "".join(deltas).strip()
    assert final == "".join(deltas)
    assert len(deltas) >= 10, f"text came in {len(deltas)} delta event(s)"


@pytest.mark.parametrize("api", APIS)
def test_run_streamed_without_tools_yields_text_deltas(smol, api, figure):
    """The same stream with no tool: the baseline."""
    agent = Agent(name="Writer", model=smol.model, model_settings=ModelSettings(temperature=0, max_tokens=400))
    deltas, final = _run(smol, api, lambda: _stream_text_deltas(agent, RAIN))
    figure("text_delta_events", len(deltas))
    assert final == "".join(deltas)
    assert len(deltas) >= 10
