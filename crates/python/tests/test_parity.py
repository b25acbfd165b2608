"""Parity: every step's mask from the Python API equals the Rust crate's, bit for bit.

The Rust side is `mask_walks` (a bin of this crate, built on `llamay-constrain` and the
engine's tokenizer exactly as the server builds its vocabulary): seeded random walks
over corpus schemas, printing each step's mask as the SHA-256 of its 32-bit words and
the token it took. Here the same tokens are replayed through `llamay.Matcher`, the mask
written into a numpy row, hashed, compared. Refusals must match word for word.

`LLAMAY_PARITY_SCHEMAS` sets the sample (CI: 40 per tokenizer; the closing note's figure
is 320, run by hand).
"""

import hashlib
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import llamay
from conftest import REPO, corpus_sample, env_int, model_path, schema_of, tokenizer

STEPS = 48


def walker():
    exe = os.environ.get("LLAMAY_MASK_WALKS") or str(
        pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release" / "mask_walks"
    )
    if not pathlib.Path(exe).exists():
        subprocess.run(
            ["cargo", "build", "--release", "-p", "llamay-python", "--bin", "mask_walks"],
            cwd=REPO,
            check=True,
        )
    return exe


@pytest.mark.parametrize("model", ["smollm2", "gemma3"])
def test_masks_equal_the_rust_crates_bit_for_bit(model):
    files = corpus_sample(env_int("LLAMAY_PARITY_SCHEMAS", 40))
    out = subprocess.run(
        [walker(), model_path(model), "7", str(STEPS)] + [str(f) for f in files],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    walks = [json.loads(line) for line in out.splitlines()]
    assert len(walks) == len(files)
    tok = tokenizer(model)
    row = np.zeros((1, llamay.bitmask_words(tok.vocab_size)), dtype=np.int32)
    steps = walked = 0
    for f, w in zip(files, walks):
        schema = schema_of(f)
        if "refused" in w:
            with pytest.raises(llamay.ConstraintError) as e:
                llamay.Matcher(tok, llamay.Grammar.json_schema(schema))
            assert str(e.value) in w["refused"], f
            continue
        m = llamay.Matcher(tok, llamay.Grammar.json_schema(schema))
        walked += 1
        for i, want in enumerate(w["sha256"]):
            m.fill_next_token_bitmask(row, 0)
            got = hashlib.sha256(row.tobytes()).hexdigest()
            assert got == want, f"{f.name} step {i}"
            steps += 1
            if i < len(w["tokens"]):
                assert m.consume_token(w["tokens"][i]), f"{f.name} step {i}"
    print(f"{model}: {walked} walks of {len(files)} schemas, {steps} masks equal")
    assert walked >= len(files) * 3 // 4
