"""The EBNF frontend (gramc.compiler.frontends.ebnf): W3C, ISO 14977 and GBNF-like (XGrammar)
notations, exceptions as language differences, XGrammar macros, dialect detection, error
positions, IR snapshots, and differential tests across GBNF / W3C / ISO renderings."""

from __future__ import annotations

import itertools
import json

import pytest
from earley import EarleyOracle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import fullmatch

from paths import SHARED
from gramc.compiler.frontends.ebnf import EBNF_DIALECTS, detect_dialect, parse_ebnf
from gramc.compiler.frontends.gbnf import parse_gbnf
from gramc.compiler.ir import (
    EMPTY,
    Alt,
    Expr,
    Grammar,
    Ref,
    Repeat,
    Seq,
    Token,
    alt,
    byte_class,
    format_grammar,
    literal,
    repeat,
    seq,
    walk,
)
from gramc.errors import (
    GramcError,
    GrammarSyntaxError,
    LimitExceededError,
    UnsupportedFeatureError,
)

VECTORS = SHARED / "corpora" / "ebnf-vectors.dev.jsonl"

#: Corpus vectors gramc refuses, with the UnsupportedFeatureError feature (a substring) each gives.
REFUSED = {
    # TagDispatch: free text that dispatches to a rule after each tag (XGrammar-only).
    "xgrammar/test_grammar_matcher_macro/test_complex_rule/1": "TagDispatch",
    "xgrammar/test_grammar_matcher_macro/test_stop_str_no_loop/1": "TagDispatch",
    "xgrammar/test_grammar_matcher_macro/test_excluded_str/1": "TagDispatch",
    # Regex("a(?=b)c"): gramc's regex frontend refuses lookahead (XGrammar ignores it).
    "xgrammar/test_grammar_regex_macro/test_regex_macro_engine_features/13": "lookahead",
    # Rule attributes r[lazy] / s[max_chars=2] (XGrammar-only matching budgets).
    "xgrammar/test_grammar_substring_macro/test_substring_macro_lazy_rule/1": "rule attribute",
    "xgrammar/test_grammar_substring_macro/test_substring_macro_max_chars/1": "rule attribute",
}


def _vectors() -> list[dict]:
    if not VECTORS.is_file():
        return []
    recs = [json.loads(line) for line in VECTORS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in recs if r.get("format") == "ebnf"]


def inline(g: Grammar, name: str | None = None, memo: dict | None = None) -> Expr:
    """The start rule of a non-recursive grammar with every reference expanded."""
    memo = {} if memo is None else memo
    name = name or g.start
    if name not in memo:
        memo[name] = _expand(g.rules[name], g, memo)
    return memo[name]


def _expand(e: Expr, g: Grammar, memo: dict) -> Expr:
    if isinstance(e, Ref):
        return inline(g, e.name, memo)
    if isinstance(e, Seq):
        return seq(*(_expand(i, g, memo) for i in e.items))
    if isinstance(e, Alt):
        return alt(*(_expand(i, g, memo) for i in e.items))
    if isinstance(e, Repeat):
        return repeat(_expand(e.item, g, memo), e.min, e.max)
    return e


def _big_repeat(g: Grammar) -> bool:
    return any(isinstance(n, Repeat) and max(n.min, n.max or 0) > 1000
               for body in g.rules.values() for n in walk(body))


def matcher(g: Grammar):
    """Earley for recursive grammars; derivatives (fast on huge counts) for the others."""
    if _big_repeat(g) and not g.is_recursive():
        expr = inline(g)
        return lambda data: fullmatch(expr, data)
    return EarleyOracle(g).fullmatch


def _check(text: str, passing, failing, **kw) -> Grammar:
    g = parse_ebnf(text, **kw)
    match = matcher(g)
    for s in passing:
        assert match(s.encode() if isinstance(s, str) else s), s
    for s in failing:
        assert not match(s.encode() if isinstance(s, str) else s), s
    return g


