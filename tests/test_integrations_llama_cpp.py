"""llama-cpp-python integration: vocab_from_llama_cpp and GramcLlamaLogitsProcessor.

Needs llama-cpp-python (``pip install 'gramc[llama-cpp]'``); every test that uses it is
skipped, with that reason, where it is not installed. The vocabularies are the vocab-only GGUF
files in ../shared/vocabs (``Llama(model_path=..., vocab_only=True)``). For end-to-end runs of
``create_completion`` the test writes a tiny GPT-2-architecture GGUF with random weights and
the tokenizer metadata of those files (byte-level BPE and SentencePiece), so llama.cpp itself
evaluates the model, calls the processor from its sampler chain and detokenizes the output;
the text it returns is validated with ``re`` and the Earley test oracle.
"""

from __future__ import annotations

import re
import struct
import sys

import numpy as np
import pytest

import gramc
from earley import EarleyOracle
from paths import shared_path

WORDS = r"[a-z]{1,6}( [a-z]{1,6}){0,3}\."
RECORD = r'\{"id": [0-9]{1,4}, "ok": (true|false)\}'
NESTED = 'root ::= "[" ( item ( ", " item )* )? "]"\nitem ::= [0-9]{1,3} | root'
VOCABS = ["gpt-2", "llama-spm", "phi-3"]


@pytest.fixture(scope="module")
def llama_cpp():
    return pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'gramc[llama-cpp]')")


def _quiet_llama(llama_cpp, path, **kw):
    return llama_cpp.Llama(model_path=str(path), verbose=False, **kw)


@pytest.fixture(scope="module")
def vocab_only(llama_cpp):
    return {name: _quiet_llama(llama_cpp, shared_path("vocabs", f"ggml-vocab-{name}.gguf"), vocab_only=True)
            for name in VOCABS}


# ---------------------------------------------------------------- a tiny GGUF model

_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def _skip_value(data: bytes, off: int, vtype: int) -> int:
    if vtype == 8:  # string
        return off + 8 + struct.unpack_from("<Q", data, off)[0]
    if vtype == 9:  # array
        etype, count = struct.unpack_from("<IQ", data, off)
        off += 12
        if etype in _SCALAR:
            return off + count * struct.calcsize(_SCALAR[etype])
        for _ in range(count):
            off = _skip_value(data, off, etype)
        return off
    return off + struct.calcsize(_SCALAR[vtype])


def _metadata_entries(path) -> dict[str, bytes]:
    """The raw bytes of each metadata entry of a GGUF v3 file."""
    data = path.read_bytes()
    magic, version, _, n_kv = struct.unpack_from("<4sIQQ", data, 0)
    assert magic == b"GGUF" and version == 3
    off, out = 24, {}
    for _ in range(n_kv):
        start = off
        klen = struct.unpack_from("<Q", data, off)[0]
        key = data[off + 8: off + 8 + klen].decode()
        vtype = struct.unpack_from("<I", data, off + 8 + klen)[0]
        off = _skip_value(data, off + 12 + klen, vtype)
        out[key] = data[start:off]
    return out


def _entry(key: str, vtype: int, value) -> bytes:
    k = key.encode()
    head = struct.pack("<Q", len(k)) + k + struct.pack("<I", vtype)
    if vtype == 8:
        v = value.encode()
        return head + struct.pack("<Q", len(v)) + v
    return head + struct.pack("<" + _SCALAR[vtype], value)


