"""gramc.vocab: every loader checked against an independent decoder of the same file.

Real tokenizers come from ``shared/vocabs`` beside the repository (see its README); tests
that need one skip with a reason when it is absent. Synthetic vocabularies (tiny
tokenizer.json documents, GGUF files written with ``gguf.GGUFWriter``) cover the rules the
real files do not exercise.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pickle
import random
import struct
import subprocess
import sys
from base64 import b64decode
from pathlib import Path
from types import MappingProxyType

import gguf
import numpy as np
import pytest
import tiktoken
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

from paths import SHARED as SHARED_ROOT
from gramc.errors import GramcWarning, VocabularyError
from gramc.vocab import Vocab, clear_cache, load_vocab
from gramc.vocab.bundled import decode_bundle
from gramc.vocab.pieces import bytes_to_unicode

SHARED = SHARED_ROOT / "vocabs"
REPO = Path(__file__).resolve().parents[1]
SEED = 20240601
SAMPLE = 5000

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
QWEN_SPECIALS = {
    text: 151643 + i
    for i, text in enumerate(
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *(f"<|extra_{k}|>" for k in range(205))]
    )
}
MULTILINGUAL = (
    "Grammar-constrained decoding, naïve café déjà vu. Größe Ærø.\n"
    "日本語のテキストと中文字符，한국어 문장도。 Ελληνικά, русский, עברית, العربية.\n"
    "Emoji: 🤖🚀👩🏽‍💻🇳🇴 — math ∑∞≠, tabs\tand  double  spaces,\r\nCRLF and 12345 digits."
)

#: Fingerprint of the bundled GPT-2 vocabulary, computed once: a regression guard for the
#: canonical encoding documented on Vocab.fingerprint.
GPT2_FINGERPRINT = "59f75317289705d19cc26c6007a0b3827967876693c8379e81770323c148536d"


def shared(name: str) -> Path:
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"shared vocabulary {path} is absent")
    return path


def sample_ids(size: int, extra: tuple[int, ...] = ()) -> list[int]:
    ids = random.Random(SEED).sample(range(size), min(SAMPLE, size))
    return sorted(set(ids) | set(extra))


def utf8_ok(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# -- module-scoped real vocabularies (each file is read once) ---------------------------------


@pytest.fixture(scope="module")
def gpt2_tiktoken() -> Vocab:
    return Vocab.from_tiktoken(shared("gpt2.tiktoken"), {"<|endoftext|>": 50256})


@pytest.fixture(scope="module")
def llama3_path() -> Path:
    return shared("llama3-tokenizer.json")


@pytest.fixture(scope="module")
def llama3(llama3_path) -> Vocab:
    return Vocab.from_tokenizer_json(llama3_path)


@pytest.fixture(scope="module")
def gguf_vocabs() -> dict[str, Vocab]:
    names = ("ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf")
    return {name: Vocab.from_gguf(shared(name)) for name in names}


def tiktoken_encoding(path: Path, pattern: str, specials: dict[str, int]):
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[b64decode(token)] = int(rank)
    return tiktoken.Encoding(
        path.stem, pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials
    )


# -- the Vocab value ------------------------------------------------------------------------


def test_from_list_encodes_str_marks_holes_and_implied_specials():
    v = Vocab.from_list(
        ["a", b"\xff", None, "é", "<eos>", ""], special_ids=[], eos_ids=[4], name="t"
    )
    assert v.tokens == (b"a", b"\xff", b"", "é".encode(), b"<eos>", b"")
    assert v.size == len(v) == 6
    # holes, empty tokens and EOS are never byte-matched
    assert v.special_ids == {2, 4, 5}
    assert v.eos_ids == (4,)
    assert v.name == "t"


def test_special_names_are_special_and_copied():
    v = Vocab.from_list(["x", "<s>", "</s>"], eos_ids=[2], special_names={"<s>": 1, "</s>": 2})
    assert v.special_ids == {1, 2}
    names = v.special_names
    names["<s>"] = 0
    assert v.special_names == {"<s>": 1, "</s>": 2}


def test_eos_ids_sorted_and_deduplicated():
    v = Vocab([b"a", b"b", b"c", b"d"], eos_ids=[3, 1, 3])
    assert v.eos_ids == (1, 3)


def test_from_dict_fills_holes():
    v = Vocab.from_dict({"a": 0, b"\x00": 3, "b": 1})
    assert v.tokens == (b"a", b"b", b"", b"\x00")
    assert v.special_ids == {2}


@pytest.mark.parametrize(
    "build, fragment",
    [
        (lambda: Vocab([]), "no tokens"),
        (lambda: Vocab([b"a", "b"]), "token 1 is str"),
        (lambda: Vocab(b"abc"), "sequence of bytes"),
        (lambda: Vocab([b"a"], eos_ids=[1]), "eos id 1 is out of range(0, 1)"),
        (lambda: Vocab([b"a"], special_ids=[-1]), "special id -1"),
        (lambda: Vocab([b"a"], eos_ids=[True]), "not an int"),
        (lambda: Vocab([b"a"], special_names={"<x>": 5}), "special_names id 5"),
        (lambda: Vocab.from_list([1.5]), "token 0 is float"),
        (lambda: Vocab.from_dict({"a": 0, "b": 0}), "id 0 is given to both"),
        (lambda: Vocab.from_dict({"a": -2}), "token id -2"),
        (lambda: Vocab.from_dict({}), "no tokens"),
    ],
)
def test_invalid_vocabularies_raise_vocabulary_error(build, fragment):
    with pytest.raises(VocabularyError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        build()


def test_vocab_is_immutable():
    v = Vocab([b"a", b"b"])
    with pytest.raises(AttributeError):
        v.tokens = (b"c",)
    with pytest.raises(AttributeError):
        v.name = "other"
    with pytest.raises(AttributeError):
        del v.eos_ids


def test_pickle_round_trip_keeps_content_and_name():
    v = Vocab.from_list(["a", None, "<e>"], eos_ids=[2], name="p", special_names={"<e>": 2})
    w = pickle.loads(pickle.dumps(v))
    assert w == v and w.fingerprint == v.fingerprint
    assert (w.name, w.special_names) == ("p", {"<e>": 2})


def test_numpy_ids_are_accepted():
    v = Vocab([b"a", b"b"], special_ids=np.array([1]), eos_ids=[np.int64(1)])
    assert v.eos_ids == (1,) and type(v.eos_ids[0]) is int


# -- fingerprint ------------------------------------------------------------------------------


def documented_fingerprint(v: Vocab) -> str:
    """The encoding exactly as Vocab.fingerprint's docstring states it."""
    u32 = lambda n: struct.pack("<I", n)
    data = b"gramc.vocab.fingerprint.v1\n" + u32(v.size)
    data += b"".join(u32(len(t)) + t for t in v.tokens)
    data += u32(len(v.special_ids)) + b"".join(u32(i) for i in sorted(v.special_ids))
    data += u32(len(v.eos_ids)) + b"".join(u32(i) for i in v.eos_ids)
    return hashlib.sha256(data).hexdigest()


