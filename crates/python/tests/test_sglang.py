"""SGLang 0.5.23: the `llamay` grammar backend, loaded through SGLang's own plugin
loader and driven with SGLang's own code paths: the backend's cache/future dispatch,
`SamplingBatchInfo.update_regex_vocab_mask` (batch fill, move, `GrammarMask.apply`),
the result processor's `accept_token`, and speculative decoding's draft walk.

`sglang.srt.speculative.spec_utils` cannot be imported with the lean install CI uses
(it pulls the model layers: torchvision, torchaudio, vLLM's kernels), so the draft test
makes the calls its `traverse_tree` makes, in its order: for each draft token the
parent's row allows, `accept_token`, `fill_vocab_mask` into the token's row of a mask
from `allocate_vocab_mask`, then `rollback(1)`."""

import json
import types

import jsonschema
import numpy as np
import pytest
import torch

from drive import SCHEMA, allowed, hf_tokenizer, logits_allowed, pick


from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES  # noqa: E402
from sglang.srt.constrained.base_grammar_backend import (  # noqa: E402
    GRAMMAR_BACKEND_REGISTRY,
    InvalidGrammarObject,
)
from sglang.srt.plugins import load_plugins  # noqa: E402
from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo  # noqa: E402


@pytest.fixture(scope="module")
def backend():
    load_plugins()  # what launch_server and every scheduler process run first
    assert "llamay" in GRAMMAR_BACKEND_REGISTRY and "llamay" in GRAMMAR_BACKEND_CHOICES
    tok = hf_tokenizer()
    return GRAMMAR_BACKEND_REGISTRY["llamay"](None, tok, len(tok), {tok.eos_token_id})


def compiled(backend, key):
    value, hit = backend.get_cached_or_future_value(key, False)
    if not hit:
        value = value.result()
        backend.set_cache(key, value)
        value = value.copy()  # the scheduler gives each request a copy
    return value


def test_refused_schema_is_an_invalid_grammar_with_the_servers_message(backend):
    g = compiled(backend, ("json", json.dumps({"properties": {"a": {"not": {}}}})))
    assert isinstance(g, InvalidGrammarObject)
    assert g.error_message.startswith('properties.a uses "not"')
    bad = compiled(backend, ("ebnf", "root ::= nothing"))
    assert isinstance(bad, InvalidGrammarObject) and "1:10" in bad.error_message


def test_batch_decode_through_the_scheduler_paths(backend):
    tok = hf_tokenizer()
    n = len(tok)
    key = ("json", json.dumps(SCHEMA))
    grammars = [compiled(backend, key), None, compiled(backend, key)]
    _, hit = backend.get_cached_or_future_value(key, False)
    assert hit
    info = types.SimpleNamespace(
        grammars=grammars, temperatures=torch.ones(3, 1), vocab_size=n, device="cpu"
    )
    rng = np.random.default_rng(0)
    outs = [[], None, []]
    for step in range(80):
        SamplingBatchInfo.update_regex_vocab_mask(info)
        mask = info.grammar_mask.vocab_mask
        logits = torch.zeros(3, n)
        info.grammar_mask.apply(logits)
        assert len(logits_allowed(logits[1])) == n  # the unconstrained row is untouched
        for i in (0, 2):
            g = grammars[i]
            if g.finished:
                continue
            assert logits_allowed(logits[i]) == set(allowed(mask[i], n).tolist())
            assert set(allowed(mask[i], n).tolist()) == set(g.matcher.allowed_tokens())
            t = pick(mask[i], n, rng, prefer={tok.eos_token_id} if step > 40 else None)
            g.accept_token(t)  # as the batch result processor does
            outs[i].append(t)
        if all(grammars[i].finished for i in (0, 2)):
            break
    for i in (0, 2):
        assert grammars[i].is_terminated() and outs[i][-1] == tok.eos_token_id
        doc = json.loads(tok.decode(outs[i][:-1]))
        jsonschema.validate(doc, SCHEMA)
    assert outs[0] != outs[2]  # the copies walked independently


def test_speculative_tree_accepts_fills_and_rolls_back(backend):
    tok = hf_tokenizer()
    n = len(tok)
    g = compiled(backend, ("json", json.dumps(SCHEMA)))
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    g.accept_token(enc("{")[0])
    before = g.matcher.tokens
    # A chain: root (already accepted), a valid draft, then one the grammar refuses.
    good = enc('"')[0]
    bad = enc("}")[0]
    draft = torch.tensor([0, good, bad])
    nxt = torch.tensor([1, 2, -1])
    sib = torch.tensor([-1, -1, -1])
    bitmask = g.allocate_vocab_mask(vocab_size=n, batch_size=3, device="cpu")

    def visit(cur, parent):
        accepted = cur == 0 or bool(
            bitmask[parent][int(draft[cur]) // 32] & (1 << (int(draft[cur]) % 32))
        )
        if accepted:
            if cur != 0:
                g.accept_token(int(draft[cur]))
            if not g.is_terminated():
                g.fill_vocab_mask(bitmask, cur)
                if nxt[cur] != -1:
                    visit(int(nxt[cur]), cur)
            if cur != 0:
                g.rollback(1)
        if sib[cur] != -1:
            visit(int(sib[cur]), parent)

    visit(0, -1)
    assert g.matcher.tokens == before  # every accepted draft token was rolled back
    assert good in allowed(bitmask[0], n)
    assert bad not in allowed(bitmask[1], n)  # inside a key: "}" is refused
    # The refused token was never accepted, so row 2 keeps its unconstrained value.
    assert (bitmask[2] == -1).all()


def test_regex_and_copy(backend):
    tok = hf_tokenizer()
    g = compiled(backend, ("regex", "[0-9]{3}-[a-z]{2}"))
    c = g.copy()
    for t in tok("123-ab", add_special_tokens=False)["input_ids"]:
        g.accept_token(t)
    assert g.matcher.is_accepting() and not c.matcher.is_accepting()
    g.rollback(1)
    assert not g.matcher.is_accepting()