# ---------------------------------------------------------------- corpus vectors


@pytest.mark.parametrize("rec", _vectors(), ids=lambda r: r["id"])
def test_vector(rec: dict):
    if rec["id"] in REFUSED:
        with pytest.raises(UnsupportedFeatureError) as err:
            parse_ebnf(rec["grammar"])
        assert REFUSED[rec["id"]] in err.value.feature
        return
    _check(rec["grammar"], rec["passing"], rec["failing"])


def test_vectors_present_or_skipped():
    if not VECTORS.is_file():
        pytest.skip(f"shared corpus not found: {VECTORS}")
    assert set(REFUSED) <= {r["id"] for r in _vectors()}


# ---------------------------------------------------------------- W3C (XML specification)

XML_SPEC = """\
/* Productions from the XML 1.0 specification (fifth edition), section 2 */
[2]   Char          ::= #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
[3]   S             ::= (#x20 | #x9 | #xD | #xA)+
[4]   NameStartChar ::= ":" | [A-Z] | "_" | [a-z] | [#xC0-#xD6] | [#xD8-#xF6] | [#xF8-#x2FF]
                      | [#x370-#x37D] | [#x37F-#x1FFF] | [#x200C-#x200D] | [#x2070-#x218F]
                      | [#x2C00-#x2FEF] | [#x3001-#xD7FF] | [#xF900-#xFDCF] | [#xFDF0-#xFFFD]
                      | [#x10000-#xEFFFF]
[4a]  NameChar      ::= NameStartChar | "-" | "." | [0-9] | #xB7 | [#x0300-#x036F] | [#x203F-#x2040]
[5]   Name          ::= NameStartChar (NameChar)*
[14]  CharData      ::= [^<&]* - ([^<&]* ']]>' [^<&]*)
[15]  Comment       ::= '<!--' ((Char - '-') | ('-' (Char - '-')))* '-->'
[16]  PI            ::= '<?' PITarget (S (Char* - (Char* '?>' Char*)))? '?>'
[17]  PITarget      ::= Name - (('X' | 'x') ('M' | 'm') ('L' | 'l'))
[24]  VersionInfo   ::= S 'version' Eq ("'" VersionNum "'" | '"' VersionNum '"')
[25]  Eq            ::= S? '=' S?
[26]  VersionNum    ::= '1.' [0-9]+
[32]  SDDecl        ::= S 'standalone' Eq (("'" ('yes' | 'no') "'") | ('"' ('yes' | 'no') '"'))
                        [ VC: Standalone Document Declaration ]
"""

XML_LANGUAGES = {
    "Char": (["a", "\t", "é", "\U0010FFFF"], ["\x00", "\x0b", "ab", "\ufffe"]),
    "Name": (["xml", "a-b.c", ":x", "été", "a\u00b7"], ["", "-a", "1a", "a b"]),
    "CharData": (["abc", "a]]b", "]]", ""], ["a]]>b", "a<b", "&"]),
    "Comment": (["<!-- hi -->", "<!---->", "<!-- a - b -->"], ["<!-- a -- b -->", "<!-- a --->"]),
    "PI": (["<?php echo 1 ?>", "<?XmLfoo?>", "<?t?>"], ["<?xml version?>", "<?php a ?> b ?>", "<? x?>"]),
    "VersionInfo": ([" version='1.0'", ' version = "1.10"'], [" version='1.0\"", "version='1.0'"]),
    "SDDecl": ([" standalone='yes'", ' standalone="no"'], [" standalone='maybe'"]),
}


@pytest.mark.parametrize("start", sorted(XML_LANGUAGES))
def test_xml_spec_productions(start: str):
    passing, failing = XML_LANGUAGES[start]
    _check(XML_SPEC, passing, failing, start=start)


def test_xml_spec_is_detected_and_starts_at_first_rule():
    assert detect_dialect(XML_SPEC) == "w3c"
    assert parse_ebnf(XML_SPEC).start == "Char"


