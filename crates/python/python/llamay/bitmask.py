"""Bitmask buffers and applying them to logits (torch), and tokenizers from
Hugging Face objects.

A bitmask row holds ``ceil(vocab_size / 32)`` int32 words; bit ``i % 32`` of word
``i // 32`` set means token ``i`` is allowed. Rows are filled on the CPU (numpy or
torch) and applied on whatever device the logits live on.
"""

from ._llamay import Tokenizer


def bitmask_words(vocab_size):
    """Words per bitmask row for ``vocab_size`` tokens."""
    return (vocab_size + 31) // 32


def allocate_token_bitmask(batch_size, vocab_size):
    """A CPU int32 torch tensor ``(batch_size, ceil(vocab_size / 32))``, all allowed
    (-1), as llguidance and XGrammar allocate theirs."""
    import torch

    return torch.full((batch_size, bitmask_words(vocab_size)), -1, dtype=torch.int32)


_BIT_CACHE = {}


def _bits(device):
    import torch

    bits = _BIT_CACHE.get(device)
    if bits is None:
        bits = torch.arange(32, dtype=torch.int32, device=device)
        _BIT_CACHE[device] = bits
    return bits


def apply_token_bitmask_inplace(logits, bitmask, indices=None):
    """Sets to -inf every logit whose token the bitmask does not allow.

    ``logits`` is ``(batch, vocab)`` (or ``(vocab,)``) on any device; ``bitmask`` is
    ``(batch, words)`` (moved to the logits' device). With ``indices``, bitmask row
    ``j`` applies to logits row ``indices[j]``. Logits wider than the bitmask's
    ``words * 32`` are masked beyond it; a narrower vocabulary ignores the extra bits.
    """
    import torch

    if logits.dim() == 1:
        logits = logits.unsqueeze(0)
    if bitmask.dim() == 1:
        bitmask = bitmask.unsqueeze(0)
    bitmask = bitmask.to(logits.device, non_blocking=True)
    vocab = logits.shape[-1]
    allowed = ((bitmask.unsqueeze(-1) >> _bits(logits.device)) & 1).bool()
    allowed = allowed.reshape(bitmask.shape[0], -1)
    width = allowed.shape[-1]
    if width < vocab:
        pad = torch.zeros(
            (allowed.shape[0], vocab - width), dtype=torch.bool, device=logits.device
        )
        allowed = torch.cat([allowed, pad], dim=-1)
    else:
        allowed = allowed[:, :vocab]
    if indices is None:
        if allowed.shape[0] != logits.shape[0]:
            raise ValueError(
                f"bitmask has {allowed.shape[0]} rows, logits {logits.shape[0]}"
            )
        logits.masked_fill_(~allowed, float("-inf"))
    else:
        idx = torch.as_tensor(indices, device=logits.device, dtype=torch.long)
        rows = logits.index_select(0, idx)
        rows.masked_fill_(~allowed[: len(indices)], float("-inf"))
        logits.index_copy_(0, idx, rows)
    return logits


def tokenizer_from_hf(tokenizer, eos_ids=None, vocab_size=None):
    """A ``llamay.Tokenizer`` from ``tokenizer.json`` text or a transformers fast
    tokenizer (its ``backend_tokenizer``). ``eos_ids`` default to the tokenizer's
    ``eos_token_id``; ``vocab_size`` pads to the model's logits width (a model's
    embedding table is often wider than its tokenizer)."""
    if isinstance(tokenizer, str):
        if eos_ids is None:
            raise ValueError("eos_ids are needed with tokenizer.json text")
        return Tokenizer.from_hf_json(tokenizer, list(eos_ids), None, vocab_size)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TypeError(
            "Tokenizer.from_hf needs tokenizer.json text or a transformers fast tokenizer"
        )
    if eos_ids is None:
        eos = tokenizer.eos_token_id
        eos_ids = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
    special = [int(i) for i in getattr(tokenizer, "all_special_ids", [])]
    n = max(len(tokenizer), vocab_size or 0)
    return Tokenizer.from_hf_json(backend.to_str(), list(eos_ids), special, n)

