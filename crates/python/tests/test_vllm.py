"""vLLM 0.33.0: `LlamayBackend`/`LlamayGrammar` driven as `StructuredOutputManager`
drives a backend (compile, allocate, `_fill_bitmasks` over a batch, accept, validate a
speculative draft, roll back, terminate, reset), and the `LogitsProcessor` route
loaded by vLLM's own by-name loader and fed vLLM's `BatchUpdate`s."""

import json
import types

import jsonschema
import numpy as np
import pytest
import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import (
    BatchUpdate,
    MoveDirectionality,
    _load_logitsprocs_by_fqcns,
)
from vllm.v1.structured_output import StructuredOutputManager
from vllm.v1.structured_output.backend_types import StructuredOutputOptions

import llamay
import llamay.vllm
from drive import SCHEMA, allowed, hf_tokenizer, logits_allowed, pick


def manager_with(bitmask):
    # The two fields `_fill_bitmasks` reads, set as __init__ sets them.
    return types.SimpleNamespace(_grammar_bitmask=bitmask, _full_mask=torch.tensor(-1, dtype=torch.int32))


def test_backend_through_the_managers_fill_accept_validate_rollback():
    tok = hf_tokenizer()
    n = len(tok)
    backend = llamay.vllm.LlamayBackend(None, tok, n)
    g = backend.compile_grammar(StructuredOutputOptions.JSON, json.dumps(SCHEMA), {tok.eos_token_id})
    r = backend.compile_grammar(StructuredOutputOptions.REGEX, "(yes|no)")
    bitmask = backend.allocate_token_bitmask(3)
    mgr = manager_with(bitmask)
    rng = np.random.default_rng(1)
    out = []
    for step in range(80):
        StructuredOutputManager._fill_bitmasks(mgr, [(g, 0, True, ()), (r, 2, True, ())])
        assert (bitmask[1] == -1).all()
        if g.is_terminated():
            break
        assert set(allowed(bitmask[0], n).tolist()) == set(g.matcher.allowed_tokens())
        t = pick(bitmask[0], n, rng, prefer={tok.eos_token_id} if step > 40 else None)
        # A speculative draft: the sampled token, then one the grammar refuses.
        refused = next(x for x in range(n) if x not in set(allowed(bitmask[0], n)))
        assert g.validate_tokens([t, refused, -1]) in ([t], [t, refused])
        assert g.validate_tokens([refused]) == []
        assert g.accept_tokens("req", [t])
        out.append(t)
    assert g.is_terminated() and out[-1] == tok.eos_token_id
    jsonschema.validate(json.loads(tok.decode(out[:-1])), SCHEMA)
    # Terminated: the manager leaves the row unmasked.
    StructuredOutputManager._fill_bitmasks(mgr, [(g, 0, True, ())])
    assert (bitmask[0] == -1).all()
    g.rollback(3)  # back before the end token and two more
    assert not g.is_terminated() and g.matcher.tokens == out[:-3]
    assert not g.accept_tokens("req", [refused])
    g.reset()
    assert g.matcher.tokens == []
    with pytest.raises(llamay.ConstraintError):
        backend.compile_grammar(StructuredOutputOptions.JSON, '{"if": {}}')


def test_logits_processor_loads_by_name_and_follows_batch_updates(monkeypatch):
    tok = hf_tokenizer()
    n = len(tok)
    ours = llamay.Tokenizer.from_hf(tok)
    monkeypatch.setattr(llamay.vllm.LogitsProcessor, "_load_tokenizer", staticmethod(lambda cfg: ours))
    (cls,) = _load_logitsprocs_by_fqcns(["llamay.vllm:LogitsProcessor"])
    assert cls is llamay.vllm.LogitsProcessor
    with pytest.raises(ValueError) as e:
        cls.validate_params(SamplingParams(extra_args={"llamay": {"json_schema": {"not": {}}}}))
    assert "cannot honour" in str(e.value)
    lp = cls(None, torch.device("cpu"), False)
    constrained = SamplingParams(extra_args={"llamay": {"json_schema": SCHEMA}})
    out_a, out_b = [], []
    lp.update_state(
        BatchUpdate(batch_size=2, removed=[], added=[(0, SamplingParams(), [1], out_b), (1, constrained, [1], out_a)], moved=[])
    )
    # The engine swaps the two rows: the constrained request is now row 0.
    lp.update_state(BatchUpdate(batch_size=2, removed=[], added=[], moved=[(0, 1, MoveDirectionality.SWAP)]))
    rng = np.random.default_rng(2)
    for step in range(80):
        logits = torch.zeros(2, n)
        lp.apply(logits)
        assert len(logits_allowed(logits[1])) == n
        ok = sorted(logits_allowed(logits[0]))
        if step > 40 and tok.eos_token_id in ok:
            t = tok.eos_token_id
        else:
            t = int(rng.choice(ok))
        out_a.append(t)
        out_b.append(int(rng.integers(n)))
        lp.update_state(None)
        if t == tok.eos_token_id:
            break
    assert out_a[-1] == tok.eos_token_id
    jsonschema.validate(json.loads(tok.decode(out_a[:-1])), SCHEMA)
    lp.update_state(BatchUpdate(batch_size=1, removed=[0], added=[], moved=[]))
    logits = torch.zeros(1, n)
    assert lp.apply(logits) is logits and torch.isfinite(logits).all()