def test_w3c_strings_have_no_escapes_and_classes_take_hex():
    _check(r"""a ::= "\n" '"' [#x41-#x43\] #x263A""", ['\\n"B☺', '\\n"\\☺'], ['\n"B☺', '\\n"]☺'],
           dialect="w3c")
    _check("a ::= [^#x0-#x61] [-'()+,./:=?;!*#@$_%]", ["b#", "é-"], ["a#", "b~"], dialect="w3c")


def test_w3c_root_rule_wins_over_first():
    assert parse_ebnf("a ::= 'x'\nroot ::= a a", dialect="w3c").start == "root"


# ---------------------------------------------------------------- ISO 14977

ISO_PROGRAM = """\
(* A small program syntax, in the style of ISO/IEC 14977 (* comments nest *) *)
program = 'PROGRAM', white space, identifier, white space,
          'BEGIN', white space,
          { assignment, ";", white space },
          'END.' ;
identifier = alphabetic character, { alphabetic character | digit } ;
number = [ "-" ], digit, { digit } ;
string = '"', { all characters - '"' }, '"' ;
assignment = identifier, ":=", ( number | identifier | string ) ;
alphabetic character = "A" | "B" | "C" | "D" | "E" | "F" | "G" | "H" | "I" | "J" | "K" | "L"
                     | "M" | "N" | "O" | "P" | "Q" | "R" | "S" | "T" | "U" | "V" | "W" | "X"
                     | "Y" | "Z" ;
digit = "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" ;
white space = " ", { " " } .
all characters = alphabetic character | digit | " " | '"' ;
"""


def test_iso_program():
    g = _check(ISO_PROGRAM, ["PROGRAM DEMO BEGIN A:=3; B:=-45; C:=\"HI 2\"; END.", "PROGRAM X BEGIN END."],
               ["PROGRAM DEMO BEGIN A:=3 END.", "PROGRAM 1X BEGIN END.", 'PROGRAM X BEGIN A:=""";END.'])
    assert g.start == "program"
    assert "alphabetic_character" in g.rules and "white_space" in g.rules


def test_iso_repetition_count_option_and_group():
    _check("code = 3 * digit, [ '-', 2 * digit ] ; digit = '0' | '1' ;", ["101", "101-11"],
           ["10", "101-1", "101-"])
    _check("x = { 'a' | 'b' }, ( 'c' ) ;", ["c", "abac"], ["ab", "ca"])
    _check("x = 'a' | ;", ["a", ""], ["aa"])


def test_iso_exception():
    _check("x = letter - vowel ; letter = 'a' | 'b' | 'e' ; vowel = 'a' | 'e' ;", ["b"], ["a", "e"])


# ---------------------------------------------------------------- exceptions (A - B)


def test_exception_is_a_language_difference():
    _check("a ::= [a-z]+ - 'xml'", ["abc", "xm", "xmlx", "x"], ["xml", ""], dialect="w3c")
    _check("a ::= [a-c] - 'a' - 'b'", ["c"], ["a", "b"], dialect="w3c")
    _check("a ::= 'a'* - ('a' 'a')*", ["a", "aaa"], ["", "aa", "aaaa"], dialect="w3c")


def test_exception_binds_tighter_than_concatenation():
    _check("x ::= 'a' [bc] - 'b' 'd'", ["acd"], ["abd", "ab"], dialect="w3c")
    _check("x ::= 'a' - 'b'* 'c'", ["ac"], ["a", "bc"], dialect="w3c")


def test_exception_through_rules_and_other_exceptions():
    text = "a ::= b - 'x'\nb ::= c - 'y'\nc ::= [w-z]"
    _check(text, ["w", "z"], ["x", "y"], dialect="w3c")
    g = parse_ebnf("root ::= 'q' a\na ::= [ab] - 'a'", dialect="w3c")
    assert set(g.rules) == {"root", "a"}  # no placeholder rule survives
    assert all(not n.name.startswith("\x00") for b in g.rules.values() for n in walk(b) if isinstance(n, Ref))


