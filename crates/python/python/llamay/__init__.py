"""llamay's constraint engine for Python.

A JSON Schema, GBNF grammar or regular expression becomes, for a model's vocabulary, a
token bitmask per decoding step: ``Grammar`` -> ``Matcher(tokenizer, grammar)`` ->
``fill_next_token_bitmask`` -> ``apply_token_bitmask_inplace``. A schema keyword the
constraint cannot enforce is refused (``ConstraintError``) instead of dropped.

Integrations: ``llamay.hf`` (transformers), ``llamay.sglang``, ``llamay.vllm``.
"""

from ._llamay import (
    MAX_ROLLBACK,
    ConstraintError,
    Grammar,
    Matcher,
    Tokenizer,
    fill_next_token_bitmasks,
    gguf_to_tokenizer_json,
)
from .bitmask import (
    allocate_token_bitmask,
    apply_token_bitmask_inplace,
    bitmask_words,
    tokenizer_from_hf,
)

__all__ = [
    "MAX_ROLLBACK",
    "ConstraintError",
    "Grammar",
    "Matcher",
    "Tokenizer",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "bitmask_words",
    "fill_next_token_bitmasks",
    "gguf_to_tokenizer_json",
    "tokenizer_from_hf",
]