def test_fingerprint_follows_the_documented_encoding():
    v = Vocab.from_list(["a", "bc", None, "<eos>"], special_ids=[3], eos_ids=[3])
    assert v.fingerprint == documented_fingerprint(v)
    assert v.fingerprint == v.fingerprint  # cached value is stable


def test_fingerprint_of_bundled_gpt2_is_stable():
    v = Vocab.gpt2()
    assert v.fingerprint == GPT2_FINGERPRINT
    assert documented_fingerprint(v) == GPT2_FINGERPRINT


def test_fingerprint_changes_with_one_token_or_eos():
    base = list(Vocab.gpt2().tokens)
    gpt2 = Vocab(base, [50256], [50256])
    assert gpt2.fingerprint == GPT2_FINGERPRINT
    changed = list(base)
    changed[1234] = changed[1234] + b"!"
    assert Vocab(changed, [50256], [50256]).fingerprint != GPT2_FINGERPRINT
    assert Vocab(base, [50256, 0], [50256, 0]).fingerprint != GPT2_FINGERPRINT
    # same special set, different EOS: still a different vocabulary
    assert Vocab(base, [50256, 0], [50256]).fingerprint != Vocab(base, [50256, 0], [0]).fingerprint


def test_fingerprint_ignores_name_and_construction_path():
    a = Vocab.from_list(["x", "y", None], eos_ids=[1], name="one")
    b = Vocab.from_dict({b"y": 1, b"x": 0, b"": 2}, eos_ids=[1], name="two")
    assert a == b and hash(a) == hash(b) and a.fingerprint == b.fingerprint


