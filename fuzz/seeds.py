#!/usr/bin/env python3
"""Writes the committed seed corpus, fuzz/corpus/<target>/, from the shared reference
data (../shared beside the checkout, or $LLAMAY_SHARED). Rerun after changing it; the
files are small (a few hundred KB in all).

- gguf: each tiny model's metadata and tensor table with every tensor shrunk to four
  F32 values (a valid, ~14 KB file that still carries a whole tokenizer), one cut
  short, and one with no tensors.
  Also the mixture-of-experts models of scripts/make-moe-models shrunk the same way
  (their expert keys), and a 3-D MXFP4 expert tensor at its real size, whole and cut.
- json_schema: the seed schemas, every 50th jsonschemabench schema under 3 KB, and a
  few written here (tagged and overlapping oneOf, recursion, patterns, bounds).
- gbnf: the shared grammars (the bad ones too).
- chat_template: the Jinja templates of the Ollama index and the tiny models.
- ollama_template: Ollama's Go templates.
- request_body: request bodies written here, one per constraint surface.
"""
import json, os, struct, subprocess, sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("LLAMAY_SHARED", HERE.parent.parent / "shared"))
OUT = HERE / "corpus"

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def read_str(b, o):
    n = struct.unpack_from("<Q", b, o)[0]
    return b[o + 8 : o + 8 + n], o + 8 + n


def skip_value(b, o, t):
    if t in SIZES:
        return o + SIZES[t]
    if t == 8:
        return read_str(b, o)[1]
    et, n = struct.unpack_from("<IQ", b, o)
    o += 12
    if et in SIZES:
        return o + SIZES[et] * n
    for _ in range(n):
        o = skip_value(b, o, et)
    return o


def gguf_parts(b):
    """(header with metadata, tensor names, chat template or None)."""
    _, _, n_tensors, n_kv = struct.unpack_from("<4sIQQ", b, 0)
    o, template = 24, None
    for _ in range(n_kv):
        k, o = read_str(b, o)
        t = struct.unpack_from("<I", b, o)[0]
        start = o + 4
        o = skip_value(b, start, t)
        if k == b"tokenizer.chat_template":
            template = read_str(b, start)[0].decode()
    kv = b[24:o]
    names = []
    for _ in range(n_tensors):
        name, o = read_str(b, o)
        n_dims = struct.unpack_from("<I", b, o)[0]
        o += 4 + 8 * n_dims + 4 + 8
        names.append(name)
    return n_kv, kv, names, template


def small_gguf(n_kv, kv, names, keep=None):
    names = names if keep is None else names[:keep]
    out = bytearray(struct.pack("<4sIQQ", b"GGUF", 3, len(names), n_kv)) + kv
    for i, name in enumerate(names):
        out += struct.pack("<Q", len(name)) + name
        out += struct.pack("<IQIQ", 1, 4, 0, 32 * i)  # one dim of 4, F32, offset
    out += b"\0" * (-len(out) % 32)
    out += b"\0" * (32 * len(names))
    return bytes(out)


