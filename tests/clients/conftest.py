"""Servers for the client-compatibility suite (scripts/client-compat; docs/clients.md).

Each fixture starts the real `llamay serve` once per session, as tests/sdk does: the
binary is $LLAMAY_BIN (default: the CI target folder's release build), the models are the
two real test models from scripts/fetch-test-models. `smol` and `qwen` have a 2048-token
context; `smol_ctx256` is a second SmolLM2 server with `-ctx 256` for the
context-overflow checks.

Checks that measure something (partial counts, chunk counts, time to first content)
call `figure(name, value)`: the values are written as JSON under $LLAMAY_CLIENTS_REPORT
(default target/client-compat) and the script prints them in its summary.
"""
import json
import os
import re
import socket
import subprocess
import time
import urllib.request

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REPORT = os.environ.get("LLAMAY_CLIENTS_REPORT", os.path.join(ROOT, "target", "client-compat"))

# LiteLLM fetches its price list from the network at import unless told not to, and
# this machine reaches only package registries (LiteLLM's own documented switch).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _binary():
    if os.environ.get("LLAMAY_BIN"):
        return os.environ["LLAMAY_BIN"]
    for candidate in (
        os.path.join(ROOT, "target", "release", "llamay"),
        os.path.expanduser("~/.cache/llamay/ci-target/release/llamay"),
    ):
        if os.path.exists(candidate):
            return candidate
    raise RuntimeError("no llamay binary: set LLAMAY_BIN")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _model_path(which):
    return subprocess.check_output(
        ["python3", os.path.join(ROOT, "scripts", "fetch-test-models"), "--path", which],
        text=True,
    ).strip()


class Server:
    """One `llamay serve`: `base` (the server root, Ollama's base URL), `v1` (the OpenAI
    base URL) and `model` (the name /v1/models reports)."""

    def __init__(self, model_path, ctx):
        port = _free_port()
        self.log = open(os.path.join(REPORT, f"serve-{os.path.basename(model_path)}-{ctx}-{port}.log"), "w")
        self.proc = subprocess.Popen(
            [_binary(), "serve", "-m", model_path, "-addr", f"127.0.0.1:{port}", "-ctx", str(ctx)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.base = f"http://127.0.0.1:{port}"
        self.v1 = self.base + "/v1"
        self.ctx = ctx
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.proc.kill()
                raise RuntimeError(f"llamay serve did not start; see {self.log.name}")
            time.sleep(0.2)
        with urllib.request.urlopen(self.v1 + "/models") as r:
            self.model = json.load(r)["data"][0]["id"]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _serve(which, ctx):
    os.makedirs(REPORT, exist_ok=True)
    server = Server(_model_path(which), ctx)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def smol():
    """SmolLM2-135M-Instruct, -ctx 2048: fast, for counts and timings."""
    yield from _serve("smollm2", 2048)


@pytest.fixture(scope="session")
def qwen():
    """The Qwen2.5 0.5B instruct test model, -ctx 2048: for answers whose content is checked."""
    yield from _serve("qwen2.5", 2048)


@pytest.fixture(scope="session")
def smol_ctx256():
    """SmolLM2 with -ctx 256: a long prompt overflows it."""
    yield from _serve("smollm2", 256)


@pytest.fixture()
def figure(request):
    """figure(name, value): records a measured value for the summary and docs/clients.md."""
    os.makedirs(os.path.join(REPORT, "figures"), exist_ok=True)
    test = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)
    path = os.path.join(REPORT, "figures", test + ".json")
    values = {}

    def record(name, value):
        values[name] = value
        with open(path, "w") as f:
            json.dump({"test": request.node.nodeid, "figures": values}, f, indent=1)
        print(f"[figure] {name} = {value}")

    return record


@pytest.fixture(scope="session")
def long_prompt():
    """A prompt far over 256 tokens, in plain words (about 900 tokens for either tokenizer)."""
    return "Summarise this text. " + " ".join(
        f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(60)
    )