def test_fingerprint_length_prefix_separates_token_boundaries():
    assert Vocab([b"ab", b"c"]).fingerprint != Vocab([b"a", b"bc"]).fingerprint


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.binary(min_size=1, max_size=4), min_size=1, max_size=8),
    st.lists(st.binary(min_size=1, max_size=4), min_size=1, max_size=8),
    st.sets(st.integers(0, 7), max_size=2),
    st.sets(st.integers(0, 7), max_size=2),
)
def test_fingerprint_equal_iff_content_equal(ta, tb, ea, eb):
    ea = {i for i in ea if i < len(ta)}
    eb = {i for i in eb if i < len(tb)}
    a, b = Vocab(ta, eos_ids=ea), Vocab(tb, eos_ids=eb)
    same = ta == tb and ea == eb
    assert (a.fingerprint == b.fingerprint) == same
    assert (a == b) == same


# -- bundled GPT-2 -------------------------------------------------------------------------


def test_bundled_gpt2_shape():
    v = Vocab.gpt2()
    assert v.size == 50257 and v.name == "gpt2"
    assert v.tokens[50256] == b"<|endoftext|>"
    assert v.special_ids == {50256} and v.eos_ids == (50256,)
    assert v.special_names == {"<|endoftext|>": 50256}
    assert v.tokens[220] == b" " and v.tokens[198] == b"\n" and v.tokens[31373] == b"hello"
    assert Vocab.gpt2() is v  # loaded once per process


def test_bundled_gpt2_equals_the_tiktoken_file(gpt2_tiktoken):
    assert gpt2_tiktoken.tokens == Vocab.gpt2().tokens
    assert gpt2_tiktoken.fingerprint == GPT2_FINGERPRINT


def test_bundled_gpt2_equals_the_gpt2_gguf(gguf_vocabs):
    g = gguf_vocabs["ggml-vocab-gpt-2.gguf"]
    assert g.tokens == Vocab.gpt2().tokens
    assert g.special_ids == {50256} and g.eos_ids == (50256,)
    assert g.fingerprint == GPT2_FINGERPRINT


def test_bundled_gpt2_loads_fast():
    import time

    blob = (REPO / "src/gramc/vocab/data/gpt2.vocab.zst").read_bytes()
    start = time.perf_counter()
    v = decode_bundle(blob)  # decompress, unpack, validate, verify fingerprint
    elapsed = time.perf_counter() - start
    assert v.fingerprint == GPT2_FINGERPRINT
    assert elapsed < 1.0, f"bundled gpt2 took {elapsed:.3f}s (about 0.03s expected)"