def test_exception_empty_result():
    g = _check("a ::= 'a' - 'a'", [], ["a", ""], dialect="w3c")
    assert str(g.rules["a"]) == "[]"


def test_exception_of_recursive_rules_is_refused():
    with pytest.raises(UnsupportedFeatureError) as err:
        parse_ebnf("a ::= b - 'x'\nb ::= '(' b ')' | 'y'", dialect="w3c")
    assert err.value.feature == "exception of a recursive rule"
    assert (err.value.span.line, err.value.span.col) == (1, 9)
    with pytest.raises(UnsupportedFeatureError):
        parse_ebnf("a ::= (a - 'x') | 'y'", dialect="w3c")


def test_recursion_outside_exceptions_is_fine():
    _check("e ::= '(' e ')' | n\nn ::= [0-9] - '0'", ["(1)", "((9))"], ["0", "(0)"], dialect="w3c")


# ---------------------------------------------------------------- GBNF-like (XGrammar)


def test_gbnf_like_escapes_and_class_sets():
    _check(r'root ::= "\x41\'\e" [\d\-]+ [^\s]', ["A'\x1b1-x"], ["A'\x1b1- "], dialect="gbnf-like")


def test_gbnf_like_allows_left_recursion_and_underscores():
    _check("root ::= root_1 | root 'x'\nroot_1 ::= [a]".replace("'", '"'), ["a", "axx"], ["x"],
           dialect="gbnf-like")


def test_regex_macro_flags():
    _check('root ::= Regex("a.b")', ["a\nb", "a.b", "aéb"], ["ab"])
    _check('root ::= Regex("a.b", flags="")', ["acb"], ["a\nb"])
    _check('root ::= Regex("a[.]b", flags="s")', ["a.b"], ["acb"])
    _check('root ::= Regex("a\\\\.b|x", flags="is")', ["A.B", "X"], ["acb"])


def test_regex_macro_json_string():
    _check('root ::= Regex("[^x]+", json_string=true)', ["ab", "你好"], ['a"b', "a\\b", "a\nb"])
    _check('root ::= Regex("[^x]+", json_string=false)', ['a"b', "a\nb"], ["x"])


@pytest.mark.parametrize("chunks", [["a", "b", "a", "b", "b"], ["ab", "a", "b", "ba"], ["ab", "abc"],
                                    ["a", "", "a", ""], ["你好", "世界"]])
def test_substring_macro_language(chunks: list[str]):
    expected = {"".join(chunks[i:j]) for i in range(len(chunks) + 1) for j in range(i, len(chunks) + 1)}
    g = parse_ebnf("root ::= Substring(" + ", ".join(f'"{c}"' for c in chunks) + ")")
    match = EarleyOracle(g).fullmatch
    alphabet = sorted(set("".join(chunks)))
    for n in range(len("".join(chunks)) + 1):
        for cand in map("".join, itertools.product(alphabet, repeat=n)):
            assert match(cand.encode()) == (cand in expected), cand


def test_token_macro_and_special_tokens():
    g = parse_ebnf('root ::= Token(3, 1) "x" <[7]>')
    assert {Token(1), Token(3), Token(7)} <= set(walk(g.rules["root"]))


def test_rule_names_with_macro_like_prefixes_are_references():
    _check('root ::= Regexp ("a")\nRegexp ::= "r"', ["ra"], ["a"])


# ---------------------------------------------------------------- dialect detection


@pytest.mark.parametrize("text,dialect", [
    ("a = 'x' ;", "iso"),
    ("(* c *) digit excluding zero = '1' | '2' ;", "iso"),
    ("a ::= #x41", "w3c"),
    ("a ::= 'x' /* c */", "w3c"),
    ("a ::= b - c\nb ::= 'x'", "w3c"),
    ('root ::= "a"{2}', "gbnf-like"),
    ('root ::= "a" # comment', "gbnf-like"),
    ('root ::= Regex("[a-z]+")', "gbnf-like"),
    ('root ::= "a"', "gbnf-like"),
    ('start ::= "a"', "w3c"),
])
def test_detect_dialect(text: str, dialect: str):
    assert detect_dialect(text) == dialect


