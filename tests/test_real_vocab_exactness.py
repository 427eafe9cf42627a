"""Masks on real vocabularies equal the brute-force definition (derivative oracle per token).

The oracle shares no code with the automata, the trie or the binding walk, so agreement on
every one of the ~50k (gpt2) or ~128k (Llama 3) tokens at every step of a walk is a strong
check of the whole pipeline, special tokens and multi-byte UTF-8 pieces included.
"""

from __future__ import annotations

import numpy as np
import pytest

import gramc
import oracle
from gramc.compiler.frontends.regex import parse_regex
from paths import shared_path

REGEXES = [
    r"((25[0-5]|2[0-4]\d|[01]?\d\d?)\.){3}(25[0-5]|2[0-4]\d|[01]?\d\d?)",
    r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,4}",
    r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
    r'"([^"\\\n]|\\["\\n])*"',
    r"(héllo|wörld|日本語|🙂)+( \w+)?",
    r"(true|false|null|-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?)",
]


def brute_force(expr, vocab, prefix: bytes) -> np.ndarray:
    mask = np.zeros(vocab.size, dtype=bool)
    complete = oracle.fullmatch(expr, prefix)
    for i, tok in enumerate(vocab.tokens):
        if i in vocab.special_ids:
            mask[i] = complete and i in vocab.eos_ids
        else:
            mask[i] = oracle.is_viable_prefix(expr, prefix + tok)
    return mask


def walk_and_compare(pattern: str, vocab, seed: int, steps: int = 6) -> None:
    expr = parse_regex(pattern)
    art = gramc.compile(pattern, vocab=vocab)
    m = art.matcher()
    rng = np.random.default_rng(seed)
    prefix = b""
    for _ in range(steps):
        expected = brute_force(expr, vocab, prefix)
        got = m.mask()
        diff = np.flatnonzero(got != expected)
        assert not len(diff), [(int(t), vocab.tokens[t], bool(got[t])) for t in diff[:5]]
        choices = [t for t in np.flatnonzero(expected) if t not in vocab.eos_ids]
        if not choices:
            break
        t = int(rng.choice(choices))
        assert m.commit_token(t)
        prefix += vocab.tokens[t]


@pytest.mark.parametrize("pattern", REGEXES)
def test_gpt2_masks_equal_brute_force(pattern):
    walk_and_compare(pattern, gramc.load_vocab("gpt2"), seed=len(pattern))


@pytest.mark.slow
@pytest.mark.parametrize("pattern", REGEXES[3:5])
def test_llama3_masks_equal_brute_force(pattern):
    path = shared_path("vocabs", "llama3-tokenizer.json")
    walk_and_compare(pattern, gramc.load_vocab(path), seed=1, steps=4)
