"""Tool calls under `tool_choice: "auto"` that are still guaranteed, through the official
`openai` SDK at temperature 1 (SmolLM2):

- tools beside a response schema: every answer is either valid calls or a
  schema-valid final answer, whichever the model chose;
- strict `auto`: text stays free, but every call the model opens is held to the
  offered tools and their schemas from its opener on (`llamay.tool_calls_opened`
  counts them), so each opened call comes back as a valid call; prose answers stay
  possible.

CI runs small counts; the issue's (100 requests beside a schema, 100 opened calls) are
`LLAMAY_BESIDE_REQUESTS=100 LLAMAY_STRICT_OPENED=100 pytest -s tests/sdk/test_strict_tools_sdk.py`
(docs/tools.md has the figures)."""
import json
import os
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai
import pytest

from test_tools_sdk import OPENAI_TOOLS, SCHEMAS

ANSWER = {"type": "object",
          "properties": {"city": {"type": "string", "maxLength": 24},
                         "temp_c": {"type": "integer", "minimum": -60, "maximum": 60}},
          "required": ["city", "temp_c"]}
FORMAT = {"type": "json_schema", "json_schema": {"name": "weather", "schema": ANSWER, "strict": True}}
# SmolLM2-135M opens a call in roughly one answer out of five with this prompt.
CALL_ME = [{"role": "system", "content": "You are a function-calling assistant. To answer, call a "
                                         "function: write <tool_call> then the call as JSON."},
           {"role": "user", "content": "Call the get_weather function for Paris."}]


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server["base"] + "/v1", api_key="unused", max_retries=0)


def check_calls(choice):
    """The calls of an answer (under `auto` text may come with them)."""
    assert choice.finish_reason == "tool_calls", choice
    for c in choice.message.tool_calls:
        assert c.function.name in SCHEMAS, c
        jsonschema.validate(json.loads(c.function.arguments), SCHEMAS[c.function.name])
    return len(choice.message.tool_calls)


def test_tools_beside_a_schema_give_calls_or_a_schema_valid_answer(oai, server):
    n = int(os.environ.get("LLAMAY_BESIDE_REQUESTS", "24"))
    ask = [{"role": "user", "content": "What is the weather in Paris? Answer in JSON, or call a tool."}]

    def one(seed):
        r = oai.chat.completions.create(model=server["model"], messages=ask, tools=OPENAI_TOOLS,
                                        response_format=FORMAT, temperature=1, max_tokens=96,
                                        seed=seed)
        c = r.choices[0]
        assert r.model_extra["llamay"]["constraint"] == "tools_or_schema", r
        if c.message.tool_calls:
            check_calls(c)
            # The grammar's calls-or-answer: nothing but calls.
            assert c.message.content is None, c
            return "calls"
        assert c.finish_reason == "stop", c
        jsonschema.validate(json.loads(c.message.content), ANSWER)
        return "answer"

    with ThreadPoolExecutor(8) as ex:
        kinds = list(ex.map(one, range(n)))
    print(f"beside a schema: {kinds.count('calls')} call answers, {kinds.count('answer')} schema "
          f"answers, of {n}")
    assert len(kinds) == n


def test_strict_auto_holds_every_opened_call_and_leaves_prose_free(oai, server):
    want = int(os.environ.get("LLAMAY_STRICT_OPENED", "6"))
    opened = valid = cut = prose = requests = 0
    seed = 0
    while opened < want and requests < 40 * want:
        def one(s):
            r = oai.chat.completions.create(model=server["model"], messages=CALL_ME,
                                            tools=OPENAI_TOOLS, tool_choice="auto",
                                            temperature=1, max_tokens=96, seed=s)
            n = r.model_extra["llamay"]["tool_calls_opened"]
            c = r.choices[0]
            got = check_calls(c) if c.message.tool_calls else 0
            return n, got, c
        with ThreadPoolExecutor(8) as ex:
            batch = list(ex.map(one, range(seed, seed + 32)))
        seed += 32
        for n, got, c in batch:
            requests += 1
            opened += n
            # A call cut off by the token limit is the only way to lose one.
            if c.finish_reason != "length":
                assert got == n, c
            valid += got
            cut += n - got
            prose += n == 0 and bool(c.message.content)
    print(f"strict auto: {requests} requests, {opened} calls opened, {valid} valid calls, "
          f"{cut} cut off by max_tokens, {prose} prose answers")
    assert opened >= want, f"only {opened} calls opened in {requests} requests"
    assert valid + cut == opened
    assert prose > 0


def test_strict_auto_greedy_prose_is_prose(oai, server):
    ask = [{"role": "user", "content": "Say hello to Ana in one short sentence."}]
    r = oai.chat.completions.create(model=server["model"], messages=ask, tools=OPENAI_TOOLS,
                                    tool_choice="auto", temperature=0, max_tokens=32)
    c = r.choices[0]
    assert c.message.tool_calls is None and c.message.content, c
    assert r.model_extra["llamay"]["tool_calls_opened"] == 0
    assert any("tool calls: enforced" in e for e in r.model_extra["llamay"]["enforced"])