def test_auto_errors_name_the_detected_dialect():
    with pytest.raises(GrammarSyntaxError, match="read as ISO 14977"):
        parse_ebnf("a = 'x'")
    with pytest.raises(ValueError, match="unknown EBNF dialect"):
        parse_ebnf("a ::= 'x'", dialect="lark")


# ---------------------------------------------------------------- errors

ERRORS = {
    "w3c": [
        ("a ::= 'abc", GrammarSyntaxError, 1, 7, "unterminated string"),
        ('a ::= "abc\n"', GrammarSyntaxError, 1, 7, "unterminated string"),
        ("a ::= [a-z", GrammarSyntaxError, 1, 7, "unterminated character class"),
        ("a ::= #xZZ", GrammarSyntaxError, 1, 7, "needs hex digits"),
        ("a ::= #x110000", GrammarSyntaxError, 1, 7, "beyond U+10FFFF"),
        ("a ::= [z-a]", GrammarSyntaxError, 1, 8, "reversed range"),
        ("a ::= ('x' | 'y'", GrammarSyntaxError, 1, 7, "unclosed '('"),
        ("a ::= 'x')", GrammarSyntaxError, 1, 10, "unbalanced ')'"),
        ("a ::= b", GrammarSyntaxError, 1, 7, "undefined rule 'b'"),
        ("a ::= 'x'\na ::= 'y'", GrammarSyntaxError, 2, 1, "defined twice"),
        ("a ::= * 'x'", GrammarSyntaxError, 1, 7, "nothing to repeat"),
        ("a ::= 'x' -", GrammarSyntaxError, 1, 11, "'-' needs an item on its right"),
        ("a ::= - 'x'", GrammarSyntaxError, 1, 7, "'-' needs an item on its left"),
        ("a ::= 'x' /* never closed", GrammarSyntaxError, 1, 11, "unterminated comment"),
        ("a 'x'", GrammarSyntaxError, 1, 3, "expected '::='"),
        ("a ::= 'x' {2}", GrammarSyntaxError, 1, 11, "unexpected character '{'"),
        ("a ::= b - 'x'\nb ::= '(' b ')' | 'y'", UnsupportedFeatureError, 1, 9, "recursive"),
        ("a ::= (a - 'x') | 'y'", UnsupportedFeatureError, 1, 10, "recursion"),
        ("a ::= #", GrammarSyntaxError, 1, 7, "'#xN'"),
        ("", GrammarSyntaxError, 1, 1, "defines no rules"),
    ],
    "iso": [
        ("a = 'x'", GrammarSyntaxError, 1, 8, "needs a ';'"),
        ("a = 'x' b = 'y';", GrammarSyntaxError, 1, 9, "needs a ';'"),
        ("a = 'abc ;", GrammarSyntaxError, 1, 5, "unterminated string"),
        ("a = ('x' | 'y' ;", GrammarSyntaxError, 1, 5, "unclosed '('"),
        ("a = ['x' ;", GrammarSyntaxError, 1, 5, "unclosed '['"),
        ("a = {'x' ;", GrammarSyntaxError, 1, 5, "unclosed '{'"),
        ("a = 'x' ) ;", GrammarSyntaxError, 1, 9, "unbalanced ')'"),
        ("a = ('x'] ;", GrammarSyntaxError, 1, 9, "expected ')' to close '('"),
        ("a = 'x' , ;", GrammarSyntaxError, 1, 9, "',' needs an item on its right"),
        ("a = , 'x' ;", GrammarSyntaxError, 1, 5, "',' needs an item on its left"),
        ("a = 3 'x' ;", GrammarSyntaxError, 1, 7, "expected '*'"),
        ("a = 'x' * ;", GrammarSyntaxError, 1, 9, "must follow a repetition count"),
        ("a = ? special ? ;", UnsupportedFeatureError, 1, 5, "special sequences"),
        ("a = b ;", GrammarSyntaxError, 1, 5, "undefined rule 'b'"),
        ("a = 'x' ;\na = 'y' ;", GrammarSyntaxError, 2, 1, "defined twice"),
        ("a = 'x' (* open (* nested *) comment", GrammarSyntaxError, 1, 9, "unterminated comment"),
        ("a = 'x' - ;", GrammarSyntaxError, 1, 9, "'-' needs an item on its right"),
        ("a = 'x' ; ;", GrammarSyntaxError, 1, 11, "terminator without a rule"),
        ("= 'x' ;", GrammarSyntaxError, 1, 1, "must follow a rule name"),
        ("a = 'x' | 'y' ;\nb c = a , d ;", GrammarSyntaxError, 2, 11, "undefined rule 'd'"),
        ("a = 3 * ;", GrammarSyntaxError, 1, 5, "must be followed by an item"),
    ],
    "gbnf-like": [
        ('root ::= "abc', GrammarSyntaxError, 1, 10, "unterminated string"),
        ('root ::= "ab\nc"', GrammarSyntaxError, 1, 10, "unterminated string"),
        ("root ::= [a-z", GrammarSyntaxError, 1, 10, "unterminated character class"),
        ('root ::= "a" (= "b")', UnsupportedFeatureError, 1, 14, "lookahead"),
        ('r[lazy] ::= "a"\nroot ::= r', UnsupportedFeatureError, 1, 2, "r[lazy]"),
        ('root ::= TagDispatch(("a", b))\nb ::= "x"', UnsupportedFeatureError, 1, 10, "TagDispatch"),
        ('root ::= Regex("a", "b")', GrammarSyntaxError, 1, 10, "exactly one string"),
        ("root ::= Regex(abc)", GrammarSyntaxError, 1, 10, "exactly one string"),
        ('root ::= Regex("a", foo=true)', GrammarSyntaxError, 1, 25, "no argument 'foo'"),
        ('root ::= Regex("a", json_string="yes")', GrammarSyntaxError, 1, 33, "must be a boolean"),
        ('root ::= Regex("(?=a)b")', UnsupportedFeatureError, 1, 10, "lookahead"),
        ('root ::= "x"\n  | Regex("a(")', GrammarSyntaxError, 2, 5, "in Regex()"),
        ('root ::= Regex("a", flags="m")', UnsupportedFeatureError, 1, 10, "flag 'm'"),
        ('root ::= Substring("a", 1)', GrammarSyntaxError, 1, 10, "must be strings"),
        ("root ::= ExcludeToken(1)", UnsupportedFeatureError, 1, 10, "any single token except"),
        ("root ::= Token(-1)", GrammarSyntaxError, 1, 10, "non-negative"),
        ('root ::= "a"{3, 2}', GrammarSyntaxError, 1, 13, "minimum exceeds the maximum"),
        ('root ::= "\\q"', GrammarSyntaxError, 1, 11, "unknown escape"),
        ("root ::= foo", GrammarSyntaxError, 1, 10, "undefined rule 'foo'"),
        ('root ::= ("a"', GrammarSyntaxError, 1, 10, "unclosed '('"),
        ('root ::= Regex("a"', GrammarSyntaxError, 1, 19, "expected ',' or ')'"),
        ("root ::= !<[1]>", UnsupportedFeatureError, 1, 10, "any single token except"),
    ],
}
_ERROR_CASES = [(d, *case) for d, cases in ERRORS.items() for case in cases]


