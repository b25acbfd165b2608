"""What make-tekken-vocab and make-o200k-vocab share (a module, not a script).

Both build a vocabulary-only GGUF of a tiktoken-style vocabulary (ranked byte strings)
the way llama.cpp's converter writes one, and reference ids for a corpus, each step in
a venv of its own: pinned, sha256-checked wheels; the corpus (SmolLM2's reference
strings, llama.cpp's tokenizer test inputs, seeded random strings); GPT-2's byte
spelling; the merges derived from the ranks; the cache folder named after the digest of
the script and this module, so that a change to either rebuilds.
"""
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GGUF_PIN = "gguf==0.19.0"
# The reference tokenizer: (pip spec, wheel file, sha256).
TIKTOKEN_WHEEL = (
    "tiktoken==0.14.0",
    "tiktoken-0.14.0-cp311-cp311-manylinux_2_28_x86_64.whl",
    "f5e7665f6624e052e5e7f6a36919ab69279decdc976d7b16b4fa15e1897d0513")
SMOLLM_REF = "ref/tokenize/SmolLM2-135M-Instruct.Q4_1.json"

# Runs of one kind of character each, so that case changes, marks after letters,
# digits and spaces meet in every order.
POOLS = [
    "abcdefghijklmnopqrstuvwxyz",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "éèàçßøñüœ",                    # Ll
    "ÉÈÀÇØÑÜŒ",                     # Lu
    "ǅǈǋǲᾈᾙ",                      # Lt
    "ʰʲˈˑｰ々ゝ",                    # Lm
    "中文字ひらがなカタカナאבגابت한국",  # Lo
    "\u0301\u0308\u0327\u20dd\u093f\u0902",  # Mn, Me, Mc
    "αβγδΑΒΓΔабвгАБВГ",
    "0123456789٣٤²³Ⅻ½",
    " ", "  ", "\t", "\n", "\r\n", "\u00a0\u3000\u2009",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "/", "😀🎉✓€→\u200d\u200b",
]


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def llamay_cache():
    return os.path.join(os.path.expanduser("~"), ".cache", "llamay")


def cache_dir():
    d = os.environ.get("LLAMAY_TEST_MODELS") or os.path.join(llamay_cache(), "test-models")
    os.makedirs(d, exist_ok=True)
    return d


def shared_dir(prog):
    d = os.environ.get("LLAMAY_SHARED") or os.path.join(HERE, "..", "..", "shared")
    if not os.path.isdir(os.path.join(d, "ref")):
        sys.exit(f"{prog}: shared reference data not found at {d} (set LLAMAY_SHARED)")
    return d


def wheel(prog, spec, name, want, cache):
    """A pinned wheel, downloaded once into the cache and sha256-checked every time."""
    path = os.path.join(cache, name)
    if os.path.exists(path) and sha256_of(path) == want:
        return path
    with tempfile.TemporaryDirectory(prefix="llamay-wheel-") as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
             "--quiet", "--disable-pip-version-check", "-d", tmp, spec],
            check=True, stdout=sys.stderr)
        got_path = os.path.join(tmp, name)
        if not os.path.exists(got_path):
            sys.exit(f"{prog}: pip fetched {os.listdir(tmp)}, not {name} "
                     "(this script pins the CPython 3.11 x86-64 wheel)")
        got = sha256_of(got_path)
        if got != want:
            sys.exit(f"{prog}: {name}: sha256 {got} != expected {want}")
        os.replace(got_path, path)
    return path


def venv_python(venv, probe, install):
    py = os.path.join(venv, "bin", "python")
    ok = os.path.exists(py) and subprocess.run(
        [py, "-c", probe], capture_output=True).returncode == 0
    if not ok:
        subprocess.run([sys.executable, "-m", "venv", venv], check=True, stdout=sys.stderr)
        subprocess.run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        *install], check=True, stdout=sys.stderr)
    return py


def gguf_python():
    return venv_python(os.path.join(llamay_cache(), "venv-gguf"), "import gguf, numpy",
                       [GGUF_PIN])


