"""Shared fixtures for the llamay package's tests: the real test models (fetched by
the repo's script, cached), the shared schema corpus, the Rust reference walker."""

import functools
import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
CORPUS = REPO.parent / "shared" / "corpus"
if not CORPUS.exists():
    CORPUS = pathlib.Path(os.environ.get("LLAMAY_SHARED", "/work/shared")) / "corpus"


@functools.lru_cache(maxsize=None)
def model_path(name):
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "fetch-test-models"), "--path", name],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1]


@functools.lru_cache(maxsize=None)
def tokenizer(name):
    import llamay

    return llamay.Tokenizer.from_gguf(model_path(name))


def corpus_sample(n):
    """`n` JSONSchemaBench entries spread evenly over the sorted corpus (stable)."""
    files = sorted((CORPUS / "jsonschemabench").glob("*.json"))
    if n >= len(files):
        return files
    step = len(files) / n
    return [files[int(i * step)] for i in range(n)]


def schema_of(path):
    doc = json.loads(pathlib.Path(path).read_text())
    return doc["schema"] if isinstance(doc, dict) and "schema" in doc else doc


def env_int(name, default):
    return int(os.environ.get(name, default))


@pytest.fixture(scope="session")
def smollm2():
    return tokenizer("smollm2")


@pytest.fixture(scope="session")
def gemma3():
    return tokenizer("gemma3")