@pytest.mark.parametrize("dialect,text,cls,line,col,words", _ERROR_CASES,
                         ids=[f"{c[0]}:{c[1]}" for c in _ERROR_CASES])
def test_error_position(dialect: str, text: str, cls: type, line: int, col: int, words: str):
    with pytest.raises(GramcError) as err:
        parse_ebnf(text, "g.ebnf", dialect=dialect)
    e = err.value
    assert type(e) is cls
    assert (e.span.line, e.span.col) == (line, col)
    assert "\n" not in str(e) and words in str(e)
    assert str(e).startswith(f"g.ebnf:{line}:{col}: ")


def test_limits_are_enforced():
    with pytest.raises(LimitExceededError):
        parse_ebnf("a ::= " + "(" * 600 + "'x'" + ")" * 600, dialect="w3c")
    with pytest.raises(LimitExceededError):
        parse_ebnf("a = 100001 * 'x' ;")


PIECES = st.sampled_from(["a", " ", "::=", "=", ";", ".", '"a"', "'b'", '"', "'", "[a-z]", "[", "]",
                          "(", ")", "{", "}", "{2,3}", "|", "*", "+", "?", " - ", ",", "3", "#x41", "#",
                          "\n", "(*", "*)", "/*", "*/", "\\", "Regex(", "Substring(", "(=", "x[lazy]", "é"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PIECES, max_size=14).map("".join), st.sampled_from(("auto", *EBNF_DIALECTS)))