def random_strings(pools, n, seed):
    """`n` seeded strings, each 1 to 12 runs of 1 to 4 draws from one pool (a string
    draws characters, a list draws its items)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s = []
        for _ in range(rng.randint(1, 12)):
            pool = rng.choice(pools)
            s.extend(rng.choice(pool) for _ in range(rng.randint(1, 4)))
        out.append("".join(s))
    return out


def corpus(prog, randoms):
    """(source, text) for every case, duplicates dropped, order kept: SmolLM2's valid
    UTF-8 reference strings, every input of llama.cpp's tokenizer tests, `randoms`."""
    cases = []
    with open(os.path.join(shared_dir(prog), SMOLLM_REF), encoding="utf-8") as f:
        for c in json.load(f)["cases"]:
            if c["category"] != "invalid_utf8":
                cases.append((f"smollm2/{c['idx']}/{c['category']}", c["text"]))
    out = subprocess.run([sys.executable, os.path.join(HERE, "fetch-llamacpp-vocab")],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        vocab, d = line.split(" ", 1)
        with open(os.path.join(d, f"ggml-vocab-{vocab}.gguf.inp"), encoding="utf-8") as f:
            texts = f.read().split("\n__ggml_vocab_test__\n")
        if texts and texts[-1] == "":
            texts.pop()
        cases += [(f"llamacpp/{vocab}/{i}", t) for i, t in enumerate(texts)]
    cases += [(f"random/{i}", t) for i, t in enumerate(randoms)]
    seen, unique = set(), []
    for src, t in cases:
        if t not in seen:
            seen.add(t)
            unique.append({"source": src, "text": t})
    return unique


def gpt2_chars():
    """GPT-2's byte -> character map: printable Latin-1 bytes stand for themselves, the
    other 68 take U+0100.. in byte order."""
    out, nxt = [], 256
    for b in range(256):
        if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE:
            out.append(chr(b))
        else:
            out.append(chr(nxt))
            nxt += 1
    return out


def merges_from_ranks(prog, raw):
    """The merges of ranked byte strings `raw` (rank = index), as `(rank, left, right)`
    ranks: every split of a token into two tokens is a merge, ordered by the rank of the
    token it makes, then by the ranks of its parts. tiktoken merges the adjacent pair
    whose concatenation has the lowest rank; this list gives the same order."""
    rank = {b: i for i, b in enumerate(raw)}
    assert len(rank) == len(raw), "token byte strings are distinct"
    merges = []
    for i, b in enumerate(raw):
        splits = [(rank[b[:j]], rank[b[j:]]) for j in range(1, len(b))
                  if b[:j] in rank and b[j:] in rank]
        if len(b) > 1 and not splits:
            sys.exit(f"{prog}: rank {i} ({b!r}) is no pair of tokens")
        merges += [(i, l, r) for l, r in splits]
    merges.sort()
    return merges


def build(prog, script, stem, vocab, reference_python, randoms):
    """The folder holding `<stem>.gguf` and `<stem>.ref.json`, built if missing: the
    reference by `script --reference-inside VOCAB CORPUS OUT` in `reference_python`,
    then the GGUF by `script --gguf-inside VOCAB REF OUT` in the gguf venv."""
    cache = cache_dir()
    h = hashlib.sha256()
    for p in (script, os.path.abspath(__file__)):
        h.update(sha256_of(p).encode())
    dest = os.path.join(cache, f"{stem}.{h.hexdigest()[:12]}")
    gguf_out = os.path.join(dest, stem + ".gguf")
    ref_out = os.path.join(dest, stem + ".ref.json")
    if os.path.exists(gguf_out) and os.path.exists(ref_out):
        return dest
    os.makedirs(dest, exist_ok=True)
    vocab_path = vocab(cache)
    # Test binaries may build the vocabulary at once: each writes its own partial
    # files, and the last rename wins (both hold the same bytes).
    part = ".%d.partial" % os.getpid()
    with tempfile.TemporaryDirectory(prefix="llamay-vocab-") as tmp:
        corpus_path = os.path.join(tmp, "corpus.json")
        with open(corpus_path, "w", encoding="utf-8") as f:
            json.dump(corpus(prog, randoms), f, ensure_ascii=False)
        subprocess.run([reference_python(cache), script, "--reference-inside", vocab_path,
                        corpus_path, ref_out + part], check=True, stdout=sys.stderr)
        subprocess.run([gguf_python(), script, "--gguf-inside", vocab_path, ref_out + part,
                        gguf_out + part], check=True, stdout=sys.stderr)
    os.replace(gguf_out + part, gguf_out)
    os.replace(ref_out + part, ref_out)
    return dest


def main(doc, key, build_fn, write_reference, write_gguf):
    """The scripts' command line: no argument builds and prints `<key> <dir>`; the two
    `--*-inside` forms are the steps run in the venvs."""
    if sys.argv[1:2] == ["--reference-inside"]:
        return write_reference(*sys.argv[2:5])
    if sys.argv[1:2] == ["--gguf-inside"]:
        return write_gguf(*sys.argv[2:5])
    if len(sys.argv) > 1:
        sys.exit(doc)
    print(f"{key} {build_fn()}")
