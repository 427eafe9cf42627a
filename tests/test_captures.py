"""Captures (llguidance Lark ``[capture]``): ``Matcher.captures()`` against references.

- Python ``re`` with named groups: on complete outputs, gramc's captures are the groups' spans;
  on every prefix, they are the spans every completion's match agrees on (the definition in
  :mod:`gramc.runtime.captures`: a capture is reported once more text cannot change it),
  computed by brute force over all completions up to a few characters.
- llguidance (PyPI), where installed: the (name, text) pairs it reports after each byte, on
  grammars whose captured terminals end at a delimiter (llguidance's lexer is greedy, so
  elsewhere its language differs from the grammar's).
- Rollback and fork keep captures consistent; grammars without captures keep plain matchers.
"""

from __future__ import annotations

import itertools
import json
import random
import re

import pytest

import gramc
from gramc.errors import UnsupportedFeatureError
from gramc.runtime.matcher import DFAMatcher

# (Lark grammar, the same language as a regex with named groups, a generator of members,
#  the alphabet completions are drawn from)
CASES = {
    "delimited": ('start: r "x" s "."\nr[capture]: /[0-9]+/\ns[capture="word"]: /[a-z]+/\n',
                  r"(?P<r>[0-9]+)x(?P<word>[a-z]+)\.",
                  lambda g: _digits(g) + "x" + _letters(g) + ".", "01abx."),
    "optional key": ('start: (k "=")? v ";"\nk[capture="key"]: /[a-z]+/\nv[capture="val"]: /[a-z0-9]+/\n',
                     r"(?:(?P<key>[a-z]+)=)?(?P<val>[a-z0-9]+);",
                     lambda g: (_letters(g) + "=" if g.random() < 0.5 else "") + g.choice([_letters, _digits])(g) + ";",
                     "01ab=;"),
    "nested": ('start: "<" outer ">"\nouter[capture]: /[a-z]/ inner /[a-z]/\ninner[capture]: /[0-9]+/\n',
               r"<(?P<outer>[a-z](?P<inner>[0-9]+)[a-z])>",
               lambda g: "<" + _letters(g, 1) + _digits(g) + _letters(g, 1) + ">", "01ab<>"),
    "open end": ('start: r s?\nr[capture]: /[0-9]+/\ns[capture]: "a"+\n',
                 r"(?P<r>[0-9]+)(?P<s>a+)?",
                 lambda g: _digits(g) + "a" * g.randrange(3), "01a"),
}
COMPLETION = 5  # completions tried up to this many characters


def _digits(g: random.Random) -> str:
    return "".join(g.choice("01") for _ in range(g.randint(1, 3)))


def _letters(g: random.Random, n: int | None = None) -> str:
    return "".join(g.choice("ab") for _ in range(n or g.randint(1, 3)))


def groups(pattern: re.Pattern, text: str) -> set[tuple[str, int, int]]:
    m = pattern.fullmatch(text)
    assert m is not None, text
    return {(name, *m.span(name)) for name in pattern.groupindex if m.group(name) is not None}


def settled(pattern: re.Pattern, prefix: str, alphabet: str) -> set[tuple[str, int, int]]:
    """The spans within ``prefix`` that every member starting with ``prefix`` (up to
    COMPLETION more characters) has."""
    common = None
    for k in range(COMPLETION + 1):
        for tail in itertools.product(alphabet, repeat=k):
            text = prefix + "".join(tail)
            m = pattern.fullmatch(text)
            if m is None:
                continue
            spans = {(n, *m.span(n)) for n in pattern.groupindex
                     if m.group(n) is not None and m.end(n) <= len(prefix)}
            common = spans if common is None else common & spans
    assert common is not None, f"{prefix!r} has no completion"
    return common


@pytest.fixture(scope="module")
def compiled():
    return {name: gramc.compile(lark, format="lark", vocab="gpt2", lazy=True) for name, (lark, *_) in CASES.items()}


@pytest.mark.parametrize("case", CASES)
def test_captures_equal_the_regex_groups(case, compiled):
    _, regex, member, alphabet = CASES[case]
    pattern = re.compile(regex)
    rng = random.Random(case)
    for _ in range(12):
        text = member(rng)
        m = compiled[case].matcher()
        for i, ch in enumerate(text):
            got = {(n, a, b) for n, a, b, data in m.captures()}
            assert got == settled(pattern, text[:i], alphabet), (text, text[:i])
            assert m.commit_bytes(ch.encode())
        final = m.captures(final=True)
        assert {(n, a, b) for n, a, b, _ in final} == groups(pattern, text), text
        assert all(data == text.encode()[a:b] for _, a, b, data in final)