def write_tiny_gpt2(vocab_gguf, out_path, seed=0, n_embd=32, n_layer=1, n_head=2, n_ctx=128):
    """A GPT-2-architecture GGUF: random f32 weights, the tokenizer entries of ``vocab_gguf``."""
    entries = _metadata_entries(vocab_gguf)
    tokens = entries["tokenizer.ggml.tokens"]
    klen = struct.unpack_from("<Q", tokens, 0)[0]
    n_vocab = struct.unpack_from("<IQ", tokens, 8 + klen + 4)[1]
    kv = [_entry("general.architecture", 8, "gpt2"), _entry("general.name", 8, "gramc-test-tiny"),
          _entry("gpt2.context_length", 4, n_ctx), _entry("gpt2.embedding_length", 4, n_embd),
          _entry("gpt2.feed_forward_length", 4, 4 * n_embd), _entry("gpt2.block_count", 4, n_layer),
          _entry("gpt2.attention.head_count", 4, n_head),
          _entry("gpt2.attention.layer_norm_epsilon", 6, 1e-5), _entry("general.file_type", 4, 0)]
    kv += [raw for key, raw in entries.items() if key.startswith("tokenizer.")]
    rng = np.random.default_rng(seed)

    def rand(*shape, s=0.02):
        return (rng.standard_normal(shape) * s).astype(np.float32)

    tensors = {"token_embd.weight": rand(n_vocab, n_embd, s=1.0), "position_embd.weight": rand(n_ctx, n_embd)}
    for i in range(n_layer):
        for part, shape in (("attn_qkv", (3 * n_embd, n_embd)), ("attn_output", (n_embd, n_embd)),
                            ("ffn_up", (4 * n_embd, n_embd)), ("ffn_down", (n_embd, 4 * n_embd))):
            tensors[f"blk.{i}.{part}.weight"] = rand(*shape)
            tensors[f"blk.{i}.{part}.bias"] = np.zeros(shape[0], np.float32)
        for norm in ("attn_norm", "ffn_norm"):
            tensors[f"blk.{i}.{norm}.weight"] = np.ones(n_embd, np.float32)
            tensors[f"blk.{i}.{norm}.bias"] = np.zeros(n_embd, np.float32)
    tensors["output_norm.weight"] = np.ones(n_embd, np.float32)
    tensors["output_norm.bias"] = np.zeros(n_embd, np.float32)
    infos, blobs, offset = [], [], 0
    for name, arr in tensors.items():
        n, dims = name.encode(), arr.shape[::-1]  # ggml lists the fastest dimension first
        infos.append(struct.pack("<Q", len(n)) + n + struct.pack("<I", len(dims))
                     + struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", 0, offset))
        raw = arr.tobytes() + b"\0" * (-arr.nbytes % 32)
        blobs.append(raw)
        offset += len(raw)
    head = struct.pack("<4sIQQ", b"GGUF", 3, len(tensors), len(kv)) + b"".join(kv) + b"".join(infos)
    out_path.write_bytes(head + b"\0" * (-len(head) % 32) + b"".join(blobs))


@pytest.fixture(scope="module")
def tiny_models(llama_cpp, tmp_path_factory):
    out = {}
    for name in ("gpt-2", "llama-spm"):
        path = tmp_path_factory.mktemp("gguf") / f"tiny-{name}.gguf"
        write_tiny_gpt2(shared_path("vocabs", f"ggml-vocab-{name}.gguf"), path)
        out[name] = _quiet_llama(llama_cpp, path, n_ctx=128, n_threads=1, seed=0)
    return out


# ---------------------------------------------------------------- the vocabulary


@pytest.mark.parametrize("name", VOCABS)
def test_vocab_from_llama_cpp_agrees_with_the_gguf_reader_and_detokenizer(name, vocab_only):
    from gramc.integrations.llama_cpp import vocab_from_llama_cpp

    llm = vocab_only[name]
    v = vocab_from_llama_cpp(llm)
    g = gramc.Vocab.from_gguf(shared_path("vocabs", f"ggml-vocab-{name}.gguf"))  # gramc's own reader
    assert v.size == g.size == llm.n_vocab()
    assert all(v.tokens[i] == g.tokens[i] for i in range(v.size) if i not in g.special_ids)
    assert set(g.eos_ids) <= set(v.eos_ids) and llm.token_eos() in v.eos_ids
    # llama.cpp's end-of-generation set may be larger (phi-3: </s> too); never a text token
    assert set(v.special_ids) - set(g.special_ids) <= set(v.eos_ids)
    ids = [int(i) for i in np.random.default_rng(0).integers(0, v.size, 3000) if i not in v.special_ids]
    ids = [i for i in ids if i != llm.token_bos()]
    assert llm.detokenize(ids) == b"".join(v.tokens[i] for i in ids)


def test_vocab_special_tokens(vocab_only):
    from gramc.integrations.llama_cpp import vocab_from_llama_cpp

    phi = vocab_from_llama_cpp(vocab_only["phi-3"])
    assert {32000, 32007} <= set(phi.eos_ids)  # <|endoftext|>, <|end|>
    assert phi.special_names["<|end|>"] == 32007 and 32007 in phi.special_ids
    spm = vocab_from_llama_cpp(vocab_only["llama-spm"])
    assert {0, 1, 2} <= spm.special_ids and spm.eos_ids == (2,)  # <unk>, <s>, </s>
    assert spm.tokens[13] == b"\n" and spm.tokens[29871] == b" "  # <0x0A>, "▁"
    with pytest.raises(gramc.VocabularyError):
        vocab_from_llama_cpp(object())


@pytest.mark.parametrize("entry", ["gramc.vocab.llama_cpp", "gramc.integrations.llama_cpp", "Vocab"])
def test_missing_llama_cpp_gives_an_install_hint(monkeypatch, entry):
    """Every documented way to read a llama.cpp vocabulary says what to install."""
    import importlib

    load = (gramc.Vocab.from_llama_cpp if entry == "Vocab"
            else importlib.import_module(entry).vocab_from_llama_cpp)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ImportError, match=r"pip install 'gramc\[llama-cpp\]'"):
        load(object())


