"""The Python API over the constraint crate: errors as the server words them, masks in
numpy and torch, consume / validate / rollback / copy / reset, threaded batch fill."""

import threading

import numpy as np
import pytest
import torch

import llamay

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "n": {"type": "integer"}},
    "required": ["name", "n"],
    "additionalProperties": False,
}


def toy():
    toks = [bytes([b]) for b in range(256)] + [b'{"name": "', b'", "n": ', b"</s>"]
    return llamay.Tokenizer.from_bytes(toks, [258])


def ids(text):
    return list(text.encode())


def test_refusal_carries_the_servers_message_and_location():
    with pytest.raises(llamay.ConstraintError) as e:
        llamay.Grammar.json_schema({"properties": {"a": {"not": {}}}})
    assert e.value.location == "properties.a"
    assert e.value.keyword == "not"
    assert e.value.message == (
        'properties.a uses "not", which llamay\'s constraint cannot honour; send a '
        "schema without it rather than one that is silently not enforced"
    )
    assert isinstance(e.value, ValueError)
    with pytest.raises(llamay.ConstraintError) as e:
        llamay.Grammar.gbnf('root ::= "a"\nx ::= y')
    assert (e.value.line, e.value.column) == (2, 7)


def test_validate_only_reports_what_is_not_enforced():
    # `date` is enforced; `json-pointer` is not, and says so.
    report = llamay.Grammar.check_json_schema(
        '{"type": "object", "properties": {"d": {"type": "string", "format": "date"},'
        ' "p": {"type": "string", "format": "json-pointer"}}}'
    )
    assert [(r["keyword"], r["location"], r["kind"]) for r in report] == [
        ("format", "properties.p", "ignored")
    ]
    with pytest.raises(llamay.ConstraintError):
        llamay.Grammar.check_json_schema({"if": {}})
    with pytest.raises(llamay.ConstraintError):
        llamay.Grammar.check_json_schema("{not json")
    assert llamay.Grammar.check_gbnf('root ::= "x"') is None
    g = llamay.Grammar.json_schema({"type": "string", "format": "json-pointer"})
    assert not g.is_fully_enforced and g.report[0]["keyword"] == "format"


def test_walk_consume_validate_rollback_copy_reset():
    tok = toy()
    m = llamay.Matcher(tok, llamay.Grammar.json_schema(SCHEMA))
    assert m.consume_token(256)  # {"name": "
    assert not m.consume_token(1)  # a raw control byte in a string: refused
    assert m.validate_tokens(ids("ab") + [257] + ids("x")) == 3
    assert m.tokens == [256]
    assert m.consume_tokens(ids("abc"))
    assert not m.consume_tokens(ids("d") + [ord("\n")])  # all or nothing
    assert m.tokens == [256] + ids("abc")
    c = m.copy()
    m.rollback(2)
    assert m.tokens == [256, ord("a")]
    assert c.tokens == [256] + ids("abc")
    assert c.consume_tokens([257] + ids("12}"))
    assert c.is_accepting() and c.is_stopped() and not c.is_terminated()
    assert 258 in c.allowed_tokens() and ord("a") not in c.allowed_tokens()
    assert c.consume_token(258) and c.is_terminated() and not c.is_accepting()
    m.reset()
    assert m.tokens == [] and {ord("{"), 256} <= set(m.allowed_tokens())
    assert 258 not in m.allowed_tokens()
    with pytest.raises(ValueError):
        m.rollback(1)


def test_bitmask_in_numpy_and_torch_matches_the_allowed_list():
    tok = toy()
    m = llamay.Matcher(tok, llamay.Grammar.json_schema(SCHEMA))
    m.consume_token(256)
    allowed = set(m.allowed_tokens())
    words = llamay.bitmask_words(tok.vocab_size)
    arr = np.full((3, words + 2), -1, dtype=np.int32)  # wider rows get zeros past the vocab
    m.fill_next_token_bitmask(arr, 1)
    bits = np.unpackbits(arr[1].view(np.uint8), bitorder="little")
    assert set(np.flatnonzero(bits)) == allowed
    assert (arr[0] == -1).all() and (arr[2] == -1).all()
    t = llamay.allocate_token_bitmask(2, tok.vocab_size)
    m.fill_next_token_bitmask(t, -1)
    assert (t[1].numpy() == arr[1][:words]).all()
    logits = torch.zeros(2, tok.vocab_size + 5)
    llamay.apply_token_bitmask_inplace(logits, t)
    assert set(torch.isfinite(logits[1]).nonzero().flatten().tolist()) == allowed
    assert torch.isfinite(logits[0, : tok.vocab_size]).all()
    assert not torch.isfinite(logits[0, words * 32 :]).any()


