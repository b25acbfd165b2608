"""instructor (its own venv: instructor 1.17 pins jiter<0.15, which the openai 3.5x that
pydantic-ai needs cannot share) on llamay's OpenAI chat route."""
import instructor
from openai import OpenAI
from pydantic import BaseModel

TEXT = "Alice Smith is 31 years old. She has lived in Paris, Lyon and Berlin."


class User(BaseModel):
    name: str
    age: int
    cities: list[str]


def _messages():
    return [{"role": "user", "content": f"Extract the user from this text: {TEXT}"}]


def test_tools_mode_create_partial_streams_the_model(qwen, figure):
    """Mode.TOOLS: the model is a forced tool call; create_partial streams it. The call's
    arguments must arrive in pieces, so instructor yields several growing partial users,
    and the last one validates as a User."""
    client = instructor.from_openai(OpenAI(base_url=qwen.v1, api_key="x"), mode=instructor.Mode.TOOLS)
    partials = list(
        client.chat.completions.create_partial(
            model=qwen.model, response_model=User, messages=_messages(), max_tokens=200
        )
    )
    states = []
    for p in partials:
        dump = p.model_dump()
        if not states or states[-1] != dump:
            states.append(dump)
    figure("partials_yielded", len(partials))
    figure("distinct_partial_states", len(states))
    assert partials, "no partial object at all"
    last = User.model_validate(partials[-1].model_dump())
    assert "alice" in last.name.lower()
    assert last.age == 31
    assert any("paris" in c.lower() for c in last.cities)
    assert len(states) >= 3, f"the tool call's arguments came in too few pieces: {states}"


def test_json_mode_returns_the_model(qwen):
    """Mode.JSON: response_format json_object plus the schema in the prompt; instructor
    parses and validates the answer."""
    client = instructor.from_openai(OpenAI(base_url=qwen.v1, api_key="x"), mode=instructor.Mode.JSON)
    user = client.chat.completions.create(
        model=qwen.model, response_model=User, messages=_messages(), max_tokens=200, max_retries=2
    )
    assert isinstance(user, User)
    assert "alice" in user.name.lower()
    assert user.age == 31
