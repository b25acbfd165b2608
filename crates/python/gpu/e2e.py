"""End to end on a GPU: corpus schemas through vLLM or SGLang with llamay as the constraint,
every finished output checked with jsonschema.

Needs a machine with a CUDA GPU, the pinned engine (`vllm==0.33.0` or `sglang==0.5.23`),
`jsonschema`, the llamay wheel (`scripts/test-python` builds it into target/wheels) and a
small instruct model, local or by Hugging Face id. The CPU tests (tests/test_vllm.py,
tests/test_sglang.py) drive the same code through the engines' own classes; this script is
the run those cannot do: real scheduling, batching and sampling on the device.

    python crates/python/gpu/e2e.py vllm   --model Qwen/Qwen2.5-0.5B-Instruct [--schemas 50]
    python crates/python/gpu/e2e.py sglang --model Qwen/Qwen2.5-0.5B-Instruct [--schemas 50]

vLLM loads llamay through its by-name logits-processor route (`llamay.vllm:LogitsProcessor`,
the schema in `SamplingParams.extra_args["llamay"]`); SGLang through the wheel's plugin
(`--grammar-backend llamay`, the schema as `json_schema`). Temperature 1, one prompt per
schema, all in one batch. Prints the counts and exits 1 if any finished output is not
valid JSON for its schema (an output cut off at `--max-tokens` is counted apart).
"""

import argparse
import json
import pathlib
import sys

import jsonschema

import llamay

REPO = pathlib.Path(__file__).resolve().parents[3]


def corpus(folder, n):
    """`n` schemas spread over the sorted corpus that llamay compiles: where llamay refuses
    one (counted), the next file stands in."""
    files = sorted(pathlib.Path(folder).glob("*.json"))
    step = max(len(files) / max(n, 1), 1)
    picked, refused, seen = [], 0, set()
    for k in range(n):
        i = int(k * step)
        while i < len(files) and i not in seen:
            seen.add(i)
            doc = json.loads(files[i].read_text())
            schema = doc["schema"] if isinstance(doc, dict) and "schema" in doc else doc
            try:
                llamay.Grammar.json_schema(json.dumps(schema))
                picked.append(schema)
                break
            except llamay.ConstraintError:
                refused += 1
                i += 1
    return picked, refused


def prompt(schema):
    return (
        "Write one JSON value that satisfies this JSON Schema. Answer with the JSON only.\n"
        + json.dumps(schema)
        + "\n"
    )


def run_vllm(args, schemas):
    import vllm

    llm = vllm.LLM(
        model=args.model,
        logits_processors=["llamay.vllm:LogitsProcessor"],
        gpu_memory_utilization=args.gpu_memory,
    )
    params = [
        vllm.SamplingParams(
            temperature=1.0,
            max_tokens=args.max_tokens,
            seed=k,
            extra_args={"llamay": {"json_schema": s}},
        )
        for k, s in enumerate(schemas)
    ]
    outs = llm.generate([prompt(s) for s in schemas], params)
    return [(o.outputs[0].text, o.outputs[0].finish_reason == "length") for o in outs]


def run_sglang(args, schemas):
    import sglang

    import llamay.sglang

    llamay.sglang.register()
    engine = sglang.Engine(
        model_path=args.model,
        grammar_backend="llamay",
        mem_fraction_static=args.gpu_memory,
    )
    try:
        params = [
            {
                "temperature": 1.0,
                "max_new_tokens": args.max_tokens,
                "json_schema": json.dumps(s),
            }
            for s in schemas
        ]
        outs = engine.generate([prompt(s) for s in schemas], params)
    finally:
        engine.shutdown()
    def cut_off(o):
        reason = o["meta_info"].get("finish_reason")
        return isinstance(reason, dict) and reason.get("type") == "length"

    return [(o["text"], cut_off(o)) for o in outs]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("engine", choices=["vllm", "sglang"])
    ap.add_argument("--model", required=True)
    ap.add_argument("--schemas", type=int, default=50)
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--gpu-memory", type=float, default=0.5)
    ap.add_argument(
        "--corpus",
        default=str(REPO.parent / "shared" / "corpus" / "jsonschemabench"),
    )
    args = ap.parse_args()
    schemas, refused = corpus(args.corpus, args.schemas)
    if not schemas:
        sys.exit(f"e2e: no schemas in {args.corpus}")
    results = (run_vllm if args.engine == "vllm" else run_sglang)(args, schemas)
    valid, invalid, cut = 0, [], 0
    for k, ((text, cut_off), schema) in enumerate(zip(results, schemas)):
        if cut_off:
            cut += 1
            continue
        try:
            jsonschema.validate(json.loads(text), schema)
            valid += 1
        except (json.JSONDecodeError, jsonschema.ValidationError) as e:
            invalid.append((k, str(e).splitlines()[0], text[:200]))
    print(
        f"{args.engine} {args.model}: {len(schemas)} schemas ({refused} refused by llamay "
        f"and passed over): {valid} valid, {len(invalid)} invalid, {cut} cut off at "
        f"{args.max_tokens} tokens"
    )
    for k, why, text in invalid:
        print(f"  schema {k}: {why}\n    {text!r}")
    sys.exit(1 if invalid else 0)


if __name__ == "__main__":
    main()
