"""pydantic-ai: an Agent on OpenAIChatModel with OpenAIProvider(base_url=...), as its docs
show for OpenAI-compatible servers."""
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, NativeOutput
from pydantic_ai.exceptions import ModelContextWindowExceededError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings


class City(BaseModel):
    name: str
    country: str


def _model(server):
    return OpenAIChatModel(server.model, provider=OpenAIProvider(base_url=server.v1, api_key="x"))


SETTINGS = ModelSettings(temperature=0, max_tokens=128)


def test_structured_output_tool_output(qwen):
    """output_type=City (pydantic-ai's default tool output: a final_result tool, tool_choice
    required): the run's output is a City."""
    agent = Agent(_model(qwen), output_type=City, model_settings=SETTINGS)
    result = agent.run_sync("Name the city that is the capital of France, and its country.")
    assert isinstance(result.output, City)
    assert "paris" in result.output.name.lower()
    assert "france" in result.output.country.lower()


def test_structured_output_native(qwen):
    """NativeOutput(City): response_format json_schema."""
    agent = Agent(_model(qwen), output_type=NativeOutput(City), model_settings=SETTINGS)
    result = agent.run_sync("Which city is the capital of France?")
    assert isinstance(result.output, City)
    assert "paris" in result.output.name.lower()


def test_agent_calls_its_tool(qwen):
    """A tool the agent must call to answer (output_type=int: the run ends with the
    final_result tool): the tool runs, and its result is the run's output."""
    agent = Agent(_model(qwen), output_type=int, model_settings=SETTINGS)
    calls = []

    @agent.tool_plain
    def get_secret_number(owner: str) -> int:
        """Return the secret number of the given owner."""
        calls.append(owner)
        return 4817

    result = agent.run_sync("What is Alice's secret number? Look it up with the get_secret_number tool.")
    assert calls, "the agent never called get_secret_number"
    assert "alice" in calls[0].lower()
    assert result.output == 4817


def test_context_overflow_is_model_context_window_exceeded(smol_ctx256, long_prompt):
    """An over-long prompt (-ctx 256) raises pydantic-ai's ModelContextWindowExceededError,
    which its compaction and FallbackModel act on."""
    agent = Agent(_model(smol_ctx256), model_settings=SETTINGS)
    with pytest.raises(ModelContextWindowExceededError):
        agent.run_sync(long_prompt)
