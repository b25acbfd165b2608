"""The Python API beside llguidance's Python API, in one run, on the same corpus
schemas and the same tokenizer (SmolLM2's, rebuilt from its GGUF into tokenizer.json
and given to both).

Per schema: compile (grammar text -> a matcher ready for this vocabulary), then a seeded
walk that takes, each step, a random token both engines allow (so both walk the same
tokens), timing each engine's `fill_next_token_bitmask` into a torch int32 row (the two
taking turns going first) and its `consume_token` (llguidance does part of its work when
consuming). The first schema
warms both up and is not counted. Prints
the table for docs/benchmarks.md.

    ~/.cache/llamay/venv-py/bin/python crates/python/bench/vs_llguidance.py [N_SCHEMAS] [STEPS]
"""

import json
import pathlib
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
import llguidance  # noqa: E402
import llguidance.hf  # noqa: E402
import llguidance.torch  # noqa: E402

import llamay  # noqa: E402
import llamay.hf  # noqa: E402
from conftest import corpus_sample, model_path, schema_of  # noqa: E402


def allowed(row, n):
    return set(np.flatnonzero(np.unpackbits(row.numpy().view(np.uint8), bitorder="little")[:n]).tolist())


def main():
    n_schemas = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    torch.set_num_threads(1)
    hf = llamay.hf.tokenizer_from_gguf(model_path("smollm2"))
    n = len(hf)
    ours_tok = llamay.Tokenizer.from_hf(hf)
    llg_tok = llguidance.hf.from_tokenizer(hf, n_vocab=n, eos_token=hf.eos_token_id)
    ours_row = llamay.allocate_token_bitmask(1, n)
    llg_row = llguidance.torch.allocate_token_bitmask(1, n)
    rng = np.random.default_rng(0)
    c_ours, c_llg, f_ours, f_llg, k_ours, k_llg = [], [], [], [], [], []
    refused = {"llamay": 0, "llguidance": 0}
    for i, f in enumerate(corpus_sample(n_schemas + 1)):
        text = json.dumps(schema_of(f))
        t0 = time.perf_counter()
        try:
            om = llamay.Matcher(ours_tok, llamay.Grammar.json_schema(text))
        except llamay.ConstraintError:
            refused["llamay"] += 1
            continue
        t1 = time.perf_counter()
        try:
            g = llguidance.LLMatcher.grammar_from_json_schema(text, defaults={"whitespace_flexible": True})
            lm = llguidance.LLMatcher(llg_tok, g)
            bad = lm.is_error()
        except Exception:
            bad = True
        t2 = time.perf_counter()
        if bad:
            refused["llguidance"] += 1
            continue
        warm = i == 0
        if not warm:
            c_ours.append(t1 - t0)
            c_llg.append(t2 - t1)
        for step in range(steps):
            # The engines take turns going first: the one right after the walk's own
            # Python (sets of up to 49k ints) meets the interpreter's and torch's code
            # out of cache, which costs it tens of microseconds.
            fills = [
                lambda: om.fill_next_token_bitmask(ours_row, 0),
                lambda: llguidance.torch.fill_next_token_bitmask(lm, llg_row, 0),
            ]
            spent = [0.0, 0.0]
            for e in (0, 1) if step % 2 == 0 else (1, 0):
                a = time.perf_counter()
                fills[e]()
                spent[e] = time.perf_counter() - a
            if not warm:
                f_ours.append(spent[0])
                f_llg.append(spent[1])
            both = sorted(allowed(ours_row[0], n) & allowed(llg_row[0], n))
            if not both:
                break
            t = int(rng.choice(both))
            a = time.perf_counter()
            ok_o = om.consume_token(t)
            b = time.perf_counter()
            ok_l = lm.consume_token(t)
            c = time.perf_counter()
            if not warm:
                k_ours.append(b - a)
                k_llg.append(c - b)
            if not ok_o or not ok_l or t == hf.eos_token_id:
                break
    mean_o, mean_l = statistics.mean(f_ours) * 1e6, statistics.mean(f_llg) * 1e6
    p50_o, p50_l = statistics.median(c_ours) * 1e3, statistics.median(c_llg) * 1e3
    print(f"schemas compiled by both: {len(c_ours)}; masks: {len(f_ours)}; refused: {refused}")
    print(f"llguidance {llguidance.__version__ if hasattr(llguidance, '__version__') else ''}")
    print("| measure | llamay (Python API) | llguidance 1.9.1 (Python API) | ratio |")
    print("|---|---|---|---|")
    print(f"| mean per-token fill | {mean_o:.1f} us | {mean_l:.1f} us | {mean_o / mean_l:.2f}x |")
    step_o = (sum(f_ours) + sum(k_ours)) / len(f_ours) * 1e6
    step_l = (sum(f_llg) + sum(k_llg)) / len(f_llg) * 1e6
    print(f"| mean per-token fill + consume | {step_o:.1f} us | {step_l:.1f} us | {step_o / step_l:.2f}x |")
    p90 = lambda xs: sorted(xs)[int(len(xs) * 0.9)] * 1e3  # noqa: E731
    print(f"| compile p50 | {p50_o:.2f} ms | {p50_l:.2f} ms | {p50_o / p50_l:.2f}x |")
    print(f"| compile p90 | {p90(c_ours):.2f} ms | {p90(c_llg):.2f} ms | {p90(c_ours) / p90(c_llg):.2f}x |")


if __name__ == "__main__":
    main()
