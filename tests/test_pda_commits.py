"""PDA commits: a token's commit (the memoised inert paths, the chart shared in place) gives
the same parse state as feeding its bytes one by one, through rollbacks and forks."""

from __future__ import annotations

import json

import numpy as np
import pytest

import gramc

SCHEMA = {  # recursive (a PDA), with strings and numbers for multi-byte tokens to run through
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "size": {"type": "number"},
        "children": {"type": "array", "items": {"$ref": "#"}},
    },
    "required": ["name"],
}


@pytest.fixture(scope="module")
def gpt2():
    return gramc.load_vocab("gpt2")


def _artifact(vocab, limits=gramc.RuntimeLimits()):
    art = gramc.compile(json.dumps(SCHEMA), format="json_schema", vocab=vocab, lazy=True,
                        runtime_limits=limits)
    assert art.kind == "pda"
    return art


def _document(rng, depth=0) -> dict:
    doc: dict = {"name": "".join(rng.choice(list("ab c\"xyz"), size=int(rng.integers(0, 9))))}
    if rng.random() < 0.6:
        doc["size"] = float(np.round(rng.normal(0, 1000), int(rng.integers(0, 4))))
    if depth < 3 and rng.random() < 0.6:
        doc["children"] = [_document(rng, depth + 1) for _ in range(int(rng.integers(0, 3)))]
    return doc


def _document_tokens(vocab, rng) -> list[int]:
    """A random document of the schema, split into tokens at random among the vocabulary's
    spellings (so tokens cross quotes, colons and brackets)."""
    seps = [(",", ":"), (", ", ": ")][int(rng.integers(0, 2))]
    text = json.dumps(_document(rng), separators=seps).encode()
    by_bytes = {t: i for i, t in enumerate(vocab.tokens) if i not in vocab.special_ids and t}
    out, pos = [], 0
    while pos < len(text):
        ends = [e for e in range(pos + 1, min(len(text), pos + 8) + 1) if text[pos:e] in by_bytes]
        end = int(rng.choice(ends)) if rng.random() < 0.5 else max(ends)
        out.append(by_bytes[text[pos:end]])
        pos = end
    return out


def _random_tokens(m, vocab, rng, steps):
    """Tokens of a random walk (longer tokens preferred, to cross several bytes)."""
    out = []
    for _ in range(steps):
        allowed = [int(t) for t in np.flatnonzero(m.mask()) if t not in vocab.eos_ids]
        if not allowed:
            break
        long = [t for t in allowed if len(vocab.tokens[t]) > 2]
        t = int(rng.choice(long if long and rng.random() < 0.7 else allowed))
        assert m.commit_token(t)
        out.append(t)
    return out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("commit_paths", [1, 65_536])
def test_token_commits_equal_byte_commits(gpt2, seed, commit_paths):
    art = _artifact(gpt2, gramc.RuntimeLimits(commit_paths=commit_paths))
    rng = np.random.default_rng(seed)
    tokens = _document_tokens(gpt2, rng)
    by_token, by_bytes = art.matcher(), art.matcher()
    for t in tokens:
        assert by_token.commit_token(t)
        assert by_bytes.commit_bytes(gpt2.tokens[t])  # byte by byte, no memo
        assert np.array_equal(by_token.mask(), by_bytes.mask())
        assert by_token.is_complete() == by_bytes.is_complete()
    assert by_token.is_complete()
    if commit_paths == 1:
        assert art.cache_stats()["commit_paths"]["resets"] > 0


def test_refused_token_leaves_the_chart_as_it_was(gpt2):
    art = _artifact(gpt2)
    m = art.matcher()
    assert m.commit_bytes(b'{"name": "ab')
    before = m.mask()
    refused = [t for t in range(gpt2.size) if not before[t] and len(gpt2.tokens[t]) > 1][:50]
    for t in refused:
        assert not m.commit_token(t)
    assert np.array_equal(m.mask(), before)
    assert m.commit_bytes(b'c"}') and m.is_complete()


@pytest.mark.parametrize("seed", range(3))
def test_rollbacks_and_forks_share_no_steps(gpt2, seed):
    """Matchers whose charts share one list (after a rollback, or forked) each see only
    their own commits."""
    art = _artifact(gpt2)
    rng = np.random.default_rng(seed)
    m = art.matcher(max_rollback=256)
    tokens = _document_tokens(gpt2, rng)
    assert m.commit_tokens(tokens) == len(tokens)
    m.rollback(len(tokens) // 2)
    kept = tokens[: len(tokens) - len(tokens) // 2]
    other = m.fork()
    a = kept + _random_tokens(m, gpt2, rng, 8)
    b = kept + _random_tokens(other, gpt2, rng, 8)
    for matcher, seq in ((m, a), (other, b)):
        fresh = art.matcher()
        assert fresh.commit_tokens(seq) == len(seq)
        assert np.array_equal(matcher.mask(), fresh.mask()), seq


@pytest.mark.parametrize("commit_steps", [1, 4096])
def test_memoised_steps_equal_byte_commits(gpt2, commit_steps):
    """Commit steps are memoised by configuration key and token, and a hit hands the matcher
    the chart another matcher built: documents walked one after another (each twice, and
    matchers that leave a shared chart in turn) mask as byte-by-byte commits do."""
    art = _artifact(gpt2, gramc.RuntimeLimits(commit_steps=commit_steps))
    rng = np.random.default_rng(11)
    docs = [_document_tokens(gpt2, rng) for _ in range(4)]
    for tokens in docs + docs:
        by_token, by_bytes = art.matcher(), art.matcher()
        for t in tokens:
            by_token.mask()  # a mask makes the key that the step is memoised by
            assert by_token.commit_token(t)
            assert by_bytes.commit_bytes(gpt2.tokens[t])
            assert np.array_equal(by_token.mask(), by_bytes.mask())
        assert by_token.is_complete()
    stats = art.cache_stats()["commit_steps"]
    if commit_steps == 1:
        assert stats["evictions"] > 0
    else:
        assert stats["entries"] > 0 and stats["evictions"] == 0
    # Two matchers on one memoised chart, then apart: each sees only its own commits.
    a, b = art.matcher(), art.matcher()
    for m in (a, b):
        for t in docs[0][:6]:
            m.mask()
            assert m.commit_token(t)
    tail_a = _random_tokens(a, gpt2, rng, 6)
    tail_b = _random_tokens(b, gpt2, rng, 6)
    for m, tail in ((a, tail_a), (b, tail_b)):
        fresh = art.matcher()
        assert fresh.commit_bytes(b"".join(gpt2.tokens[t] for t in docs[0][:6] + tail))
        assert np.array_equal(m.mask(), fresh.mask())