def test_bundled_gpt2_is_regenerated_byte_for_byte():
    spec = importlib.util.spec_from_file_location(
        "make_bundled_gpt2", REPO / "tools/make_bundled_gpt2.py"
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    blob = tool.build(shared("gpt2.tiktoken"))
    assert blob == (REPO / "src/gramc/vocab/data/gpt2.vocab.zst").read_bytes()


def test_damaged_bundle_is_rejected():
    with pytest.raises(VocabularyError, match="damaged"):
        decode_bundle(b"not zstd at all", source="x")


# -- tiktoken files ---------------------------------------------------------------------------


def test_gpt2_tiktoken_matches_tiktoken(gpt2_tiktoken):
    enc = tiktoken_encoding(shared("gpt2.tiktoken"), GPT2_PATTERN, {"<|endoftext|>": 50256})
    for i in sample_ids(gpt2_tiktoken.size, (0, 50255, 50256)):
        assert gpt2_tiktoken.tokens[i] == enc.decode_single_token_bytes(i), i
    ids = enc.encode(MULTILINGUAL)
    assert b"".join(gpt2_tiktoken.tokens[i] for i in ids) == MULTILINGUAL.encode()
    assert gpt2_tiktoken.eos_ids == (50256,)


def test_qwen2_tiktoken_matches_tiktoken():
    path = shared("qwen2.tiktoken")
    v = Vocab.from_tiktoken(path, QWEN_SPECIALS)
    enc = tiktoken_encoding(path, QWEN_PATTERN, QWEN_SPECIALS)
    assert v.size == 151851 == enc.n_vocab
    for i in sample_ids(v.size, (0, 151642, 151643, 151645, 151850)):
        assert v.tokens[i] == enc.decode_single_token_bytes(i), i
    ids = enc.encode(MULTILINGUAL)
    assert b"".join(v.tokens[i] for i in ids) == MULTILINGUAL.encode()
    assert v.special_ids == set(range(151643, 151851))
    assert v.eos_ids == (151643, 151645)  # <|endoftext|>, <|im_end|> by name


def test_tiktoken_eos_argument_takes_names_and_ids():
    path = shared("gpt2.tiktoken")
    specials = {"<|endoftext|>": 50256, "<|pad|>": 50257}
    assert Vocab.from_tiktoken(path, specials, eos="<|pad|>").eos_ids == (50257,)
    assert Vocab.from_tiktoken(path, specials, eos=[50256, "<|pad|>"]).eos_ids == (50256, 50257)
    with pytest.raises(VocabularyError, match="not a special token"):
        Vocab.from_tiktoken(path, specials, eos="<|nope|>")
    with pytest.raises(VocabularyError, match="already a BPE rank"):
        Vocab.from_tiktoken(path, {"<|x|>": 5})


def test_standard_tiktoken_files_get_their_specials_and_others_warn(tmp_path):
    path = shared("gpt2.tiktoken")
    assert Vocab.from_tiktoken(path) == Vocab.gpt2()  # r50k_base: <|endoftext|> = 50256
    qwen = Vocab.from_tiktoken(shared("qwen2.tiktoken"))
    assert qwen == Vocab.from_tiktoken(shared("qwen2.tiktoken"), QWEN_SPECIALS)
    with pytest.warns(GramcWarning, match="no end-of-sequence token"):
        assert Vocab.from_tiktoken(path, {}).eos_ids == ()  # specials given: none
    changed = tmp_path / "other.tiktoken"
    changed.write_bytes(path.read_bytes() + b"\n")  # same ranks, not a standard file
    with pytest.warns(GramcWarning, match="other.tiktoken: no end-of-sequence token"):
        other = Vocab.from_tiktoken(changed)
    assert other.tokens == Vocab.gpt2().tokens[:50256] and other.eos_ids == ()


def test_tiktoken_gaps_become_holes(tmp_path):
    f = tmp_path / "gappy.tiktoken"
    f.write_text("YQ== 0\nYmM= 3\n")
    v = Vocab.from_tiktoken(f, {"<|end|>": 5})
    assert v.tokens == (b"a", b"", b"", b"bc", b"", b"<|end|>")
    assert v.special_ids == {1, 2, 4, 5} and v.eos_ids == (5,)


@pytest.mark.parametrize(
    "text, fragment",
    [("YQ== 0\nnot-base64!! 1\n", ":2:"), ("YQ== 0\nYg== 0\n", "repeated"), ("\n\n", "no tokens")],
)
def test_malformed_tiktoken_names_file_and_line(tmp_path, text, fragment):
    f = tmp_path / "bad.tiktoken"
    f.write_text(text)
    with pytest.raises(VocabularyError, match=fragment) as info:
        Vocab.from_tiktoken(f)
    assert "bad.tiktoken" in str(info.value)


# -- tokenizer.json ---------------------------------------------------------------------------


def test_llama3_json_matches_tokenizers(llama3, llama3_path):
    tok = tokenizers.Tokenizer.from_file(str(llama3_path))
    assert llama3.size == 128257 == tok.get_vocab_size(with_added_tokens=True)
    compared = 0
    for i in sample_ids(llama3.size, (0, 127999, 128000, 128009, 128256)):
        text = tok.decode([i], skip_special_tokens=False)
        if "\ufffd" not in text:
            assert llama3.tokens[i] == text.encode(), i
            compared += 1
    assert compared > 0.9 * min(SAMPLE, llama3.size)


def test_llama3_json_round_trips_multilingual_text(llama3, llama3_path):
    tok = tokenizers.Tokenizer.from_file(str(llama3_path))
    ids = tok.encode(MULTILINGUAL, add_special_tokens=False).ids
    pieces = [llama3.tokens[i] for i in ids]
    assert b"".join(pieces) == MULTILINGUAL.encode()
    assert not any(i in llama3.special_ids for i in ids)
    assert any(not utf8_ok(p) for p in pieces)  # byte-level: some tokens split characters


def test_llama3_json_specials_and_eos(llama3):
    assert llama3.special_ids == set(range(128000, 128257))
    assert llama3.eos_ids == (128001, 128008, 128009)
    names = llama3.special_names
    assert names["<|begin_of_text|>"] == 128000 and names["<|eot_id|>"] == 128009
    assert llama3.tokens[128009] == b"<|eot_id|>"


def test_llama3_json_eos_override(llama3_path):
    assert Vocab.from_tokenizer_json(llama3_path, eos_ids=[128009]).eos_ids == (128009,)


def added(i: int, content: str, special: bool = True) -> dict:
    flags = dict.fromkeys(("single_word", "lstrip", "rstrip", "normalized"), False)
    return {"id": i, "content": content, "special": special, **flags}


def spm_tokenizer_json(byte_fallback: bool = True) -> dict:
    """A Llama-2-style tokenizer.json: SentencePiece BPE with byte fallback."""
    pieces = ["<unk>", "<s>", "</s>", "<0x41>", "<0x0A>", "<0xE2>", "▁", "▁hello", "world", "▁▁"]
    return {
        "version": "1.0",
        "added_tokens": [added(i, t) for i, t in enumerate(pieces[:3])]
        + [added(10, "<|tool|>", False)],
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {"type": "Prepend", "prepend": "▁"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
            ],
        },
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ],
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": byte_fallback,
            "ignore_merges": False,
            "vocab": {p: i for i, p in enumerate(pieces)},
            "merges": [],
        },
    }


