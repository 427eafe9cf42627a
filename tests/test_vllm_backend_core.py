"""What gramc's serving-engine backends share (gramc.integrations.engine_grammars), without vLLM.

``tests/test_vllm_backend.py`` drives the same code through vLLM's own classes where vLLM is
installed; this file runs everywhere: how request kinds become gramc sources, and
:class:`GrammarState` (stop tokens, acceptance, drafts, rollback, bitmask rows of any width)
compared on random walks with a plain gramc ``Matcher`` whose EOS is the stop token.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import gramc
from gramc.bitmask import n_words, unpack_row
from gramc.integrations.engine_grammars import GrammarState, grammar_format, request_source

EOS = 50256
NESTED = 'root ::= "[" (item ("," item)*)? "]"\nitem ::= [0-9]{1,2} | root'


@pytest.mark.parametrize("text, expect", [
    ('root ::= "a" | "b"', "ebnf"),
    ('# GBNF\nroot ::= item+\nitem ::= [a-z]', "ebnf"),
    ("Name ::= [A-Z] NameChar*\nNameChar ::= [a-z]", "ebnf"),
    ('digit = "0" | "1" ;', "ebnf"),
    ('start: "a" expr\nexpr: NUMBER\n%import common.NUMBER', "lark"),
    ('?start: "x" | item\nitem.2: "y"', "lark"),
    ('start: data\ndata[lazy]: /[a-z]+/', "lark"),
    ('start: "a ::= b"', "lark"),
    ('%ignore " "\nstart: "a"', "lark"),
])
def test_grammar_format(text, expect):
    assert grammar_format(text) == expect


def test_request_kinds():
    assert request_source("JSON", '{"type": "string"}') == ("json_schema", '{"type": "string"}')
    assert request_source("JSON_OBJECT", "")[0] == "json_schema"
    assert request_source("REGEX", "a+") == ("regex", "a+")
    assert request_source("GRAMMAR", 'start: "a"') == ("lark", 'start: "a"')
    assert request_source("STRUCTURAL_TAG", "{}") == ("structural_tag", "{}")
    for bad in ("[]", '"yes"', '[1, "a"]'):
        with pytest.raises(ValueError):
            request_source("CHOICE", bad)
    with pytest.raises(ValueError, match="kind"):
        request_source("TOKENS", "x")


def test_choice_is_exactly_its_strings():
    choices = ["yes", 'a "quoted" \\ word', "two\nlines\t!", "naïve 🙂", "", "yes!"]
    fmt, source = request_source("CHOICE", json.dumps(choices))
    art = gramc.compile(source, format=fmt, vocab="gpt2", lazy=True)
    for s in choices:
        m = art.matcher()
        assert m.commit_bytes(s.encode()) and m.is_complete(), s
    for s in ["ye", "yes!!", "no", 'a "quoted" \\\\ word', "naïve"]:
        m = art.matcher()
        assert not (m.commit_bytes(s.encode()) and m.is_complete()), s


@pytest.fixture(scope="module")
def vocabs():
    """gpt2 without EOS (as the backend binds) and gpt2 with its EOS (the reference)."""
    ref = gramc.Vocab.gpt2()
    bare = gramc.Vocab(ref.tokens, ref.special_ids, (), ref.special_names, "gpt2-no-eos")
    return bare, ref


def _state(vocabs, source, fmt="gbnf", max_rollback=4):
    bare, ref = vocabs
    art = gramc.compile(source, format=fmt, vocab=bare, lazy=True)
    reference = gramc.compile(source, format=fmt, vocab=ref, lazy=True).matcher(max_rollback=16)
    return GrammarState(art.matcher(max_rollback=max_rollback), (EOS,), max_rollback), reference


@pytest.mark.parametrize("extra_words", [0, 3, -2])
def test_fill_matches_matcher_at_any_width(vocabs, extra_words):
    """Rows as wide as the vocabulary, wider (a model head past the tokenizer) and narrower
    (a head that cannot produce the last ids): the row is gramc's mask, cut to the row."""
    state, ref = _state(vocabs, NESTED)
    width = n_words(ref.vocab_size) + extra_words
    rng = np.random.default_rng(width)
    for _ in range(30):
        row = np.full(width, -1, dtype=np.int32)
        state.fill(row)
        expect = ref.mask(max(32 * width, ref.vocab_size))[: 32 * width]
        assert np.array_equal(unpack_row(row.view(np.uint32), 32 * width), expect)
        allowed = np.flatnonzero(ref.mask())  # past a narrow row too
        token = int(rng.choice(allowed))
        assert state.accept([token]) and ref.commit_token(token)
        if token == EOS:
            assert state.terminated
            break


def test_stop_token_accept_validate_rollback(vocabs):
    state, ref = _state(vocabs, 'root ::= [0-9] [0-9]? "!"?', max_rollback=4)
    v = vocabs[1]
    seven, bang = v.tokens.index(b"7"), v.tokens.index(b"!")
    letter = v.tokens.index(b"x")
    assert state.validate([EOS]) == []  # nothing complete yet
    assert state.validate([seven, EOS, seven]) == [seven, EOS]  # a stop token ends a draft
    assert state.validate([seven, letter]) == [seven]
    assert state.num_processed_tokens == 0 and not state.terminated
    assert not state.accept([letter]) and state.num_processed_tokens == 0
    assert state.accept([seven, seven, EOS, seven])  # tokens after the stop are ignored
    assert state.terminated and state.num_processed_tokens == 3
    row = np.zeros(n_words(v.size), dtype=np.uint32)
    state.fill(row)
    assert np.flatnonzero(unpack_row(row, v.size)).tolist() == [EOS]
    state.rollback(1)  # undo the stop token: open again, "!" or the stop allowed
    assert not state.terminated
    state.fill(row)
    assert np.flatnonzero(unpack_row(row, v.size)).tolist() == sorted([bang, EOS])
    state.rollback(2)
    assert state.validate([bang]) == [] and state.num_processed_tokens == 0
    with pytest.raises(ValueError, match="roll back"):
        state.rollback(1)
    state.accept([seven])
    state.reset()
    assert state.num_processed_tokens == 0 and state.validate([bang]) == []
