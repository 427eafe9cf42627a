"""The GBNF frontend (gramc.compiler.frontends.gbnf): llama.cpp's grammars and test vectors,
languages checked with the independent Earley recogniser, error positions, IR snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from earley import EarleyOracle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paths import SHARED
from gramc.compiler.frontends.gbnf import parse_gbnf
from gramc.compiler.ir import Grammar, Ref, Token, TokenName, format_grammar, walk
from gramc.errors import (
    GramcError,
    GrammarSyntaxError,
    LimitExceededError,
    UnsupportedFeatureError,
)
from gramc.limits import Limits

CORPORA = SHARED / "corpora"
GBNF_DIR = CORPORA / "gbnf"
VECTORS = CORPORA / "gbnf-vectors.dev.jsonl"

#: Vectors whose grammar uses llama.cpp's negated token references (!<[id]>): gramc refuses
#: them with UnsupportedFeatureError (see docs/grammars/gbnf.md).
NEGATED_TOKEN_VECTORS = {
    "llamacpp-integration/test_complex_grammar/2-complex-grammar-with-tokens",
}


def _corpus_files() -> list[Path]:
    return sorted(GBNF_DIR.glob("*.gbnf")) if GBNF_DIR.is_dir() else []


def _vectors() -> list[dict]:
    if not VECTORS.is_file():
        return []
    return [json.loads(line) for line in VECTORS.read_text(encoding="utf-8").splitlines() if line.strip()]


def _needs(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"shared corpus not found: {path}")


def _oracle_input(item) -> bytes | list:
    """A vector item (a string, or a list of text segments and {"token": id}) as oracle input."""
    if isinstance(item, str):
        return item.encode("utf-8")
    out: list = []
    for part in item:
        if isinstance(part, str):
            out.extend(part.encode("utf-8"))
        else:
            out.append(("token", part["token"]))
    return out


def _load(name: str) -> Grammar:
    path = GBNF_DIR / name
    _needs(path)
    return parse_gbnf(path.read_text(encoding="utf-8"), str(path))


# ---------------------------------------------------------------- llama.cpp example grammars


@pytest.mark.parametrize("path", _corpus_files(), ids=lambda p: p.name)
def test_corpus_grammar_parses(path: Path):
    g = parse_gbnf(path.read_text(encoding="utf-8"), str(path))
    assert g.start == "root"
    refs = {n.name for body in g.rules.values() for n in walk(body) if isinstance(n, Ref)}
    assert refs <= set(g.rules)


def test_corpus_present_or_skipped():
    _needs(GBNF_DIR)
    assert len(_corpus_files()) == 8


LANGUAGES = {
    "json.gbnf": (
        ['{"a": [1, 2.5e3, "x\\u0041"]}', "{}", '{"k": {"n": null, "t": true}}', '{"s": "\\n"}'],
        ['{"a" 1}', '{"a": 01x}', "[1, 2]", '{"a": "\\q"}', '{"a": "\x01"}'],
    ),
    "json_arr.gbnf": (['[\n{"a": 1},\n2]', "[\n]"], ["[1]", '{"a": 1}']),
    "arithmetic.gbnf": (["1+2=3\n", "x = 4\n(a*b)=c\n"], ["1+2\n", "=3\n", "1+=2\n"]),
    "list.gbnf": (["- a\n", "- one\n- two\n"], ["", "- a", "* a\n", "- \u2028\n"]),
    "chess.gbnf": (["1. e4 e5\n2. Nf3 Nc6\n", "1. Nf3 d5\n2. O-O Bxf4+\n"],
                   ["1. e4 e5\n", "2. e4 e5\n3. a3 a6\n", "1. e9 e5\n2. a3 a6\n"]),
    "japanese.gbnf": (["こんにちは", "カタカナ 日本語"], ["hello", "こんにちは ", ""]),
    "english.gbnf": (["Hello, world!", "a b\tc"], ["", "a  b", "é"]),
    "c.gbnf": (["int main(){return 0;}", "float f(int x){x = x+1;}"], ["int main()", "int 1x(){}"]),
}


@pytest.mark.parametrize("name", sorted(LANGUAGES))
def test_corpus_language(name: str):
    oracle = EarleyOracle(_load(name))
    passing, failing = LANGUAGES[name]
    for s in passing:
        assert oracle.fullmatch(s.encode()), s
    for s in failing:
        assert not oracle.fullmatch(s.encode()), s


def test_japanese_classes_are_utf8():
    g = _load("japanese.gbnf")
    oracle = EarleyOracle(Grammar({**g.rules, "one": Ref("jp-char")}, "one"))
    assert oracle.fullmatch("ぁ".encode()) and oracle.fullmatch("鿿".encode())
    assert not oracle.fullmatch("ぁ".encode()[:2])
    assert oracle.is_viable_prefix("ぁ".encode()[:2])


# ---------------------------------------------------------------- llama.cpp test vectors


@pytest.mark.parametrize("rec", _vectors(), ids=lambda r: r["id"])
def test_vector(rec: dict):
    root = rec.get("root", "root")
    if rec["id"] in NEGATED_TOKEN_VECTORS:
        with pytest.raises(UnsupportedFeatureError) as err:
            parse_gbnf(rec["grammar"], start=root)
        assert err.value.feature == "negated token reference"
        return
    if rec.get("expect_build_error"):
        with pytest.raises((GrammarSyntaxError, UnsupportedFeatureError)) as err:
            parse_gbnf(rec["grammar"], start=root)
        if rec.get("error_contains"):
            words = [w for w in str(rec["error_contains"]).lower().split() if len(w) > 3]
            assert not words or any(w in str(err.value).lower() for w in words)
        return
    oracle = EarleyOracle(parse_gbnf(rec["grammar"], start=root))
    for item in rec["passing"]:
        assert oracle.fullmatch(_oracle_input(item)), item
    for item in rec["failing"]:
        assert not oracle.fullmatch(_oracle_input(item)), item


def test_vectors_present_or_skipped():
    _needs(VECTORS)
    ids = {r["id"] for r in _vectors()}
    assert NEGATED_TOKEN_VECTORS <= ids


def test_negated_token_vector_rest_of_language():
    """The token-level vector without its negated references: the positive tokens work."""
    g = parse_gbnf('root ::= <[10]> [a-z ]* <[11]> content\ncontent ::= <[20]> "x"? <[21]>')
    oracle = EarleyOracle(g)
    assert oracle.fullmatch([("token", 10), *b"think", ("token", 11), ("token", 20), ("token", 21)])
    assert not oracle.fullmatch([("token", 10), ("token", 11), ("token", 20)])


# ---------------------------------------------------------------- features


def _accepts(text: str, passing: list, failing: list) -> None:
    oracle = EarleyOracle(parse_gbnf(text))
    for s in passing:
        assert oracle.fullmatch(s.encode() if isinstance(s, str) else s), s
    for s in failing:
        assert not oracle.fullmatch(s.encode() if isinstance(s, str) else s), s


def test_escapes_in_strings_and_classes():
    _accepts(r'root ::= "\x41\u00e9\U0001F600\n\t\r\\\"\[\]"', ['Aé😀\n\t\r\\"[]'], ["A"])
    _accepts(r'root ::= [\x30-\x32\]\[\\-]+', ["01]2[\\-"], ["3", "a"])


def test_code_point_escapes_are_utf8():
    # \xNN is a code point in llama.cpp, so \xe9 is U+00E9 (two UTF-8 bytes), not byte E9.
    _accepts(r'root ::= "\xe9"', ["é"], [b"\xe9"])


def test_negated_class_and_dot_range_over_code_points():
    _accepts("root ::= [^a]", ["b", "é", "😀"], ["a", "", b"\xff", "bb"])
    _accepts("root ::= . .", ["ab", "é😀"], ["a", b"\xc3"])
    _accepts("root ::= []", [], ["", "a"])


def test_repetition_forms():
    _accepts('root ::= "a"{2}', ["aa"], ["a", "aaa"])
    _accepts('root ::= "a"{2,}', ["aa", "aaaa"], ["a"])
    _accepts('root ::= "a"{ 1 , 2 }', ["a", "aa"], ["", "aaa"])
    _accepts('root ::= "a"{,2}', ["", "a", "aa"], ["aaa"])
    _accepts('root ::= ("a" "b"?)+', ["a", "ab", "aab"], ["b", ""])


def test_empty_alternatives_are_allowed():
    _accepts('root ::= "x" ws\nws ::= | " "', ["x", "x "], ["x  "])
    _accepts('root ::= ("a" | )"b"', ["ab", "b"], ["a"])


def test_rules_span_lines_and_comments():
    text = 'root ::= "a" # comment | "z"\n   "b"\n  | "c" # another\nother ::= "d"'
    _accepts(text, ["ab", "c"], ["a", "z", "d"])


def test_special_tokens():
    g = parse_gbnf('root ::= <[128009]> <|eot_id|> <think> "x"')
    nodes = list(walk(g.rules["root"]))
    assert Token(128009) in nodes and TokenName("<|eot_id|>") in nodes and TokenName("<think>") in nodes
    _accepts('root ::= "a" <[5]>', [[97, ("token", 5)]], [[97], [97, ("token", 6)]])


def test_start_rule_option_and_order():
    g = parse_gbnf('a ::= "x"\nb ::= a a', start="b")
    assert g.start == "b" and list(g.rules) == ["a", "b"]


def test_unreachable_rules_are_kept_but_must_be_defined():
    g = parse_gbnf('root ::= "a"\nunused ::= "b"')
    assert set(g.rules) == {"root", "unused"}
    with pytest.raises(GrammarSyntaxError, match="undefined rule 'missing'"):
        parse_gbnf('root ::= "a"\nunused ::= missing')


def test_right_recursion_is_fine():
    _accepts('root ::= "(" root ")" | ""', ["", "(())"], ["(()"])


def test_indirect_left_recursion_through_nullable_prefix():
    with pytest.raises(UnsupportedFeatureError) as err:
        parse_gbnf('root ::= a\na ::= b "x"\nb ::= e a | "y"\ne ::= "" | "q"')
    assert err.value.feature == "left recursion"
    assert "a -> b -> a" in str(err.value)


def test_limits():
    deep = "root ::= " + "(" * 30 + '"a"' + ")" * 30
    assert parse_gbnf(deep)
    with pytest.raises(LimitExceededError) as err:
        parse_gbnf(deep, limits=Limits(max_nesting=20))
    assert err.value.limit == "max_nesting"
    with pytest.raises(LimitExceededError) as err:
        parse_gbnf('root ::= "a"{1,100001}')
    assert err.value.limit == "max_repeat"


def test_default_nesting_limit_is_an_error_not_a_crash():
    text = "root ::= " + '("a" (' * 600 + '"b"' + "))" * 600
    with pytest.raises(LimitExceededError):
        parse_gbnf(text)
    ok = "root ::= " + '("a" (' * 240 + '"b"' + "))" * 240
    assert parse_gbnf(ok)


# ---------------------------------------------------------------- errors

ERRORS = [
    ('root ::= "abc', GrammarSyntaxError, 1, 10, "unterminated string"),
    ("root ::= [a-z", GrammarSyntaxError, 1, 10, "unterminated character class"),
    ('root "a"', GrammarSyntaxError, 1, 6, "expected '::='"),
    ('root ::= "\\q"', GrammarSyntaxError, 1, 11, "unknown escape"),
    ('root ::= "\\x4"', GrammarSyntaxError, 1, 11, "2 hex digits"),
    ('root ::= ("a" | "b"', GrammarSyntaxError, 1, 10, "unclosed '('"),
    ('root ::= "a")', GrammarSyntaxError, 1, 13, "unbalanced ')'"),
    ('root ::= "a"{3,2}', GrammarSyntaxError, 1, 13, "minimum exceeds the maximum"),
    ('root ::= "a"{x}', GrammarSyntaxError, 1, 14, "repetition bounds"),
    ("root ::= *", GrammarSyntaxError, 1, 10, "nothing to repeat"),
    ("root ::= foo", GrammarSyntaxError, 1, 10, "undefined rule 'foo'"),
    ('root ::= "a"\nroot ::= "b"', GrammarSyntaxError, 2, 1, "defined twice"),
    ('rot ::= "a"', GrammarSyntaxError, 1, 1, "no 'root' rule"),
    ('root ::= a_b\na_b ::= "x"', GrammarSyntaxError, 1, 11, "'_' is not allowed"),
    ("root ::= !<[3]>", UnsupportedFeatureError, 1, 10, "any single token except"),
    ('root ::= "x"\n  !<|end|>', UnsupportedFeatureError, 2, 3, "any single token except"),
    ("root ::= <[abc]>", GrammarSyntaxError, 1, 10, "malformed token reference"),
    ("root ::= <eot", GrammarSyntaxError, 1, 10, "unterminated token reference"),
    ("root ::= [z-a]", GrammarSyntaxError, 1, 11, "reversed range"),
    ('root ::= "a" ; "b"', GrammarSyntaxError, 1, 14, "unexpected character ';'"),
    ('::= "a"', GrammarSyntaxError, 1, 1, "must follow a rule name"),
    ('root ::= "\\U00110000"', GrammarSyntaxError, 1, 11, "beyond U+10FFFF"),
    ('root ::= "\\uD800"', GrammarSyntaxError, 1, 11, "surrogate"),
    ('root ::= ("a"\nx ::= "b")', GrammarSyntaxError, 1, 10, "unclosed '('"),
    ('root ::= "a" |\n  | "b" (\n', GrammarSyntaxError, 2, 9, "unclosed '('"),
    ('root ::= a\na ::= a "x" | "y"', UnsupportedFeatureError, 2, 1, "left-recursive (a -> a)"),
    ('root ::= "a" }', GrammarSyntaxError, 1, 14, "unexpected character '}'"),
    ("", GrammarSyntaxError, 1, 1, "defines no rules"),
]


@pytest.mark.parametrize("text,cls,line,col,words", ERRORS, ids=[e[0] for e in ERRORS])
def test_error_position(text: str, cls: type, line: int, col: int, words: str):
    with pytest.raises(GramcError) as err:
        parse_gbnf(text, "g.gbnf")
    e = err.value
    assert type(e) is cls
    assert (e.span.line, e.span.col) == (line, col)
    assert e.span.source_name == "g.gbnf"
    assert "\n" not in str(e) and words in str(e)
    assert str(e).startswith(f"g.gbnf:{line}:{col}: ")


CHARS = st.sampled_from(['root', ' ', '::=', '"a"', '"', '[a-z]', '[', ']', '(', ')', '{2,3}', '{',
                         '}', '|', '*', '+', '?', '\n', 'x', '<[1]>', '<', '>', '!', '\\', '\\x4',
                         '#', '.', 'é', '-', '_', ',', '0'])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(CHARS, max_size=16).map("".join))
def test_fuzz_never_crashes(text: str):
    for candidate in (text, "root ::= " + text):
        try:
            parse_gbnf(candidate)
        except GramcError as e:
            assert "\n" not in str(e)


# ---------------------------------------------------------------- IR snapshots

SNAPSHOTS = [
    ('root ::= "a" [b-d]* | "e"{2,3}', 'root ::= "a" [b-d]* | "e"{2,3}\n'),
    ('root ::= item ("," item)*\nitem ::= [0-9]+ | "-"', 'root ::= item ("," item)*\nitem ::= [0-9]+ | "-"\n'),
    ('root ::= [^\\x00-\\x7f]', ('root ::= [\\xc2-\\xdf] [\\x80-\\xbf] | "\\xe0" [\\xa0-\\xbf] [\\x80-\\xbf]'
     ' | [\\xe1-\\xec\\xee\\xef] [\\x80-\\xbf] [\\x80-\\xbf] | "\\xed" [\\x80-\\x9f] [\\x80-\\xbf]'
     ' | "\\xf0" [\\x90-\\xbf] [\\x80-\\xbf] [\\x80-\\xbf] | [\\xf1-\\xf3] [\\x80-\\xbf] [\\x80-\\xbf]'
     ' [\\x80-\\xbf] | "\\xf4" [\\x80-\\x8f] [\\x80-\\xbf] [\\x80-\\xbf]\n')),
    ('root ::= "é" <[2]> ("" | "x")?', 'root ::= "\\xc3\\xa9" <[2]> ("" | "x")?\n'),
    ('ws ::= | " " | "\\n"\nroot ::= "{" ws "}"', 'root ::= "{" ws "}"\nws ::= "" | [\\n ]\n'),
]


@pytest.mark.parametrize("text,expected", SNAPSHOTS, ids=[s[0] for s in SNAPSHOTS])
def test_ir_snapshot(text: str, expected: str):
    assert format_grammar(parse_gbnf(text)) == expected
