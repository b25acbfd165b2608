"""SGLang: llamay as a grammar backend (``--grammar-backend llamay``).

Installing the wheel declares an SGLang general plugin (entry point group
``sglang.srt.plugins``, name ``llamay``). SGLang >= 0.5.23 runs its general plugins in
every process it starts (``launch_server``, the engine, schedulers), and ours registers
the backend with ``register_grammar_backend("llamay", ...)`` and adds ``llamay`` to the
``--grammar-backend`` choices; no SGLang file is patched. In your own process, calling
``llamay.sglang.register()`` does the same.

The backend compiles ``json`` (JSON Schema), ``regex`` and ``ebnf`` (GBNF) requests; a
schema keyword llamay cannot enforce makes the request fail with the server's message
instead of being dropped. ``structural_tag`` is not supported (logged and refused).
"""

import logging

import torch
from sglang.srt.constrained.base_grammar_backend import (
    BaseGrammarBackend,
    BaseGrammarObject,
    InvalidGrammarObject,
    register_vocab_mask_buffer,
)

from . import _llamay
from .bitmask import allocate_token_bitmask, apply_token_bitmask_inplace

logger = logging.getLogger(__name__)

NAME = "llamay"


class LlamayGrammar(BaseGrammarObject):
    """One request's grammar state, as SGLang's scheduler drives it."""

    def __init__(self, matcher):
        super().__init__()
        self.matcher = matcher

    def accept_token(self, token):
        if self.finished:
            return
        if not self.matcher.consume_token(int(token)):
            raise ValueError(f"llamay: token {token} is not allowed by the grammar here")
        if self.matcher.is_terminated():
            self.finished = True

    def rollback(self, k):
        if k <= 0:
            return
        self.matcher.rollback(k)
        self.finished = self.matcher.is_terminated()

    def is_terminated(self):
        return self.matcher.is_terminated()

    def allocate_vocab_mask(self, vocab_size, batch_size, device):
        return allocate_token_bitmask(batch_size, max(vocab_size, self.matcher.vocab_size))

    def fill_vocab_mask(self, vocab_mask, idx):
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    @staticmethod
    def fill_vocab_mask_batched(entries, vocab_mask):
        """All llamay rows in one call, on several threads without the GIL."""
        ours = [e for e in entries if isinstance(e.grammar, LlamayGrammar)]
        if ours:
            _llamay.fill_next_token_bitmasks(
                [e.grammar.matcher for e in ours], vocab_mask, [e.row for e in ours]
            )
        for e in entries:
            if not isinstance(e.grammar, LlamayGrammar):
                e.grammar.fill_vocab_mask(vocab_mask, e.row)

    @staticmethod
    def reset_vocab_mask(vocab_mask):
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask, device):
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits, vocab_mask):
        apply_token_bitmask_inplace(logits, vocab_mask)

    def copy(self):
        return LlamayGrammar(self.matcher.copy())

    def try_jump_forward(self, tokenizer):
        # Forced bytes are not retokenized here: SGLang then decodes step by step.
        return None

    def jump_forward_str_state(self, helper):
        return "", -1

    def jump_and_retokenize(self, old_output_ids, new_output_ids, next_state):
        pass


class LlamayGrammarBackend(BaseGrammarBackend):
    """Compiles requests' grammars for the model's tokenizer (once per grammar text:
    SGLang caches the result and hands each request a copy)."""

    def __init__(self, tokenizer, vocab_size=None, eos_token_ids=None):
        super().__init__()
        if isinstance(tokenizer, _llamay.Tokenizer):
            self.tokenizer = tokenizer
        else:
            eos = sorted(int(t) for t in eos_token_ids) if eos_token_ids else None
            self.tokenizer = _llamay.Tokenizer.from_hf(tokenizer, eos, vocab_size)

    def initialize_vocab_mask_buffer(self, name, vocab_size, max_rows, device):
        mask = allocate_token_bitmask(max_rows, max(vocab_size, self.tokenizer.vocab_size))
        return register_vocab_mask_buffer(name, mask, max_rows)

    def _compile(self, make, kind, key_string):
        try:
            grammar = make(key_string)
            grammar.compile(self.tokenizer)
            return LlamayGrammar(_llamay.Matcher(self.tokenizer, grammar))
        except _llamay.ConstraintError as e:
            logger.warning("llamay refused the %s grammar: %s", kind, e)
            return InvalidGrammarObject(str(e))

    def dispatch_json(self, key_string):
        return self._compile(_llamay.Grammar.json_schema, "json", key_string)

    def dispatch_regex(self, key_string):
        return self._compile(_llamay.Grammar.regex, "regex", key_string)

    def dispatch_ebnf(self, key_string):
        return self._compile(_llamay.Grammar.gbnf, "ebnf", key_string)


def _create(server_args, tokenizer, vocab_size, eos_token_ids=None):
    return LlamayGrammarBackend(tokenizer, vocab_size, eos_token_ids)


def register():
    """Registers the ``llamay`` grammar backend with SGLang (the plugin entry point)."""
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices
    from sglang.srt.constrained.base_grammar_backend import register_grammar_backend

    register_grammar_backend(NAME, _create)
    if NAME not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([NAME])
