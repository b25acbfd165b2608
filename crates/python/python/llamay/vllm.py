"""vLLM (v1 engine, tested with vLLM 0.33.0): two pieces.

1. ``LlamayBackend`` / ``LlamayGrammar``: vLLM's ``StructuredOutputBackend`` and
   ``StructuredOutputGrammar`` (``compile_grammar``, ``allocate_token_bitmask``,
   ``accept_tokens``, ``validate_tokens``, ``rollback``, ``fill_bitmask``,
   ``is_terminated``, ``reset``). vLLM 0.33.0 picks its structured-output backend
   from a fixed list (``StructuredOutputManager.grammar_init``), so using these classes
   as ``structured_outputs_config.backend`` needs that one line in vLLM; they are here
   for that, and are what the tests drive the way the manager does.

2. ``LogitsProcessor``: the route vLLM offers for loading outside code without
   patching it. vLLM v1 loads custom logits processors by fully qualified class name
   (``LLM(..., logits_processors=["llamay.vllm:LogitsProcessor"])`` or
   ``vllm serve ... --logits-processors llamay.vllm:LogitsProcessor``). A request opts
   in with ``SamplingParams(extra_args={"llamay": {"json_schema": {...}}})`` (or
   ``"gbnf"`` / ``"regex"``); a schema llamay refuses fails validation with the
   server's message (HTTP 400 online).
"""

import dataclasses
import threading

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality
from vllm.v1.sample.logits_processor import LogitsProcessor as _VllmLogitsProcessor
from vllm.v1.structured_output.backend_types import (
    StructuredOutputBackend,
    StructuredOutputGrammar,
    StructuredOutputOptions,
)

from . import _llamay
from .bitmask import allocate_token_bitmask, apply_token_bitmask_inplace, bitmask_words


def _llamay_tokenizer(tokenizer, vocab_size):
    if isinstance(tokenizer, _llamay.Tokenizer):
        return tokenizer
    return _llamay.Tokenizer.from_hf(tokenizer, None, vocab_size)


class LlamayGrammar(StructuredOutputGrammar):
    """One request's grammar state (vLLM calls these from its scheduler)."""

    def __init__(self, matcher):
        self.matcher = matcher

    def accept_tokens(self, request_id, tokens):
        if self.matcher.is_terminated():
            return True  # vLLM leaves a terminated row unmasked
        return self.matcher.consume_tokens([int(t) for t in tokens])

    def validate_tokens(self, tokens):
        tokens = [int(t) for t in tokens if t >= 0]  # speculative padding is -1
        if not tokens or self.matcher.is_terminated():
            return []
        return tokens[: self.matcher.validate_tokens(tokens)]

    def rollback(self, num_tokens):
        if num_tokens > 0:
            self.matcher.rollback(num_tokens)

    def fill_bitmask(self, bitmask, idx):
        self.matcher.fill_next_token_bitmask(bitmask, idx)

    def is_terminated(self):
        return self.matcher.is_terminated()

    def reset(self):
        self.matcher.reset()


def _grammar_for(request_type, grammar_spec):
    if request_type == StructuredOutputOptions.JSON:
        return _llamay.Grammar.json_schema(grammar_spec)
    if request_type == StructuredOutputOptions.JSON_OBJECT:
        return _llamay.Grammar.any_json()
    if request_type == StructuredOutputOptions.REGEX:
        return _llamay.Grammar.regex(grammar_spec)
    if request_type == StructuredOutputOptions.GRAMMAR:
        return _llamay.Grammar.gbnf(grammar_spec)
    if request_type == StructuredOutputOptions.CHOICE:
        import json

        return _llamay.Grammar.json_schema({"enum": json.loads(grammar_spec)})
    raise ValueError(f"llamay does not support {request_type.name} structured output")