def unigram_tokenizer_json() -> dict:
    """A T5-style tokenizer.json: Unigram model, Metaspace pre-tokenizer and decoder."""
    meta = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    vocab = [
        ["<pad>", 0.0],
        ["</s>", 0.0],
        ["<unk>", 0.0],
        ["▁", -2.0],
        ["▁a", -3.0],
        ["b", -4.0],
        ["é", -5.0],
        ["▁▁c", -6.0],
    ]
    return {
        "version": "1.0",
        "added_tokens": [added(i, t) for i, t in enumerate(["<pad>", "</s>", "<unk>"])],
        "normalizer": None,
        "pre_tokenizer": meta,
        "post_processor": None,
        "decoder": meta,
        "model": {"type": "Unigram", "unk_id": 2, "vocab": vocab, "byte_fallback": False},
    }


def tokenizers_pieces(doc: dict, ids: list[int], anchor: int) -> dict[int, bytes]:
    """Each id's bytes per the `tokenizers` library: decode([anchor, i]) minus decode([anchor]).

    The anchor absorbs the decoder's "strip the first space" rule, so a word-initial piece
    keeps its space, as it does inside a generated text.
    """
    tok = tokenizers.Tokenizer.from_str(json.dumps(doc))
    head = tok.decode([anchor]).encode()
    out = {}
    for i in ids:
        both = tok.decode([anchor, i]).encode()
        assert both.startswith(head)
        out[i] = both[len(head) :]
    return out


def test_sentencepiece_json_matches_tokenizers(tmp_path):
    doc = spm_tokenizer_json()
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    v = Vocab.from_tokenizer_json(path)
    assert v.tokens[3:10] == (b"A", b"\n", b"\xe2", b" ", b" hello", b"world", b"  ")
    normal = [i for i in range(v.size) if i not in v.special_ids and i != 5]  # 0xE2 alone is lossy
    assert tokenizers_pieces(doc, normal, anchor=8) == {i: v.tokens[i] for i in normal}
    assert v.special_ids == {0, 1, 2} and v.eos_ids == (2,)
    assert v.tokens[10] == b"<|tool|>" and 10 not in v.special_ids  # non-special added token


def test_sentencepiece_json_without_byte_fallback_keeps_text(tmp_path):
    doc = spm_tokenizer_json(byte_fallback=False)
    decoders = doc["decoder"]["decoders"]
    doc["decoder"]["decoders"] = [d for d in decoders if d["type"] != "ByteFallback"]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert Vocab.from_tokenizer_json(path).tokens[3] == b"<0x41>"


def test_unigram_metaspace_json_matches_tokenizers(tmp_path):
    doc = unigram_tokenizer_json()
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    v = Vocab.from_tokenizer_json(path)
    assert v.tokens[3:] == (b" ", b" a", b"b", "é".encode(), b"  c")
    assert v.eos_ids == (1,)
    assert tokenizers_pieces(doc, [3, 4, 6, 7], anchor=5) == {i: v.tokens[i] for i in (3, 4, 6, 7)}