@pytest.mark.parametrize(
    "bad, err",
    [
        (np.zeros((2, 3), dtype=np.int32), ValueError),  # too narrow
        (np.zeros((2, 9), dtype=np.int64), TypeError),
        (np.zeros((9, 2), dtype=np.int32).T, ValueError),  # not contiguous
        (torch.zeros(2, 9, dtype=torch.float32), TypeError),
        (torch.zeros(2, 9, dtype=torch.int64), TypeError),
        (torch.zeros(9, 2, dtype=torch.int32).T, ValueError),  # not contiguous
        (torch.zeros(2, 3, dtype=torch.int32), ValueError),  # too narrow
        ([0] * 9, TypeError),
    ],
)
def test_bad_bitmasks_are_refused(bad, err):
    m = llamay.Matcher(toy(), llamay.Grammar.any_json())
    with pytest.raises(err):
        m.fill_next_token_bitmask(bad, 0)
    with pytest.raises(IndexError):
        m.fill_next_token_bitmask(np.zeros((2, 9), dtype=np.int32), 2)


def test_torch_bitmasks_of_either_32_bit_dtype_are_filled_alike():
    m = llamay.Matcher(toy(), llamay.Grammar.any_json())
    signed = torch.zeros(2, 9, dtype=torch.int32)
    unsigned = torch.zeros(2, 9, dtype=torch.uint32)
    m.fill_next_token_bitmask(signed, 1)
    m.fill_next_token_bitmask(unsigned, 1)
    assert signed[1].any()
    assert (signed.view(torch.uint32) == unsigned).all()
    with pytest.raises(TypeError, match="torch.float32"):
        m.fill_next_token_bitmask(torch.zeros(2, 9, dtype=torch.float32), 0)


def test_batch_fill_equals_row_by_row(smollm2):
    schemas = [SCHEMA, {"type": "array", "items": {"type": "number"}}, {"enum": ["a", "b"]}]
    ms = [llamay.Matcher(smollm2, llamay.Grammar.json_schema(s)) for s in schemas * 6]
    words = llamay.bitmask_words(smollm2.vocab_size)
    one = np.zeros((len(ms), words), dtype=np.int32)
    for i, m in enumerate(ms):
        m.fill_next_token_bitmask(one, i)
    many = np.zeros_like(one)
    rows = list(range(len(ms)))[::-1]
    llamay.fill_next_token_bitmasks(ms, many, rows)
    assert (many[::-1] == one).all()
    with pytest.raises(ValueError):
        llamay.fill_next_token_bitmasks(ms[:2], many, [0, 0])


def test_fills_run_in_parallel_threads(smollm2):
    # Each thread fills its own matcher; the GIL is released, so they overlap.
    g = llamay.Grammar.json_schema({"type": "string"})
    words = llamay.bitmask_words(smollm2.vocab_size)
    out = np.zeros((4, words), dtype=np.int32)
    ms = [llamay.Matcher(smollm2, g) for _ in range(4)]
    errors = []

    def work(i):
        try:
            for _ in range(50):
                ms[i].fill_next_token_bitmask(out, i)
        except Exception as e:  # surfaced below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert (out == out[0]).all() and out[0].any()


def test_budget_keeps_the_output_closable(smollm2):
    # With `remaining` tokens left, every allowed token leaves a completion that fits.
    g = llamay.Grammar.json_schema(SCHEMA)
    m = llamay.Matcher(smollm2, g)
    rng = np.random.default_rng(3)
    budget = 24
    words = llamay.bitmask_words(smollm2.vocab_size)
    row = np.zeros((1, words), dtype=np.int32)
    for step in range(budget):
        m.fill_next_token_bitmask(row, 0, remaining=budget - step)
        allowed = np.flatnonzero(np.unpackbits(row[0].view(np.uint8), bitorder="little"))
        t = int(rng.choice(allowed))
        assert m.consume_token(t)
        if t in smollm2.eos_token_ids:
            break
    assert m.is_terminated()


def test_hf_vocabulary_equals_the_gguf_one(smollm2):
    import json

    text, special = llamay.gguf_to_tokenizer_json(__import__("conftest").model_path("smollm2"))
    assert special["eos_token"] == "<|im_end|>"
    hf = llamay.Tokenizer.from_hf_json(text, smollm2.eos_token_ids)
    assert hf.vocab_size == smollm2.vocab_size
    for t in range(smollm2.vocab_size):
        assert hf.is_special(t) == smollm2.is_special(t), t
        if not smollm2.is_special(t):
            assert hf.token_bytes(t) == smollm2.token_bytes(t), t
    assert json.loads(text)["model"]["type"] == "BPE"