def test_fuzz_never_crashes(text: str, dialect: str):
    try:
        parse_ebnf(text, dialect=dialect)
    except GramcError as e:
        assert "\n" not in str(e)


# ---------------------------------------------------------------- IR snapshots

SNAPSHOTS = [
    ("a ::= 'x' b? | #x41+\nb ::= [#x30-#x39]", "w3c", 'a ::= "x" b? | "A"+\nb ::= [0-9]\n'),
    ("a ::= [a-c] - 'b'", "w3c", "a ::= [ac]\n"),
    ("digit = '0' | nonzero ;\nnonzero = 2 * '1', ['2'], {'3'} .", "iso",
     'digit ::= "0" | nonzero\nnonzero ::= "1"{2} "2"? "3"*\n'),
    ('root ::= r{2, 3} Regex("[0-9]+")\nr ::= "a" | ""', "gbnf-like", 'root ::= r{2,3} [0-9]+\nr ::= "a" | ""\n'),
    ('root ::= Substring("ab", "c")', "gbnf-like", 'root ::= ("ab" "c"? | "c")?\n'),
]


@pytest.mark.parametrize("text,dialect,expected", SNAPSHOTS, ids=[s[0] for s in SNAPSHOTS])
def test_ir_snapshot(text: str, dialect: str, expected: str):
    assert format_grammar(parse_ebnf(text, dialect=dialect)) == expected


# ---------------------------------------------------------------- differential: GBNF = W3C = ISO = IR

_Node = tuple


def _nodes(n_rules: int, k: int) -> st.SearchStrategy[_Node]:
    """Random expression trees for rule ``k``, referring only to later rules (no recursion)."""
    leaves = [st.tuples(st.just("lit"), st.text("ab", max_size=2)),
              st.tuples(st.just("cls"), st.sampled_from(["a", "b", "ab"]))]
    if k + 1 < n_rules:
        leaves.append(st.tuples(st.just("ref"), st.integers(k + 1, n_rules - 1)))
    bounds = st.sampled_from([(0, None), (1, None), (0, 1), (2, 2), (0, 2), (1, 3), (2, None)])
    return st.recursive(st.one_of(leaves), lambda kids: st.one_of(
        st.tuples(st.just("seq"), st.lists(kids, min_size=2, max_size=3)),
        st.tuples(st.just("alt"), st.lists(kids, min_size=2, max_size=3)),
        st.tuples(st.just("rep"), kids, bounds)), max_leaves=6)


@st.composite
def _grammars(draw) -> list[_Node]:
    n = draw(st.integers(1, 3))
    return [draw(_nodes(n, k)) for k in range(n)]