def test_tokenizer_json_holes_are_special(tmp_path):
    doc = spm_tokenizer_json()
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    v = Vocab.from_tokenizer_json(path)
    assert v.size == 11 and 10 not in v.special_ids  # id 10 is the added "<|tool|>"
    del doc["model"]["vocab"]["world"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    v = Vocab.from_tokenizer_json(path)
    assert v.tokens[8] == b"" and 8 in v.special_ids


def test_tokenizer_json_eos_from_sibling_configs(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spm_tokenizer_json()), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": {"content": "<s>"}}))
    assert Vocab.from_tokenizer_json(path).eos_ids == (1,)
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [0, 2]}))
    assert Vocab.from_tokenizer_json(path).eos_ids == (0, 2)
    assert Vocab.from_tokenizer_json(path, eos_ids=[1]).eos_ids == (1,)


def test_wordpiece_json_is_refused(tmp_path):
    path = tmp_path / "bert.json"
    path.write_text(json.dumps({"model": {"type": "WordPiece", "vocab": {"a": 0, "##b": 1}}}))
    with pytest.raises(VocabularyError, match="WordPiece"):
        Vocab.from_tokenizer_json(path)


# -- GGUF ----------------------------------------------------------------------------------------


def test_spm_ggufs_byte_fallback_and_spaces(gguf_vocabs):
    for name in ("ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"):
        v = gguf_vocabs[name]
        assert all(v.tokens[3 + b] == bytes((b,)) for b in range(256)), name  # <0xNN>
        assert v.tokens[3 + 0x41] == b"A"
        assert v.tokens[29871] == b" " and v.tokens[450] == b" The"
        assert not any("▁".encode() in t for i, t in enumerate(v.tokens) if i not in v.special_ids)
        # README: 16,409 pieces contain "▁"; SentencePiece pieces have no raw spaces
        assert sum(b" " in t for t in v.tokens[259:32000]) == 16409


def test_llama_spm_gguf_classification(gguf_vocabs):
    v = gguf_vocabs["ggml-vocab-llama-spm.gguf"]
    assert v.size == 32000
    assert v.special_ids == {0, 1, 2}  # 1 UNKNOWN + 2 CONTROL (README table)
    assert v.eos_ids == (2,)
    assert v.special_names == {"<unk>": 0, "<s>": 1, "</s>": 2}


def test_phi3_gguf_classification(gguf_vocabs):
    v = gguf_vocabs["ggml-vocab-phi-3.gguf"]
    assert v.size == 32064
    # README: 53 UNKNOWN ([PADnnnnn]) + 13 CONTROL; the one USER_DEFINED token is "</s>", text
    assert len(v.special_ids) == 66
    assert v.special_ids == {0, 1} | set(range(32000, 32064))
    assert v.tokens[2] == b"</s>" and 2 not in v.special_ids
    # eos_token_id 32000 <|endoftext|>, plus <|end|> by name
    assert v.eos_ids == (32000, 32007)
    assert v.special_names["<|assistant|>"] == 32001


def llama_cpp_pieces(path: Path, size: int):
    llama_cpp = pytest.importorskip("llama_cpp", exc_type=ImportError)
    import ctypes

    model = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    vocab = model._model.vocab
    buf = ctypes.create_string_buffer(512)

    def piece(i: int) -> bytes:
        n = llama_cpp.llama_token_to_piece(vocab, i, buf, len(buf), 0, False)
        assert n >= 0
        return buf.raw[:n]

    pieces = [piece(i) for i in range(size)]
    attrs = [llama_cpp.llama_vocab_get_attr(vocab, i) for i in range(size)]
    eog = {i for i in range(size) if llama_cpp.llama_vocab_is_eog(vocab, i)}
    return pieces, attrs, eog


@pytest.mark.parametrize(
    "name", ["ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"]
)
def test_gguf_matches_llama_cpp_token_to_piece(gguf_vocabs, name):
    v = gguf_vocabs[name]
    pieces, attrs, eog = llama_cpp_pieces(shared(name), v.size)
    control, user_defined = 1 << 3, 1 << 4
    # llama.cpp re-types USER_DEFINED tokens named like an end of turn ("</s>" in Phi-3) to
    # CONTROL and ends generation on them; gramc keeps the file's type (see docs).
    retyped = {i for i, a in enumerate(attrs) if a & control and a & user_defined}
    for i, token in enumerate(v.tokens):
        if i in v.special_ids or i in retyped:
            assert pieces[i] == b"", i  # not rendered without special=True
        else:
            assert pieces[i] == token, i
    assert eog == set(v.eos_ids) | retyped


