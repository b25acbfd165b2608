"""Helpers the engine-driver tests share: a schema, the rebuilt SmolLM2 tokenizer,
sampling from a filled bitmask row."""

import functools

import numpy as np
import torch

import llamay.hf
from conftest import model_path

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 12},
        "days": {"type": "integer", "minimum": 1, "maximum": 9},
        "unit": {"enum": ["c", "f"]},
    },
    "required": ["city", "days", "unit"],
    "additionalProperties": False,
}


@functools.lru_cache(maxsize=None)
def hf_tokenizer():
    return llamay.hf.tokenizer_from_gguf(model_path("smollm2"))


def allowed(row, vocab_size):
    bits = np.unpackbits(row.numpy().view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits)


def pick(row, vocab_size, rng, prefer=None):
    """A random allowed token of a bitmask row (an end token as soon as one is
    allowed, when `prefer` lists them)."""
    ok = allowed(row, vocab_size)
    assert len(ok) > 0
    if prefer is not None:
        ends = [t for t in ok if t in prefer]
        if ends:
            return int(ends[0])
    return int(rng.choice(ok))


def logits_allowed(logits_row):
    return set(torch.isfinite(logits_row).nonzero().flatten().tolist())