def _ir(node: _Node) -> Expr:
    kind = node[0]
    if kind == "lit":
        return literal(node[1].encode())
    if kind == "cls":
        return byte_class(node[1].encode())
    if kind == "ref":
        return Ref(f"r{node[1]}")
    if kind == "rep":
        return repeat(_ir(node[1]), *node[2])
    parts = [_ir(c) for c in node[1]]
    return seq(*parts) if kind == "seq" else alt(*parts)


def _gbnf(node: _Node) -> str:
    kind = node[0]
    if kind in ("lit", "cls"):
        return f'"{node[1]}"' if kind == "lit" else f"[{node[1]}]"
    if kind == "ref":
        return f"r{node[1]}"
    if kind == "rep":
        lo, hi = node[2]
        return f"({_gbnf(node[1])}){{{lo},{'' if hi is None else hi}}}"
    return "(" + (" " if kind == "seq" else " | ").join(map(_gbnf, node[1])) + ")"


def _w3c(node: _Node) -> str:
    kind = node[0]
    if kind in ("lit", "cls", "ref"):
        return f"'{node[1]}'" if kind == "lit" else _gbnf(node)
    if kind == "rep":
        (lo, hi), item = node[2], f"({_w3c(node[1])})"
        tail = f"{item}*" if hi is None else _nested_optionals(item, hi - lo, "({item} {rest})?", "{item}?")
        return "(" + (" ".join([item] * lo + ([tail] if tail else [])) or "''") + ")"
    return "(" + (" " if kind == "seq" else " | ").join(map(_w3c, node[1])) + ")"


def _nested_optionals(item: str, n: int, outer: str, inner: str) -> str:
    """``n`` optional copies of ``item``, each inside the previous one ("" when n is 0)."""
    if n == 0:
        return ""
    out = inner.format(item=item)
    for _ in range(n - 1):
        out = outer.format(item=item, rest=out)
    return out


def _iso(node: _Node) -> str:
    kind = node[0]
    if kind == "lit":
        return f"'{node[1]}'"
    if kind == "cls":
        return "(" + " | ".join(f"'{c}'" for c in node[1]) + ")"
    if kind == "ref":
        return f"r{node[1]}"
    if kind == "rep":
        (lo, hi), item = node[2], _iso(node[1])
        parts = [f"{lo} * {item}"] if lo else []
        tail = "{" + item + "}" if hi is None else _nested_optionals(item, hi - lo, "[{item}, {rest}]", "[{item}]")
        return "(" + (", ".join(parts + ([tail] if tail else [])) or "''") + ")"
    return "(" + (", " if kind == "seq" else " | ").join(map(_iso, node[1])) + ")"


_STRINGS = [b""] + [bytes(p) for n in range(1, 6) for p in itertools.product(b"ab", repeat=n)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_grammars())
def test_differential_renderings(rules: list[_Node]):
    reference = inline(Grammar({f"r{k}": _ir(r) for k, r in enumerate(rules)}, "r0"))
    texts = {
        "gbnf": "\n".join(f"r{k} ::= {_gbnf(r)}" for k, r in enumerate(rules)),
        "w3c": "\n".join(f"r{k} ::= {_w3c(r)}" for k, r in enumerate(rules)),
        "iso": "\n".join(f"r{k} = {_iso(r)} ;" for k, r in enumerate(rules)),
    }
    grammars = {
        "gbnf": parse_gbnf(texts["gbnf"], start="r0"),
        "w3c": parse_ebnf(texts["w3c"], dialect="w3c", start="r0"),
        "iso": parse_ebnf(texts["iso"], dialect="iso", start="r0"),
        "gbnf-like": parse_ebnf(texts["gbnf"], dialect="gbnf-like", start="r0"),
    }
    for name, g in grammars.items():
        expr = inline(g)
        for s in _STRINGS:
            assert fullmatch(expr, s) == fullmatch(reference, s), (name, texts, s)


def test_empty_literal_forms():
    assert inline(parse_ebnf("a ::= ''", dialect="w3c")) is EMPTY
    assert inline(parse_ebnf("a = '' ;")) is EMPTY
