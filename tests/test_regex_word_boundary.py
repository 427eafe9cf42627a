"""Word boundaries ``\\b`` / ``\\B`` against Python's ``re`` on random patterns and strings.

The reference is ``re`` itself: with ``re.ASCII`` its word characters are ECMA-262's
``[A-Za-z0-9_]`` (the unicode dialect, JSON Schema ``pattern``); without it, Python's Unicode
``\\w`` (what Lark terminals get). Patterns are built from atoms whose meaning gramc and
``re`` share (no ``.`` next to line terminators, which ECMA-262 treats differently).
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import fullmatch

from gramc.compiler.frontends.lark_regex import python_class
from gramc.compiler.frontends.regex import parse_regex, parse_regex_search
from gramc.errors import UnsupportedFeatureError

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))

ATOMS = ["a", "b", " ", "-", "é", "1", "_", r"\w", r"\W", r"\d", "[a ]", "[^a]", r"\b", r"\B", r"\b", r"\B"]
ALPHABET = ["a", "b", " ", "-", "é", "1", "_", "Z", "ß"]


@st.composite
def patterns(draw, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and draw(st.integers(0, 4)) == 0:
            alts = [draw(patterns(depth + 1)) for _ in range(draw(st.integers(1, 3)))]
            atom = "(?:" + "|".join(alts) + ")"
        else:
            atom = draw(st.sampled_from(ATOMS))
        if atom not in (r"\b", r"\B"):
            atom += draw(st.sampled_from(["", "", "*", "+", "?"]))
        parts.append(atom)
    return "".join(parts)


texts = st.lists(st.sampled_from(ALPHABET), max_size=6).map("".join)


def _for_empty(pattern, s):
    """Python before 3.14 never matches ``\\B`` in an empty string; ECMA-262 (and Python
    3.14) do: in an empty string both sides are non-word, so ``\\B`` holds and ``\\b`` not."""
    if s:
        return pattern
    swap = {"\\B": "", "\\b": "(?!)"} if isinstance(pattern, str) else {b"\\B": b"", b"\\b": b"(?!)"}
    for old, new in swap.items():
        pattern = pattern.replace(old, new)
    return pattern


@SETTINGS
@given(patterns(), st.lists(texts, min_size=10, max_size=10))
def test_whole_text_matches_python_re(pattern, strings):
    """The unicode dialect (ASCII word characters) against ``re.fullmatch(..., re.ASCII)``."""
    expr = parse_regex(pattern, whole_text=True)
    for s in strings:
        expected = re.fullmatch(_for_empty(pattern, s), s, re.ASCII) is not None
        assert fullmatch(expr, s.encode()) == expected, (pattern, s)


@SETTINGS
@given(patterns(), st.lists(texts, min_size=10, max_size=10))
def test_python_word_characters_match_python_re(pattern, strings):
    """Lark's word characters (Python's Unicode ``\\w``: ``é`` and ``ß`` are letters) against
    ``re.fullmatch`` on ``str``; ``\\w`` is translated as Lark's frontend does."""
    translated = pattern.replace(r"\w", "[\\p{L}\\p{N}_]").replace(r"\W", "[^\\p{L}\\p{N}_]")
    unicode_word = python_class("w")
    expr = parse_regex(translated, whole_text=True, word_chars=unicode_word)
    for s in strings:
        expected = re.fullmatch(_for_empty(pattern, s), s) is not None
        assert fullmatch(expr, s.encode()) == expected, (pattern, s)


@SETTINGS
@given(patterns(), st.lists(texts, min_size=10, max_size=10))
def test_bytes_dialect_matches_python_re_on_bytes(pattern, strings):
    pattern = pattern.replace("é", "e")  # a non-ASCII character is a sequence in bytes patterns
    expr = parse_regex(pattern, dialect="bytes", whole_text=True)
    for s in strings:
        data = s.encode()
        expected = re.fullmatch(_for_empty(pattern.encode(), s), data) is not None
        assert fullmatch(expr, data) == expected, (pattern, s)


