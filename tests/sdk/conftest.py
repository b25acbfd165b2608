"""Starts the real `llamay serve` once for the SDK tests.

The binary is target/release/llamay (built by scripts/test, or set LLAMAY_BIN); the
model is the SmolLM2 test model from scripts/fetch-test-models.
"""
import json
import os
import socket
import subprocess
import time
import urllib.request

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(model, ctx="1024", env=None, extra=()):
    """`llamay serve` of `model` (plus `extra` flags) on a free port."""
    binary = os.environ.get("LLAMAY_BIN", os.path.join(ROOT, "target", "release", "llamay"))
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "serve", "-m", model, "-addr", f"127.0.0.1:{port}", "-ctx", ctx, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            with urllib.request.urlopen(base + "/health", timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise RuntimeError("llamay serve did not start: " + proc.stderr.read())
        time.sleep(0.2)
    with urllib.request.urlopen(base + "/v1/models") as r:
        name = json.load(r)["data"][0]["id"]
    return proc, {"base": base, "model": name, "path": model}


def _stop(proc):
    proc.terminate()
    proc.wait(timeout=10)


def _model(script, *args):
    """The path a model script of the repo prints (fetched or built if missing)."""
    return subprocess.check_output(
        ["python3", os.path.join(ROOT, "scripts", script), *args], text=True
    ).strip()


def _serve(model, ctx="1024"):
    proc, info = _start(model, ctx=ctx)
    yield info
    _stop(proc)


@pytest.fixture(scope="session")
def server():
    yield from _serve(_model("fetch-test-models", "--path", "smollm2"))


@pytest.fixture(scope="session")
def qwen3_server():
    """A reasoning model: random weights, Qwen3's real tokenizer and chat template
    (scripts/make-test-qwen3)."""
    yield from _serve(_model("make-test-qwen3"), ctx="2048")


@pytest.fixture(scope="session")
def harmony_server():
    """gpt-oss's harmony format: a random-weight gpt-oss over the real o200k_harmony
    vocabulary (scripts/make-moe-models gpt-oss-harmony)."""
    yield from _serve(_model("make-moe-models", "--path", "gpt-oss-harmony"))


@pytest.fixture(scope="session")
def qwen_server():
    """The Qwen2.5 test model (the seed's own family), whose template renders tools."""
    yield from _serve(_model("fetch-test-models", "--path", "qwen2.5"), ctx="2048")
