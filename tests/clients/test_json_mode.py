"""JSON mode means a JSON object: `response_format: {"type": "json_object"}` (openai SDK)
and Ollama's `format: "json"` (ollama SDK) on 50 prompts that invite a bare scalar.

OpenAI documents json_object as "a valid JSON object", and every client that turns it on
(LangChain's json_mode, instructor's Mode.JSON, LiteLLM, Ollama's own clients) parses
the answer into a dict. An answer cut by the token limit (max_tokens 48) cannot be
whole JSON; it is counted apart and only checked to start as an object.
"""
import json

import ollama
from openai import OpenAI

MAX_TOKENS = 48


def _prompts():
    names = ["Alec", "Maria", "Tom", "Priya", "Jon", "Lena", "Omar", "Yuki", "Sam", "Ines"]
    things = ["a banana", "the sky", "grass", "snow", "a carrot", "coal", "a tomato", "the sea"]
    categories = ["colour", "fruit", "planet", "country", "animal", "metal", "vegetable"]
    prompts = []
    for i, name in enumerate(names):
        prompts.append(f"How old is {name}? Answer with just the number.")
        prompts.append(f"What is {i + 3}.{(7 * i) % 10} rounded? Answer with just the number.")
    for thing in things:
        prompts.append(f"What colour is {thing}? One word.")
    for cat in categories:
        prompts.append(f"Name one {cat}.")
    for a, b in [(2, 2), (7, 5), (12, 30), (9, 9), (100, 1), (6, 7)]:
        prompts.append(f"What is {a} plus {b}? Answer with just the number.")
    for n in [3, 10, 17, 42]:
        prompts.append(f"Is {n} an even number? Answer true or false.")
    prompts += [
        "Say just the word hello.",
        "What year did the Second World War end?",
        "How many legs does a spider have?",
        "Reply with null.",
        "What is pi to two decimal places?",
    ]
    assert len(prompts) == 50, len(prompts)
    return prompts


def _judge(outputs, figure, label):
    """outputs: [(text, cut)]. Whole answers must parse as an object; cut answers must
    start as one."""
    objects, cut, failures = 0, 0, []
    for prompt, text, was_cut in outputs:
        if was_cut:
            cut += 1
            if not text.lstrip().startswith("{"):
                failures.append((prompt, text, "cut, and not the start of an object"))
            continue
        try:
            value = json.loads(text)
        except ValueError as e:
            failures.append((prompt, text, f"not JSON: {e}"))
            continue
        if isinstance(value, dict):
            objects += 1
        else:
            failures.append((prompt, text, f"a JSON {type(value).__name__}, not an object"))
    figure(f"{label}_objects", objects)
    figure(f"{label}_cut_by_max_tokens", cut)
    figure(f"{label}_not_objects", len(failures))
    for prompt, text, why in failures:
        print(f"  [{label}] {prompt!r} -> {text!r}: {why}")
    assert not failures, f"{len(failures)}/50 answers were not objects; first: {failures[:3]}"


def test_openai_json_object_is_an_object(smol, figure):
    client = OpenAI(base_url=smol.v1, api_key="x")
    outputs = []
    for prompt in _prompts():
        r = client.chat.completions.create(
            model=smol.model,
            messages=[{"role": "user", "content": prompt}],
            response_format={"type": "json_object"},
            max_tokens=MAX_TOKENS,
            temperature=0,
        )
        choice = r.choices[0]
        outputs.append((prompt, choice.message.content or "", choice.finish_reason == "length"))
    _judge(outputs, figure, "openai")


def test_ollama_format_json_is_an_object(smol, figure):
    client = ollama.Client(host=smol.base)
    outputs = []
    for prompt in _prompts():
        r = client.chat(
            model=smol.model,
            messages=[{"role": "user", "content": prompt}],
            format="json",
            options={"num_predict": MAX_TOKENS, "temperature": 0},
        )
        outputs.append((prompt, r.message.content or "", r.done_reason == "length"))
    _judge(outputs, figure, "ollama")