def test_captures_follow_rollback_fork_reset_and_eos(compiled):
    art = compiled["delimited"]
    vocab = gramc.load_vocab("gpt2")
    m = art.matcher()
    for chunk in (b"12", b"x", b"ab"):
        assert m.commit_bytes(chunk)
    assert m.captures() == [("r", 0, 2, b"12")]
    fork = m.fork()
    assert fork.commit_bytes(b".") and fork.captures() == [("r", 0, 2, b"12"), ("word", 3, 5, b"ab")]
    assert m.captures() == [("r", 0, 2, b"12")]  # the fork's text is its own
    m.rollback(2)
    assert m.captures() == [] and m.commit_bytes(b"3x")
    assert m.captures() == [("r", 0, 3, b"123")]
    m.reset()
    assert m.captures() == []
    ids = [vocab.tokens.index(t) for t in (b"7", b"x", b"hello", b".")]
    assert m.commit_tokens(ids) == 4
    assert m.captures() == [("r", 0, 1, b"7"), ("word", 2, 7, b"hello")]
    assert m.commit_token(vocab.eos_ids[0]) and m.captures() == [("r", 0, 1, b"7"), ("word", 2, 7, b"hello")]


def test_repeated_captures_are_each_reported():
    art = gramc.compile('start: item ("," item)*\nitem[capture]: /[a-z]+/\n', format="lark", vocab="gpt2", lazy=True)
    m = art.matcher()
    assert m.commit_bytes(b"ab,c,de")
    assert m.captures() == [("item", 0, 2, b"ab"), ("item", 3, 4, b"c")]
    assert m.captures(final=True)[-1] == ("item", 5, 7, b"de")


def test_grammars_without_captures_keep_plain_matchers():
    art = gramc.compile('start: r\nr: /[0-9]+/\n', format="lark", vocab="gpt2", lazy=True)
    m = art.matcher()
    assert type(m) is DFAMatcher and "captures" not in art.meta
    assert m.commit_bytes(b"12") and m.captures() == []


def test_captures_under_ignore_leave_out_the_gap():
    art = gramc.compile('start: a b\na[capture]: /[a-z]+/\nb[capture]: /[0-9]+/\n%ignore " "\n',
                        format="lark", vocab="gpt2", lazy=True)
    m = art.matcher()
    assert m.commit_bytes(b" ab  12")
    assert m.captures(final=True) == [("a", 1, 3, b"ab"), ("b", 5, 7, b"12")]


def test_stop_captures_are_refused_when_asked_for():
    art = gramc.compile('start: r "!"\nr[capture, stop="."]: /[a-z]+/\n', format="lark", vocab="gpt2", lazy=True)
    m = art.matcher()
    assert m.commit_bytes(b"ab.!")  # the language is unchanged
    with pytest.raises(UnsupportedFeatureError, match="stop="):
        m.captures()


@pytest.mark.parametrize("case", ["delimited", "nested"])
def test_captures_agree_with_llguidance(case, compiled):
    llg = pytest.importorskip("llguidance")

    class Bytes:
        eos_token_id, bos_token_id = 256, None
        tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
        special_token_ids = [256]

        def __call__(self, s):
            return list(s.encode() if isinstance(s, str) else s)

    tok = llg.LLTokenizer(llg.TokenizerWrapper(Bytes()), n_vocab=257)
    lark, _, member, _ = CASES[case]
    rng = random.Random(case)
    for _ in range(12):
        text = member(rng)
        ours = compiled[case].matcher()
        theirs = llg.LLMatcher(tok, llg.grammar_from("lark", lark), log_level=0)
        for b in text.encode():
            assert ours.commit_bytes(bytes([b])) and theirs.consume_token(b)
            assert sorted((n, d) for n, _, _, d in ours.captures()) == sorted(theirs.get_captures()), text


def test_captures_inside_nested_lark_grammars():
    art = gramc.compile('start: "<" sub ">"\nsub: %lark {\nstart: r "!"\nr[capture="inner"]: /[a-z]+/\n}\n',
                        format="lark", vocab="gpt2", lazy=True)
    m = art.matcher()
    assert m.commit_bytes(b"<ab") and m.captures() == []
    assert m.commit_bytes(b"!") and m.captures() == [("inner", 1, 3, b"ab")]