@SETTINGS
@given(patterns(), st.lists(texts, min_size=10, max_size=10))
def test_search_mode_matches_python_re_search(pattern, strings):
    """JSON Schema ``pattern`` semantics (``RegExp.test``): a boundary at the pattern's edge
    sees the text around the match."""
    expr = parse_regex_search(pattern)
    for s in strings:
        expected = re.search(_for_empty(pattern, s), s, re.ASCII) is not None
        assert fullmatch(expr, s.encode()) == expected, (pattern, s)


@SETTINGS
@given(patterns(), st.lists(texts, min_size=5, max_size=5))
def test_embedded_patterns_are_exact_or_refused(pattern, strings):
    """Inside a larger grammar the text around the pattern is unknown: the result is either
    refused, or the same language as with any context (a boundary never looks outside)."""
    try:
        expr = parse_regex(pattern)
    except UnsupportedFeatureError as err:
        assert "word boundary" in str(err)
        assert pattern[err.span.offset : err.span.offset + 2] in (r"\b", r"\B")
        return
    for s in strings:
        for before, after in (("", ""), ("a", "a"), (" ", " "), ("a", " "), (" ", "a")):
            m = re.compile(pattern, re.ASCII).fullmatch(before + s + after, len(before), len(before) + len(s))
            assert fullmatch(expr, s.encode()) == (m is not None), (pattern, before, s, after)


@pytest.mark.parametrize("pattern, good, bad", [
    (r"\bfoo\b", ["foo"], ["foox", "afoo"]),
    (r"a\b ", ["a "], []),
    (r"a\bb", [], ["ab"]),
    (r"(?:a|-)\b(?:b|-)", ["a-", "-b"], ["ab", "--"]),
    (r"\w+\B", [], ["abc", "a"]),
    (r"\W*\B\W*", ["", "--", " "], ["a"]),
])
def test_examples(pattern, good, bad):
    expr = parse_regex(pattern, whole_text=True)
    for s in good:
        assert fullmatch(expr, s.encode()), s
    for s in bad:
        assert not fullmatch(expr, s.encode()), s


@pytest.mark.parametrize("pattern, offset", [(r"\bfoo", 0), (r"foo\b", 3), (r"x(?:a|\B)", 6), (r"a+\B", 2)])
def test_undecidable_boundaries_are_refused_with_their_position(pattern, offset):
    with pytest.raises(UnsupportedFeatureError) as info:
        parse_regex(pattern, source_name="pat.re")
    assert info.value.span.offset == offset
    assert "outside the pattern" in str(info.value)


def test_json_schema_pattern_with_boundaries():
    """``pattern`` is ECMA-262 (ASCII word characters), searched, over the decoded string:
    every JSON spelling of a matching value is accepted."""
    from gramc.compiler.pipeline import lower
    from earley import EarleyOracle

    grammar = lower(json.dumps({"type": "string", "pattern": "\\bcat\\b"}), "json_schema")
    oracle = EarleyOracle(grammar)
    for value in ["cat", "a cat!", "cat-dog", "the cat", "concat", "cats", "scat", "c\u00e9cat", "écat"]:
        expected = re.search(r"\bcat\b", value, re.ASCII) is not None
        for text in (json.dumps(value), json.dumps(value, ensure_ascii=False), '"' + "".join(f"\\u{ord(c):04x}" for c in value) + '"'):
            assert oracle.fullmatch(text.encode()) == expected, (value, text)


def test_lark_terminal_boundaries():
    """Inside a Lark terminal, a boundary between two known characters is exact (Python's
    Unicode word characters), one at the terminal's edge is refused."""
    import gramc
    from gramc.compiler.pipeline import lower

    g = lower('start: /é\\b-/ | /x\\Bß/\n', "lark")
    from earley import EarleyOracle

    oracle = EarleyOracle(g)
    assert oracle.fullmatch("é-".encode()) and oracle.fullmatch("xß".encode())
    with pytest.raises(UnsupportedFeatureError):
        gramc.compile("start: /\\bfoo/\n", format="lark")
