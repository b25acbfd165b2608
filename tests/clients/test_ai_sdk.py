"""Runs the Vercel AI SDK checks (tests/clients/ai-sdk, node's own test runner) against
the Qwen server, one pytest check per node test, so they land in the same summary.

The packages are the pins of tests/clients/ai-sdk/package.json, installed by
scripts/client-compat into $LLAMAY_NODE_CLIENTS (default ~/.cache/llamay/node-clients).
"""
import os
import re
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "ai-sdk", "ai-sdk.test.mjs")
CLIENTS = os.environ.get("LLAMAY_NODE_CLIENTS", os.path.expanduser("~/.cache/llamay/node-clients"))


def _names():
    with open(SCRIPT) as f:
        return re.findall(r"^test\('([^']+)'", f.read(), re.M)


def _js_regex_exact(name):
    return "^" + re.sub(r"([.*+?^${}()|\[\]\\/])", r"\\\1", name) + "$"


pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not os.path.isdir(os.path.join(CLIENTS, "node_modules", "ai")),
    reason="node or the AI SDK packages are missing (scripts/client-compat installs them)",
)


@pytest.mark.parametrize("name", _names())
def test_ai_sdk(qwen, name):
    env = dict(os.environ, LLAMAY_BASE=qwen.v1, LLAMAY_MODEL=qwen.model, LLAMAY_NODE_CLIENTS=CLIENTS)
    env.setdefault("LLAMAY_CLIENTS_REPORT", os.path.join(HERE, "..", "..", "target", "client-compat"))
    run = subprocess.run(
        ["node", "--test", "--test-name-pattern", _js_regex_exact(name), SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    out = run.stdout + run.stderr
    for line in out.splitlines():
        if "[figure]" in line:
            print(line.lstrip("# "))
    if run.returncode == 0 and re.search(r"^# pass 1$", out, re.M):
        return
    reason = re.search(r"^\s+error: (.*)$", out, re.M)
    pytest.fail(f"{reason.group(1) if reason else 'node --test failed'}\n{out[-4000:]}", pytrace=False)
