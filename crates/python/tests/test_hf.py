"""transformers: `model.generate(..., logits_processor=[llamay.hf.LogitsProcessor(...)])`
with a small Llama-architecture model built on the CPU from a config (random weights)
and SmolLM2's real tokenizer, rebuilt from its GGUF into a `tokenizer.json`. Sampled at
temperature 1 (no top-k/top-p), every output must validate against its schema.

`LLAMAY_HF_SCHEMAS` sets how many corpus schemas (CI: 8; the closing note's figure: 50).
A schema whose shortest document is longer than the token budget cannot be met by any
engine; it is counted and passed over (as are refused schemas), not generated.
"""

import json

import jsonschema
import pytest
import torch
import transformers

import llamay
import llamay.hf
from conftest import corpus_sample, env_int, model_path, schema_of

MAX_NEW = 256
# Two cores are shared in CI: one torch thread is several times faster than two.
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def hf_tokenizer():
    return llamay.hf.tokenizer_from_gguf(model_path("smollm2"))


@pytest.fixture(scope="module")
def model(hf_tokenizer):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(hf_tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=hf_tokenizer.bos_token_id,
        eos_token_id=hf_tokenizer.eos_token_id,
    )
    return transformers.LlamaForCausalLM(config).eval()


def test_the_rebuilt_tokenizer_round_trips(hf_tokenizer):
    text = 'A {"key": [1, 2.5e3, "ünï"]} 42'
    assert hf_tokenizer.decode(hf_tokenizer(text)["input_ids"]) == text
    assert hf_tokenizer.eos_token == "<|im_end|>"


def test_generate_validates_on_corpus_schemas(model, hf_tokenizer):
    n = env_int("LLAMAY_HF_SCHEMAS", 8)
    prompt = hf_tokenizer("Answer in JSON:", return_tensors="pt")
    vocab = llamay.Tokenizer.from_hf(hf_tokenizer)
    valid = tried = refused = too_long = 0
    for f in corpus_sample(n * 3):
        if tried == n:
            break
        schema = schema_of(f)
        try:
            processor = llamay.hf.LogitsProcessor(hf_tokenizer, schema, max_new_tokens=MAX_NEW)
        except llamay.ConstraintError:
            refused += 1
            continue
        shortest = llamay.Matcher(vocab, processor.grammar).min_bytes_to_accept()
        if shortest is None or shortest + 1 > MAX_NEW:
            too_long += 1
            continue
        tried += 1
        torch.manual_seed(tried)
        out = model.generate(
            **prompt,
            logits_processor=[processor],
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=MAX_NEW,
            pad_token_id=hf_tokenizer.eos_token_id,
        )
        new = out[0, prompt["input_ids"].shape[1] :].tolist()
        assert new[-1] == hf_tokenizer.eos_token_id, f"{f.name}: not closed in {MAX_NEW}"
        text = hf_tokenizer.decode(new[:-1])
        doc = json.loads(text)
        jsonschema.validators.validator_for(schema)(schema).validate(doc)
        valid += 1
    print(
        f"{valid}/{tried} valid ({refused} schemas refused at compile, "
        f"{too_long} with a shortest document over {MAX_NEW} bytes)"
    )
    assert tried == n and valid == n
