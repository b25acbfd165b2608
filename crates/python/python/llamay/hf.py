"""Hugging Face transformers: ``LogitsProcessor`` for ``model.generate``, and a
transformers tokenizer rebuilt from a GGUF model's own tokenizer.

    processor = llamay.hf.LogitsProcessor(tokenizer, schema)
    model.generate(**inputs, logits_processor=[processor], do_sample=True)

Each row of the batch gets its own matcher (copies of one compiled grammar). Greedy
and sampled decoding are supported; beam search reorders rows, which this processor
does not follow.
"""

import json

import transformers

from . import _llamay
from .bitmask import apply_token_bitmask_inplace, bitmask_words, tokenizer_from_hf


def tokenizer_from_gguf(path):
    """A ``transformers.PreTrainedTokenizerFast`` with exactly the tokens, merges and
    special tokens of a GGUF model (byte-level BPE models, e.g. SmolLM2, Llama 3,
    Qwen)."""
    import tokenizers

    text, special = _llamay.gguf_to_tokenizer_json(str(path))
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizers.Tokenizer.from_str(text),
        bos_token=special.get("bos_token"),
        eos_token=special.get("eos_token"),
    )


def _grammar(grammar):
    if isinstance(grammar, _llamay.Grammar):
        return grammar
    if isinstance(grammar, (dict, bool)):
        return _llamay.Grammar.json_schema(grammar)
    if isinstance(grammar, str):
        return _llamay.Grammar.json_schema(json.loads(grammar))
    raise TypeError("grammar must be a llamay.Grammar, a schema dict or schema JSON text")


class LogitsProcessor(transformers.LogitsProcessor):
    """Masks every token the grammar does not allow next.

    ``tokenizer`` is a ``llamay.Tokenizer`` or a transformers fast tokenizer (then the
    vocabulary is padded to the logits' width on the first call). ``grammar`` is a
    ``llamay.Grammar`` or a JSON Schema (dict or text). A refused schema raises
    ``llamay.ConstraintError`` here, before any generation. With ``max_new_tokens``
    (the same as ``generate``'s), every step allows only tokens after which the output
    can still be completed in the tokens left, so it is never cut off mid-document.
    """

    def __init__(self, tokenizer, grammar, *, max_new_tokens=None):
        self.max_new_tokens = max_new_tokens
        self._prompt = None
        self._hf_tokenizer = None if isinstance(tokenizer, _llamay.Tokenizer) else tokenizer
        self._tokenizer = tokenizer if self._hf_tokenizer is None else None
        self.grammar = _grammar(grammar)
        self._matchers = None
        self._bitmask = None
        self._length = None

    def _start(self, input_ids, scores):
        if self._tokenizer is None:
            self._tokenizer = tokenizer_from_hf(
                self._hf_tokenizer, vocab_size=scores.shape[-1]
            )
        import torch

        first = _llamay.Matcher(self._tokenizer, self.grammar)
        batch = input_ids.shape[0]
        self._matchers = [first] + [first.copy() for _ in range(batch - 1)]
        self._bitmask = torch.empty(
            (batch, bitmask_words(self._tokenizer.vocab_size)), dtype=torch.int32
        )

    def reset(self):
        """Forgets the sequences (a new ``generate`` call also starts over)."""
        self._matchers = None

    @property
    def matchers(self):
        """The rows' matchers (after the first step)."""
        return self._matchers

    def __call__(self, input_ids, scores):
        length = input_ids.shape[1]
        fresh = (
            self._matchers is None
            or self._length is None
            or length != self._length + 1
            or len(self._matchers) != input_ids.shape[0]
        )
        if fresh:
            self._start(input_ids, scores)
            self._prompt = length
        else:
            last = input_ids[:, -1].tolist()
            for m, token in zip(self._matchers, last):
                if m.is_terminated():
                    continue  # finished rows are padded after their end token
                if not m.consume_token(int(token)):
                    raise RuntimeError(
                        f"token {token} was generated outside the grammar's mask "
                        "(another processor or warper changed the logits after llamay's?)"
                    )
        self._length = length
        live = [i for i, m in enumerate(self._matchers) if not m.is_terminated()]
        self._bitmask.fill_(-1)
        remaining = None
        if self.max_new_tokens is not None:
            remaining = max(1, self.max_new_tokens - (length - self._prompt))
        if live:
            _llamay.fill_next_token_bitmasks(
                [self._matchers[i] for i in live], self._bitmask, live, remaining
            )
        return apply_token_bitmask_inplace(scores, self._bitmask)