# ---------------------------------------------------------------- the processor


def _complete(llm, artifact, prompt, **kw):
    from llama_cpp import LogitsProcessorList

    from gramc.integrations.llama_cpp import GramcLlamaLogitsProcessor

    p = kw.pop("processor", None) or GramcLlamaLogitsProcessor(artifact)
    out = llm.create_completion(prompt, logits_processor=LogitsProcessorList([p]), **kw)
    return out["choices"][0], p


SAMPLING = {
    "greedy": dict(temperature=0.0),
    "sample": dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0),
    "top_k_top_p": dict(temperature=0.8, top_k=20, top_p=0.9),
}


@pytest.mark.parametrize("sampling", SAMPLING)
@pytest.mark.parametrize("model", ["gpt-2", "llama-spm"])
def test_create_completion_follows_the_grammar(model, sampling, tiny_models):
    from gramc.compiler.frontends.gbnf import parse_gbnf
    from gramc.integrations.llama_cpp import vocab_from_llama_cpp

    llm = tiny_models[model]
    vocab = vocab_from_llama_cpp(llm)
    oracle = EarleyOracle(parse_gbnf(NESTED))
    for source, fmt in ((WORDS, "regex"), (RECORD, "regex"), (NESTED, "gbnf")):
        artifact = gramc.compile(source, format=fmt, vocab=vocab, lazy=True)
        for seed in range(3):
            choice, p = _complete(llm, artifact, "Output:", max_tokens=24, seed=seed, **SAMPLING[sampling])
            text = choice["text"]
            if fmt == "regex":  # bounded: always finishes with an end-of-generation token
                assert choice["finish_reason"] == "stop" and re.fullmatch(source, text), text
            elif choice["finish_reason"] == "stop":
                assert oracle.fullmatch(text.encode()), text
            else:
                assert choice["finish_reason"] == "length" and oracle.is_viable_prefix(text.encode())
            assert p.calls >= 1


def test_processor_is_reused_and_tracks_generations(tiny_models, llama_cpp):
    from gramc.integrations.llama_cpp import GramcLlamaLogitsProcessor, vocab_from_llama_cpp

    llm = tiny_models["gpt-2"]
    artifact = gramc.compile(WORDS, vocab=vocab_from_llama_cpp(llm), lazy=True)
    p = GramcLlamaLogitsProcessor(artifact)
    texts = []
    for prompt in ("One:", "One:", "A longer prompt:"):
        choice, _ = _complete(llm, artifact, prompt, max_tokens=30, temperature=0.9, seed=len(texts), processor=p)
        texts.append(choice["text"])
        assert re.fullmatch(WORDS, choice["text"]) and p.matcher.is_complete()
    # direct calls: the prompt, then one token at a time; a refused token leaves only EOS
    scores = np.zeros(llm.n_vocab(), dtype=np.float32)
    prompt = np.array(llm.tokenize(b"Hi"), dtype=np.intc)
    out = p(prompt, scores.copy())
    assert np.isfinite(out).sum() == len(artifact.matcher().allowed_tokens())
    comma = llm.tokenize(b",", add_bos=False)[0]
    out = p(np.append(prompt, comma), scores.copy())
    assert np.flatnonzero(np.isfinite(out)).tolist() == [llm.token_eos()]
    with pytest.raises(ValueError):
        GramcLlamaLogitsProcessor(gramc.compile("a"))