def test_a_capture_grammar_too_large_to_write_lists_its_captures_as_unsupported():
    from gramc.compiler.captures import MAX_CAPTURE_SYMBOLS, capture_grammar
    from gramc.compiler.ir import Grammar, Ref, literal, repeat
    from gramc.runtime.captures import CaptureGrammar

    body = repeat(literal(b"ab"), 0, MAX_CAPTURE_SYMBOLS)
    doc = capture_grammar(Grammar({"s": Ref("r"), "r": body}, "s", captures={"r": "x"}))
    assert doc["names"] == [] and "too large" in doc["unsupported"]["x"]
    small = capture_grammar(Grammar({"s": Ref("r"), "r": repeat(literal(b"ab"), 1, 3)}, "s", captures={"r": "x"}))
    parser = CaptureGrammar(small)
    text = list(b"abab")
    assert parser.captures(text, range(5), b"abab", final=True) == [("x", 0, 4, b"abab")]
    assert parser.captures(text, range(5), b"abab", final=False) == []  # a third "ab" may follow


def test_structural_tags_report_the_captures_of_embedded_lark_grammars():
    """XGrammar's structural tags name no captures themselves; a ``grammar`` format in Lark
    may, and its captures are reported in the whole output's positions."""
    grammar = ('start: name ">" args\nname[capture]: /[a-z_]+/\n'
               'args[capture="arguments"]: %json {"type": "object", "properties": {"x": {"type": "integer"}}}\n')
    doc = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<call="], "tags": [
        {"type": "tag", "begin": "<call=", "content": {"type": "grammar", "syntax": "lark", "grammar": grammar},
         "end": "</call>"}]}}
    art = gramc.compile(json.dumps(doc), format="structural_tag", vocab="gpt2", lazy=True)
    m = art.matcher()
    assert m.commit_bytes(b"hi <call=get_x") and m.captures() == []
    assert m.commit_bytes(b'>{"x": 12}</call> and <call=f>{}</call>')
    assert m.captures() == [("name", 9, 14, b"get_x"), ("arguments", 15, 24, b'{"x": 12}'),
                            ("name", 42, 43, b"f"), ("arguments", 44, 46, b"{}")]


def test_a_left_recursive_capture_reports_every_nested_match():
    """Nested captures that start at the same byte are each reported (none is skipped)."""
    art = gramc.compile('start: a "!"\na[capture]: a "x" | "x"\n', format="lark", vocab="gpt2", lazy=True)
    m = art.matcher()
    nested = [("a", 0, 1, b"x"), ("a", 0, 2, b"xx"), ("a", 0, 3, b"xxx")]
    # every parse of "xxx" holds a over 0..3: the whole, or the inner match of "xxxx..."
    assert m.commit_bytes(b"xxx") and m.captures() == nested
    assert m.commit_bytes(b"x!") and m.captures() == nested + [("a", 0, 4, b"xxxx")]


@pytest.mark.parametrize("case", ["delimited", "nested"])
def test_final_captures_agree_with_xgrammar(case, compiled):
    """XGrammar (PyPI) reports each captured rule's latest completion as it goes; on complete
    outputs of grammars where no parse is abandoned and no capture ends the output, that is
    gramc's final list. (Elsewhere XGrammar differs by design, docs/grammars/lark.md.)"""
    xgr = pytest.importorskip("xgrammar")
    info = xgr.TokenizerInfo([bytes([i]) for i in range(256)] + [b"</s>"], xgr.VocabType.RAW,
                             vocab_size=257, stop_token_ids=[256])
    lark, _, member, _ = CASES[case]
    compiled_x = xgr.GrammarCompiler(info, cache_enabled=False).compile_lark(lark)
    rng = random.Random(case)
    for _ in range(12):
        text = member(rng)
        ours, theirs = compiled[case].matcher(), xgr.GrammarMatcher(compiled_x)
        assert ours.commit_bytes(text.encode()) and all(theirs.accept_token(b) for b in text.encode())
        assert sorted((n, d) for n, _, _, d in ours.captures(final=True)) == sorted(theirs.get_captures()), text


def test_captures_survive_save_and_load(tmp_path):
    """The capture grammar travels in the artifact's metadata; a loaded PDA artifact reads
    token bytes from what it stores."""
    art = gramc.compile('start: "[" a "]"\na[capture]: "x" | "[" a "]"\n', format="lark", vocab="gpt2")
    assert art.kind == "pda"
    art.save(tmp_path / "a.gmask")
    m = gramc.load(tmp_path / "a.gmask").matcher()
    vocab = gramc.load_vocab("gpt2")
    assert m.commit_tokens([vocab.tokens.index(t) for t in (b"[[", b"x", b"]]")]) == 3
    assert m.captures() == [("a", 1, 4, b"[x]"), ("a", 2, 3, b"x")]