def write_gguf(path: Path, tokens: list[str], types: list[int] | None, model="llama", **ids):
    w = gguf.GGUFWriter(str(path), arch="llama")
    if model is not None:
        w.add_tokenizer_model(model)
    if tokens:
        w.add_token_list(tokens)
    if types is not None:
        w.add_token_types(types)
    for key, value in ids.items():
        getattr(w, f"add_{key}")(value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_synthetic_gguf_types_and_eos_keys(tmp_path):
    tokens = ["<unk>", "<s>", "</s>", "<0x41>", "▁hi", "<|user|>", "<|eot|>", "[UNUSED]", "x▁y"]
    types = [2, 3, 3, 6, 1, 4, 3, 5, 1]
    path = write_gguf(tmp_path / "t.gguf", tokens, types, eos_token_id=2, eot_token_id=6)
    v = Vocab.from_gguf(path)
    assert v.tokens == (
        b"<unk>",
        b"<s>",
        b"</s>",
        b"A",
        b" hi",
        b"<|user|>",
        b"<|eot|>",
        b"[UNUSED]",
        b"x y",
    )
    assert v.special_ids == {0, 1, 2, 6, 7}
    assert v.eos_ids == (2, 6)
    assert Vocab.from_gguf(path, eos_ids=[1]).eos_ids == (1,)


def test_gguf_gpt2_model_uses_byte_level_and_default_types(tmp_path):
    path = write_gguf(tmp_path / "bpe.gguf", ["Ġthe", "Ċ", "Ã©", "<|x|>"], None, model="gpt2")
    assert Vocab.from_gguf(path).tokens == (b" the", b"\n", "é".encode(), b"<|x|>")


@pytest.mark.parametrize(
    "tokens, types, model, fragment",
    [
        ([], None, None, "no vocabulary"),
        (["a"], [1], "rwkv", "unsupported GGUF tokenizer model 'rwkv'"),
        (["<0xZZ>"], [6], "llama", "BYTE token 0"),
        (["a", "b"], [1], "llama", "2 tokens but 1 token types"),
    ],
)
def test_unusable_gguf_vocabularies(tmp_path, tokens, types, model, fragment):
    path = write_gguf(tmp_path / "bad.gguf", tokens, types, model=model)
    with pytest.raises(VocabularyError, match=fragment) as info:
        Vocab.from_gguf(path)
    assert "bad.gguf" in str(info.value)


def test_gguf_without_the_gguf_package_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "gguf", None)
    with pytest.raises(VocabularyError, match="pip install"):
        Vocab.from_gguf(tmp_path / "x.gguf")


# -- transformers tokenizer objects ---------------------------------------------------------


def test_from_hf_fast_tokenizer_equals_tokenizer_json(llama3, llama3_path):
    transformers = pytest.importorskip("transformers", exc_type=ImportError)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(llama3_path))
    v = Vocab.from_hf(tok)
    assert v.tokens == llama3.tokens and v.special_ids == llama3.special_ids
    assert v.eos_ids == llama3.eos_ids  # no eos_token set: the name heuristic
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(llama3_path), eos_token="<|eot_id|>"
    )
    assert Vocab.from_hf(tok).eos_ids == (128009,)


