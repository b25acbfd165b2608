#!/usr/bin/env python3
"""The long load run (outside CI): N concurrent streaming clients for a fixed time
against `llamay serve`, then aggregate decode rate with 8 clients against 1.

    ~/.cache/llamay/venv-sdk/bin/python tests/sdk/load.py [--clients 32] [--seconds 120]

Starts target/release/llamay with the SmolLM2 test model unless --base is given.
Every stream must be complete and well formed, every constrained answer valid.
"""
import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time

import httpx

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCHEMA = {"type": "object",
          "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99},
                         "w": {"type": "string", "maxLength": 8}},
          "required": ["n", "w"]}


def check_doc(text):
    v = json.loads(text)
    assert set(v) == {"n", "w"} and 0 <= v["n"] <= 99 and len(v["w"]) <= 8, text


async def openai_stream(c, base, model, constrained, max_tokens):
    body = {"model": model, "messages": [{"role": "user", "content": "Give a number and a word as JSON."}],
            "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True}}
    if constrained:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}
    text, finish, usage, done = "", None, None, False
    async with c.stream("POST", base + "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200, r.status_code
        async for line in r.aiter_lines():
            if not line:
                continue
            assert line.startswith("data: "), line
            data = line[6:]
            if data == "[DONE]":
                done = True
                continue
            ch = json.loads(data)
            if ch["choices"]:
                text += ch["choices"][0]["delta"].get("content") or ""
                finish = ch["choices"][0]["finish_reason"] or finish
            usage = ch.get("usage") or usage
    assert done and finish and usage, "incomplete stream"
    if constrained and finish == "stop":
        check_doc(text)
    return usage["completion_tokens"]


async def anthropic_stream(c, base, model, constrained, max_tokens):
    body = {"model": model, "messages": [{"role": "user", "content": "Give a number and a word as JSON."}],
            "max_tokens": max_tokens, "stream": True}
    if constrained:
        body["llamay_schema"] = SCHEMA
    events, text, out = [], "", 0
    async with c.stream("POST", base + "/v1/messages", json=body) as r:
        assert r.status_code == 200, r.status_code
        event = None
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                d = json.loads(line[6:])
                assert d["type"] == event
                events.append(event)
                if event == "content_block_delta":
                    text += d["delta"]["text"]
                if event == "message_delta":
                    out = d["usage"]["output_tokens"]
                    stop = d["delta"]["stop_reason"]
    assert events[:3] == ["message_start", "content_block_start", "ping"], events
    assert events[-3:] == ["content_block_stop", "message_delta", "message_stop"], events
    if constrained and stop == "end_turn":
        check_doc(text)
    return out


async def ollama_stream(c, base, model, constrained, max_tokens):
    body = {"model": model, "messages": [{"role": "user", "content": "Give a number and a word as JSON."}],
            "options": {"num_predict": max_tokens}}
    if constrained:
        body["format"] = SCHEMA
    lines = []
    async with c.stream("POST", base + "/api/chat", json=body) as r:
        assert r.status_code == 200, r.status_code
        async for line in r.aiter_lines():
            if line:
                lines.append(json.loads(line))
    assert lines[-1]["done"] and not any(l["done"] for l in lines[:-1])
    if constrained and lines[-1]["done_reason"] == "stop":
        check_doc("".join(l["message"]["content"] for l in lines))
    return lines[-1]["eval_count"]


async def client_loop(i, base, model, until, stats):
    kinds = [openai_stream, anthropic_stream, ollama_stream]
    async with httpx.AsyncClient(timeout=300) as c:
        while time.time() < until:
            kind = kinds[(i + stats["requests"]) % 3]
            stats["requests"] += 1
            try:
                n = await kind(c, base, model, random.random() < 0.5, random.randint(8, 48))
                stats["tokens"] += n
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                stats["errors"].append(f"{kind.__name__}: {e!r}")


async def rate(base, model, n, tokens=64):
    async with httpx.AsyncClient(timeout=300) as c:
        async def one(i):
            r = await c.post(base + "/v1/completions", json={
                "model": model, "prompt": f"{i}, {i + 1}, {i + 2},", "max_tokens": tokens, "temperature": 0})
            return r.json()["usage"]["completion_tokens"]
        t0 = time.time()
        total = sum(await asyncio.gather(*(one(i) for i in range(n))))
        return total / (time.time() - t0)


def start_server():
    model = subprocess.check_output([sys.executable, os.path.join(ROOT, "scripts", "fetch-test-models"),
                                     "--path", "smollm2"], text=True).strip()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([os.path.join(ROOT, "target", "release", "llamay"), "serve", "-m", model,
                             "-addr", f"127.0.0.1:{port}", "-parallel", "16", "-queue", "128"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(base + "/health")
            break
        except httpx.HTTPError:
            time.sleep(0.2)
    return proc, base


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--base")
    a = ap.parse_args()
    proc, base = (None, a.base) if a.base else start_server()
    try:
        model = httpx.get(base + "/v1/models").json()["data"][0]["id"]
        stats = {"requests": 0, "tokens": 0, "errors": []}
        t0 = time.time()
        await asyncio.gather(*(client_loop(i, base, model, t0 + a.seconds, stats) for i in range(a.clients)))
        dt = time.time() - t0
        server = httpx.get(base + "/v1/stats").json()
        print(f"{a.clients} clients for {dt:.0f}s: {stats['requests']} streams, {len(stats['errors'])} errors, "
              f"{stats['tokens']} tokens ({stats['tokens'] / dt:.1f} tok/s), "
              f"mean batch {server['batching']['mean_sequences_per_step']:.2f}")
        for e in stats["errors"][:10]:
            print("  error:", e)
        one = await rate(base, model, 1)
        eight = await rate(base, model, 8)
        print(f"aggregate decode: 1 client {one:.1f} tok/s, 8 clients {eight:.1f} tok/s, ratio {eight / one:.2f}")
        return 1 if stats["errors"] else 0
    finally:
        if proc:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
