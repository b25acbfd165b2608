"""A stream with one tool offered must stream like one without (openai SDK, chat
completions): every agent framework offers its tools on every turn, so a text answer
with tools offered is the common case.

The same ~150-token text answer (SmolLM2, temperature 0, max_tokens 150) is asked for
with and without a tool: each request is run once to warm up (the prompt prefix is then
cached for both), then three times each, alternating; the median time to first content
with the tool must be within 1.5x of the median without, and the text must arrive as it
is written: a content chunk for at least 90% of the answer's tokens (usage's
completion_tokens), and at least 100 chunks where the answer is the 150-token story
(SmolLM2; Qwen2.5-Coder 0.5B declines the story with a tool offered, in 13 tokens).
"""
import statistics
import time

import pytest

from openai import OpenAI

PROMPT = "Write a long story about a cat who likes the sea."
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _stream(client, model, tools):
    extra = {"tools": tools} if tools else {}
    start = time.perf_counter()
    first = None
    chunks = 0
    text = []
    written = None
    for chunk in client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=150,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        **extra,
    ):
        if chunk.usage:
            written = chunk.usage.completion_tokens
        if chunk.choices and chunk.choices[0].delta.content:
            if first is None:
                first = time.perf_counter() - start
            chunks += 1
            text.append(chunk.choices[0].delta.content)
    total = time.perf_counter() - start
    return first, chunks, total, "".join(text), written


@pytest.mark.parametrize("which", ["smol", "qwen"])
def test_time_to_first_content_with_a_tool(which, request, figure):
    server = request.getfixturevalue(which)
    client = OpenAI(base_url=server.v1, api_key="x")
    _stream(client, server.model, None)
    _stream(client, server.model, [TOOL])
    plain, tooled = [], []
    for _ in range(3):
        plain.append(_stream(client, server.model, None))
        tooled.append(_stream(client, server.model, [TOOL]))
    ttft_plain = statistics.median(r[0] for r in plain)
    ttft_tools = statistics.median(r[0] for r in tooled)
    chunks_tools = min(r[1] for r in tooled)
    figure("ttft_no_tools_ms", round(ttft_plain * 1000, 1))
    figure("ttft_with_tool_ms", round(ttft_tools * 1000, 1))
    figure("ttft_ratio", round(ttft_tools / ttft_plain, 2))
    figure("content_chunks_no_tools", min(r[1] for r in plain))
    figure("content_chunks_with_tool", chunks_tools)
    figure("total_s_with_tool", round(statistics.median(r[2] for r in tooled), 2))
    assert all(r[3].strip() for r in tooled), "no text with the tool offered"
    for _, chunks, _, _, written in tooled:
        assert chunks >= 0.9 * written, f"{written} tokens came in {chunks} chunk(s)"
    if which == "smol":
        assert chunks_tools >= 100, f"the story came in {chunks_tools} chunk(s)"
    assert ttft_tools <= 1.5 * ttft_plain, f"time to first content {ttft_tools:.3f}s with a tool, {ttft_plain:.3f}s without"