class SlowSentencePiece:
    """Duck-typed slow tokenizer (the attributes transformers' slow tokenizers expose)."""

    is_fast = False
    name_or_path = "slow-spm"
    sp_model = object()
    all_special_ids = (0, 1, 2)
    eos_token_id = 2

    def get_vocab(self):
        return {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x41>": 3, "▁the": 4, "cat": 6}

    def convert_tokens_to_string(self, tokens):  # pragma: no cover - SPM path must not use it
        raise AssertionError("SentencePiece tokens are decoded without it")


class SlowByteLevel(SlowSentencePiece):
    name_or_path = "slow-bpe"
    sp_model = None
    byte_decoder = MappingProxyType({ch: b for b, ch in bytes_to_unicode().items()})
    all_special_ids = (3,)
    eos_token_id = 3

    def get_vocab(self):
        return {"Ġthe": 0, "Ċ": 1, "Ã©": 2, "<|endoftext|>": 3}


class SlowPlain(SlowByteLevel):
    byte_decoder = None
    all_special_ids = ()
    eos_token_id = None

    def get_vocab(self):
        return {"hello": 0, "world": 1}

    def convert_tokens_to_string(self, tokens):
        return "".join(tokens).upper()


def test_from_hf_slow_tokenizers():
    spm = Vocab.from_hf(SlowSentencePiece())
    assert spm.tokens == (b"<unk>", b"<s>", b"</s>", b"A", b" the", b"", b"cat")
    assert spm.special_ids == {0, 1, 2, 5} and spm.eos_ids == (2,) and spm.name == "slow-spm"
    bpe = Vocab.from_hf(SlowByteLevel())
    assert bpe.tokens == (b" the", b"\n", "é".encode(), b"<|endoftext|>")
    assert bpe.eos_ids == (3,) and bpe.special_names == {"<|endoftext|>": 3}
    plain = Vocab.from_hf(SlowPlain())
    assert plain.tokens == (b"HELLO", b"WORLD") and plain.eos_ids == ()


def test_from_hf_rejects_non_tokenizers():
    with pytest.raises(VocabularyError, match="not a transformers tokenizer"):
        Vocab.from_hf(object())


# -- load_vocab -----------------------------------------------------------------------------


def test_load_vocab_dispatch():
    assert load_vocab("gpt2") is Vocab.gpt2()
    v = Vocab([b"a"])
    assert load_vocab(v) is v
    assert load_vocab(shared("gpt2.tiktoken")) == Vocab.gpt2()  # a standard encoding's specials


def test_load_vocab_gguf_and_folder(tmp_path, llama3_path, llama3):
    assert load_vocab(shared("ggml-vocab-llama-spm.gguf")).size == 32000
    folder = tmp_path / "model"
    folder.mkdir()
    os.symlink(llama3_path, folder / "tokenizer.json")
    assert load_vocab(folder) == llama3
    assert load_vocab(str(folder / "tokenizer.json")) is load_vocab(folder)


@pytest.mark.filterwarnings("ignore:.*no end-of-sequence token")  # a made-up .tiktoken
def test_load_vocab_caches_by_path_and_mtime(tmp_path):
    path = tmp_path / "v.tiktoken"
    path.write_text("YQ== 0\nYg== 1\n")
    clear_cache()
    first = load_vocab(path)
    assert load_vocab(str(path)) is first
    path.write_text("YQ== 0\nYg== 1\nYw== 2\n")
    os.utime(path, ns=(1, 1))  # a different mtime even on a coarse-clock file system
    second = load_vocab(path)
    assert second is not first and second.size == 3


@pytest.mark.parametrize(
    "name, content, fragment",
    [
        ("missing.json", None, "no such file"),
        ("garbage.json", b"\x00\x01 not json", "not a tokenizer.json"),
        ("notatokenizer.json", b'{"hello": 1}', "no 'model' object"),
        ("garbage.gguf", b"GGUF but not really" * 10, "not a readable GGUF"),
        ("garbage.tiktoken", b"@@@ @@@\n", "expected 'base64-token rank'"),
        ("vocab.txt", b"a\nb\n", "unrecognised kind"),
        ("missing.model", None, "unrecognised kind"),
    ],
)
def test_load_vocab_errors_name_the_file(tmp_path, name, content, fragment):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(VocabularyError, match=fragment) as info:
        load_vocab(path)
    assert name in str(info.value)


def test_load_vocab_rejects_unknown_names_and_types():
    with pytest.raises(VocabularyError, match="'llama-nonexistent'.*'gpt2'"):
        load_vocab("llama-nonexistent")
    with pytest.raises(VocabularyError, match="from int"):
        load_vocab(42)


def test_importing_gramc_vocab_pulls_in_no_heavy_package():
    code = (
        "import sys; from gramc.vocab import Vocab, load_vocab; load_vocab('gpt2');"
        "heavy = {'torch', 'transformers', 'gguf', 'tiktoken', 'tokenizers'} & set(sys.modules);"
        "print(sorted(heavy)); sys.exit(1 if heavy else 0)"
    )
    import gramc

    src = str(Path(gramc.__file__).resolve().parents[1])  # the gramc this process tests
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_shared_files_are_the_documented_ones():
    """The comparisons above are only meaningful for the files the README describes."""
    expected = {
        "gpt2.tiktoken": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
        "ggml-vocab-llama-spm.gguf": "16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69",
    }
    for name, digest in expected.items():
        assert hashlib.sha256(shared(name).read_bytes()).hexdigest() == digest, name