@dataclasses.dataclass
class LlamayBackend(StructuredOutputBackend):
    """vLLM's engine-level backend: one vocabulary, grammars compiled per request."""

    def __post_init__(self):
        self.llamay_tokenizer = _llamay_tokenizer(self.tokenizer, self.vocab_size)

    def compile_grammar(self, request_type, grammar_spec, stop_token_ids=None):
        grammar = _grammar_for(request_type, grammar_spec)
        return LlamayGrammar(_llamay.Matcher(self.llamay_tokenizer, grammar))

    def allocate_token_bitmask(self, max_num_seqs):
        return allocate_token_bitmask(max_num_seqs, self.vocab_size)

    def destroy(self):
        pass


def _request_grammar(params):
    """The grammar a request asks for in ``extra_args["llamay"]``, or None."""
    spec = (getattr(params, "extra_args", None) or {}).get("llamay")
    if spec is None:
        return None
    if not isinstance(spec, dict) or len(spec) != 1:
        raise ValueError(
            'extra_args["llamay"] must be one of {"json_schema": ...}, {"gbnf": ...}, '
            '{"regex": ...}'
        )
    (kind, value), = spec.items()
    if kind == "json_schema":
        return _llamay.Grammar.json_schema(value)
    if kind == "gbnf":
        return _llamay.Grammar.gbnf(value)
    if kind == "regex":
        return _llamay.Grammar.regex(value)
    raise ValueError(f'extra_args["llamay"]: unknown kind {kind!r}')


class _Row:
    __slots__ = ("matcher", "output", "seen")

    def __init__(self, matcher, output):
        self.matcher = matcher
        self.output = output  # vLLM's live list of the request's output tokens
        self.seen = 0


class LogitsProcessor(_VllmLogitsProcessor):
    """Constrains the requests that carry ``extra_args["llamay"]``; others pass
    untouched. Load it by name: ``logits_processors=["llamay.vllm:LogitsProcessor"]``."""

    @classmethod
    def validate_params(cls, sampling_params):
        _request_grammar(sampling_params)  # ConstraintError is a ValueError: a 400

    def __init__(self, vllm_config, device, is_pin_memory):
        self.tokenizer = self._load_tokenizer(vllm_config)
        self._rows = {}
        self._lock = threading.Lock()

    @staticmethod
    def _load_tokenizer(vllm_config):
        from vllm.tokenizers import cached_tokenizer_from_config

        model_config = vllm_config.model_config
        hf = cached_tokenizer_from_config(model_config=model_config)
        return _llamay_tokenizer(hf, model_config.get_vocab_size())

    def is_argmax_invariant(self):
        return False

    def update_state(self, batch_update):
        if batch_update is not None:
            self._apply_batch_update(batch_update)
        for row in self._rows.values():
            new = row.output[row.seen :]
            row.seen = len(row.output)
            for t in new:
                if row.matcher.is_terminated():
                    break
                if not row.matcher.consume_token(int(t)):
                    raise RuntimeError(f"llamay: token {t} was sampled outside the mask")

    def _apply_batch_update(self, bu: BatchUpdate):
        for i in bu.removed:
            self._rows.pop(i, None)
        for i, params, _prompt, output in bu.added:
            grammar = _request_grammar(params)
            if grammar is None:
                self._rows.pop(i, None)
            else:
                self._rows[i] = _Row(_llamay.Matcher(self.tokenizer, grammar), output)
        for a, b, direction in bu.moved:
            ra, rb = self._rows.pop(a, None), self._rows.pop(b, None)
            if ra is not None:
                self._rows[b] = ra
            if direction == MoveDirectionality.SWAP and rb is not None:
                self._rows[a] = rb

    def apply(self, logits):
        live = sorted(i for i, r in self._rows.items() if not r.matcher.is_terminated())
        if not live:
            return logits
        bitmask = torch.empty((len(live), bitmask_words(self.tokenizer.vocab_size)), dtype=torch.int32)
        _llamay.fill_next_token_bitmasks(
            [self._rows[i].matcher for i in live], bitmask, list(range(len(live)))
        )
        apply_token_bitmask_inplace(logits, bitmask, indices=live)
        return logits