def write(target, name, data):
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def main():
    templates = []
    tiny = sorted((SHARED / "ref" / "tiny").glob("*.gguf"))
    families = set()
    for p in tiny:
        family = p.name.split("-")[1]
        b = p.read_bytes()
        n_kv, kv, names, template = gguf_parts(b)
        if template:
            templates.append((f"tiny-{family}", template))
        if family in families:
            continue
        families.add(family)
        whole = small_gguf(n_kv, kv, names)
        write("gguf", f"{family}.gguf", whole)
        if family == "llama":
            write("gguf", "llama-cut.gguf", whole[: len(whole) * 2 // 3])
            write("gguf", "llama-no-tensors.gguf", small_gguf(n_kv, kv, names, keep=0))

    # Mixture-of-experts files (scripts/make-moe-models): their expert keys, shrunk the
    # same way; and one 3-D MXFP4 expert tensor at its real size (4 blocks of 17 bytes),
    # whole and cut short.
    moe = subprocess.run([sys.executable, str(HERE.parent / "scripts" / "make-moe-models")],
                         capture_output=True, text=True, check=True).stdout.split()
    paths = dict(zip(moe[::2], moe[1::2]))
    for name in ["qwen3moe-F32", "qwen2moe-F32", "gpt-oss-F32", "gpt-oss-ollama", "granitemoe-F32"]:
        n_kv, kv, names, _ = gguf_parts(Path(paths[name]).read_bytes())
        write("gguf", f"moe-{name}.gguf", small_gguf(n_kv, kv, names))
    n_kv, kv, _, _ = gguf_parts(Path(paths["gpt-oss-F32"]).read_bytes())
    name = b"blk.0.ffn_down_exps.weight"
    out = bytearray(struct.pack("<4sIQQ", b"GGUF", 3, 1, n_kv)) + kv
    out += struct.pack("<Q", len(name)) + name + struct.pack("<IQQQIQ", 3, 32, 2, 2, 39, 0)
    out += b"\0" * (-len(out) % 32)
    out += bytes((i * 37 + 119) % 256 for i in range(4 * 17))
    write("gguf", "moe-mxfp4-experts.gguf", bytes(out))
    write("gguf", "moe-mxfp4-cut.gguf", bytes(out[:-5]))

    for p in sorted((SHARED / "corpus" / "seed").glob("*.schema.json")):
        write("json_schema", p.name, p.read_bytes())
    bench = sorted((SHARED / "corpus" / "jsonschemabench").glob("*.json"))
    for p in bench[::50]:
        schema = json.dumps(json.loads(p.read_text())["schema"])
        if len(schema) < 3000:
            write("json_schema", p.name, schema)
    own = {
        "one_of_tagged": {"oneOf": [
            {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
            {"type": "object", "properties": {"kind": {"enum": ["b", "c"]}, "y": {"type": "string"}}, "required": ["kind"]}]},
        "one_of_overlap": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]},
        "one_of_types": {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "null"}, {"type": "array", "items": {"type": "boolean"}}]},
        "recursive": {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}}, "$ref": "#/$defs/node"},
        "pattern": {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]{2}-[0-9]{3}$"}, "tags": {"type": "array", "items": {"enum": ["x", "y", 1, None]}, "maxItems": 3}}},
        "bounds": {"type": "number", "minimum": -2.5, "exclusiveMaximum": 10, "multipleOf": 0.25},
        "any_of_merge": {"anyOf": [{"type": "integer"}, {"type": "string"}], "minLength": 2, "maximum": 99},
    }
    for name, schema in own.items():
        write("json_schema", f"own-{name}.json", json.dumps(schema))

    for p in sorted((SHARED / "grammars").glob("*.gbnf")):
        write("gbnf", p.name, p.read_bytes())

    for t in json.loads((SHARED / "ollama-templates" / "index.json").read_text()):
        templates.append((t["name"], t["template"]))
    seen = set()
    for name, t in templates:
        if t not in seen:
            seen.add(t)
            write("chat_template", f"{name}.jinja", t)

    for p in sorted((SHARED / "ollama-templates").glob("*.gotmpl")):
        write("ollama_template", p.name, p.read_bytes())

    bodies = {
        "schema": {"messages": [{"role": "user", "content": "hi"}], "temperature": 0.7, "top_p": 0.9, "max_tokens": 64, "stop": ["\n"],
                   "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": own["one_of_tagged"]}}},
        "json_object": {"response_format": {"type": "json_object"}, "seed": 7},
        "llamay_schema": {"llamay_schema": own["pattern"], "top_k": 40, "min_p": 0.05},
        "grammar": {"llamay_grammar": "root ::= (\"yes\" | \"no\") \" \" [0-9]{1,3}", "repeat_penalty": 1.1},
        "both": {"grammar": "root ::= \"a\"", "format": "json"},
        "ollama_format": {"format": {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]}},
        "tools_required": {"tools": [{"type": "function", "function": {"name": "weather", "description": "Weather",
                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
                           "tool_choice": "required", "parallel_tool_calls": False},
        "tools_named": {"tools": [{"type": "function", "function": {"name": "a", "parameters": {"properties": {"n": {"type": "integer"}}}}},
                                  {"type": "function", "function": {"name": "b"}}],
                        "tool_choice": {"type": "function", "name": "b"}},
        "llamay_format": {"llamay_format": "json", "frequency_penalty": 0.5, "presence_penalty": -0.5},
    }
    for name, body in bodies.items():
        write("request_body", f"{name}.json", json.dumps(body))


if __name__ == "__main__":
    sys.exit(main())
