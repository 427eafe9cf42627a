"""The Lark frontend (gramc.compiler.frontends.lark, lark_terminals, lark_regex).

Languages are checked with the independent Earley oracle (tests/earley.py); a differential
test compares the oracle on gramc's IR with lark's own Earley parser on the same grammars.
"""

from __future__ import annotations

import json
import random
import re
import warnings
from pathlib import Path

import lark
import pytest
from earley import EarleyOracle

from paths import SHARED
from gramc.compiler.frontends.lark import IGNORE_RULE, START_RULE, parse_lark
from gramc.compiler.frontends.lark_terminals import (
    is_prefix_free,
    restrict_edge,
    shortest_matches,
)
from gramc.compiler.ir import (
    EMPTY,
    Alt,
    Bytes,
    Ref,
    Repeat,
    Seq,
    Token,
    TokenName,
    byte_class,
    format_grammar,
    repeat,
    seq,
    text,
    walk,
)
from gramc.errors import (
    GramcError,
    GramcWarning,
    GrammarSyntaxError,
    LimitExceededError,
    SchemaError,
    UnsupportedFeatureError,
)
from gramc.limits import Limits

CORPUS = SHARED / "corpora" / "lark-vectors.dev.jsonl"
LARK_GRAMMARS = Path(lark.__file__).parent / "grammars"


def matcher(g):
    """Whole-string membership: the Earley oracle, or (for a regular grammar whose repeats
    make the oracle's BNF huge) the DFA backend."""
    oracle = EarleyOracle(g)
    if max((len(rhs) for _lhs, rhs in oracle.prods), default=0) > 60 and not g.is_recursive():
        from gramc.compiler.dfa import build_dfa

        dfa = build_dfa(g)
        return lambda data: bool(dfa.accept[dfa.step_bytes(dfa.start, data)])
    return oracle.fullmatch


def lang(grammar: str, **kw):
    match = matcher(parse_lark(grammar, **kw))
    return lambda s: match(s.encode("utf-8") if isinstance(s, str) else s)


# ---------------------------------------------------------------- languages

CASES = [
    # (grammar, accepted, rejected)
    ('start: "a" "b" | "c"', ["ab", "c"], ["", "a", "abc"]),
    ('start: "a" |', ["", "a"], ["aa"]),
    ('start: "" "a" ""', ["a"], ["", "aa"]),  # "" is the empty string (lark refuses it)
    ('start: "Ab-9"i', ["ab-9", "AB-9", "aB-9"], ["ab_9", "äb-9"]),
    ('start: "é"i', ["é"], ["É"]),  # only ASCII letters fold
    ('start: "a".."c" "α".."γ"', ["aβ", "cγ"], ["dα", "aδ"]),
    ('start: "\\x41\\u00e9\\n"', ["Aé\n"], ["A\\u00e9"]),
    ('start: ["a"] "b"? "c"~2 "d"~1..2', ["ccd", "abccd", "ccdd"], ["cccd", "abcd"]),
    ("start: /a.b/", ["acb", "a\rb", "a\u2028b", "a😀b"], ["a\nb", "ab"]),
    ("start: /a.b/s", ["a\nb", "a\rb"], ["ab"]),
    ("start: /a b  # spaces and comments are ignored\n c/x", ["abc"], ["a b c"]),
    ("start: /^ab$/m", ["ab"], ["ab\n"]),
    ("start: /(?i)ab/ /(?s)./", ["AB\n", "aBx"], ["AB"]),
    ("start: /\\d+/", ["12", "١٢", "٣"], ["x", ""]),
    ("start: /\\w+/", ["é_1", "Ωx"], ["a-b", "!"]),
    ("start: /(?a)\\w+/", ["a_1"], ["é"]),
    ("start: /\\s/", [" ", "\x85", "\u3000", "\x1c"], ["\ufeff", "a"]),
    ("start: /[^\\W\\d]\\w*/", ["é1", "_"], ["1a"]),
    ("start: /[]a]+/", ["]a]"], ["b"]),
    ("start: /\\N{GREEK SMALL LETTER ALPHA}/", ["α"], ["a"]),
    ("start: /[ab]{2,3}?c/", ["abc", "abac"], ["ac", "ababc"]),
    ('start: x+\nx.2: "a" -> alias\n?y: "b"\n!z: "c"\n_w: "d"', ["a", "aaa"], ["", "b"]),
    ('start: _sep{A, ","}\n_sep{x, sep}: x (sep x)*\nA: "a"', ["a", "a,a,a"], ["", "a,", ",a"]),
    ('start: l{"a"}\nl{x}: x | l{x} "," x', ["a", "a,a"], ["a,"]),
    ('start: A\nA: B+ C\nB: "b"\nC: B "c" | "d"', ["bbc", "bd", "bbbd"], ["bc", "d"]),
    ('start: A\nA.3: "x"~2 | "y"\n%override A: "z"', ["z"], ["xx", "y"]),
    ('start: "a"\n%extend start: "b"', ["a", "b"], ["ab"]),
    (
        "%import common.INT -> NUM\n%import common (WORD, WS_INLINE)\nstart: WORD NUM\n%ignore WS_INLINE",
        ["abc12", "abc 12", " abc\t12 "],
        ["abc", "12abc", "ab c12"],
    ),
    # %ignore: before, between and after tokens, never inside one
    ('%ignore " "\nstart: "ab" "c"', ["abc", " ab  c ", "  "[:0] + "ab c"], ["a bc", " "]),
    ('%ignore /[ _]+/\n%ignore "#"\nstart: "a"*', ["", " ", "a_a#a #", "_"], ["b"]),
    ('%ignore WS\n%import common.WS\nstart: WS? "x"', ["x", " x", "  x "], [""]),
    # lark's ESCAPED_STRING and C_COMMENT mean what they mean to lark's lexer
    (
        "%import common.ESCAPED_STRING\nstart: ESCAPED_STRING",
        ['""', '"a\\"b"', '"a\\\\"', '"é\\é"'],
        ['"a"b"', '"a\\"', '"\n"', '"a\\\\"b"'],
    ),
    (
        "%import common.C_COMMENT\nstart: C_COMMENT",
        ["/**/", "/* a * b / */", "/***/"],
        ["/* */ */", "/*/"],
    ),
    ('start: /".*?"/ "x"', ['""x', '"ab"x'], ['"a"b"x']),
    ('start: /(ab|a)*?c/ "c"', ["abcc", "cc"], ["c"]),  # not a prefix code: stays greedy
    # lookarounds over one character, honoured where they look inside the terminal
    ("start: /a(?!b)[a-z]/", ["ac", "aa"], ["ab"]),
    ("start: /(?![q])[a-z]+/", ["ab", "aq"], ["qa"]),
    ("start: A\nA: /[ab]+/ /(?<!a);/", ["ab;", "b;"], ["a;", "ba;"]),
    ("start: /[+*]|[?](?![a-z])/", ["+", "?"], ["?a"]),
    ("start: /a(?=[bc])[a-z]/", ["ab", "ac"], ["ad"]),
]


@pytest.mark.parametrize("grammar,accepted,rejected", CASES, ids=range(len(CASES)))
def test_language(grammar, accepted, rejected):
    accepts = lang(grammar)
    assert [s for s in accepted if not accepts(s)] == []
    assert [s for s in rejected if accepts(s)] == []


def test_special_tokens():
    g = parse_lark('start: "a" <|end|> | <[5]> | <[7-8,10]>')
    assert TokenName("<|end|>") in set(walk(g.rules["start"]))
    accepts = EarleyOracle(g).fullmatch
    assert accepts([ord("a"), ("token", 0)]) is False
    for tok in (5, 7, 8, 10):
        assert accepts([("token", tok)])
    assert not accepts([("token", 9)]) and not accepts(b"<[5]>")
    # not taken for special tokens inside strings, regexes and comments
    g = parse_lark('start: "<|x|>" /<\\[1\\]>/ // <|y|>\n# <[2]>')
    assert not any(isinstance(n, (Token, TokenName)) for n in walk(g.rules["start"]))


def test_empty_terminal_warns():
    with pytest.warns(GramcWarning, match="matches nothing"):
        accepts = lang("start: /a(?=b)c/")  # Python: c can never be b
    assert not accepts("ac") and not accepts("abc")


def test_start_option_and_import_paths(tmp_path):
    (tmp_path / "mine.lark").write_text('WORD: "w"\nexpr: WORD "!"\n')
    g = parse_lark(
        "%import mine (expr)\nitem: expr expr", start="item", import_paths=[str(tmp_path)]
    )
    assert g.start == "item" and matcher(g)(b"w!w!")
    relative = tmp_path / "main.lark"
    relative.write_text("%import .mine.WORD\nstart: WORD")
    assert matcher(parse_lark(relative.read_text(), str(relative)))(b"w")


def test_template_expansion_is_bounded(monkeypatch):
    monkeypatch.setattr("gramc.compiler.frontends.lark.MAX_TEMPLATE_INSTANCES", 50)
    with pytest.raises(LimitExceededError, match="template"):
        parse_lark('start: t{"a"}\nt{x}: x | t{t{x}}')


# ---------------------------------------------------------------- IR snapshots

SNAPSHOTS = [
    (
        'start: "a" b? | c~2\nb: /[0-9]+/\nc: "x"i',
        'start ::= "a" b? | c{2}\nb ::= [0-9]+\nc ::= [Xx]\n',
    ),
    (
        '%ignore " "\nstart: A "=" A\nA: "a".."c"',
        (
            '__start ::= __ignore start\nstart ::= A __ignore "=" __ignore A __ignore\n'
            '__ignore ::= __IGNORE_0*\n__IGNORE_0 ::= " "\nA ::= [a-c]\n'
        ),
    ),
    (
        '?start: _pair{"a", B} -> pair | item\n_pair{x, y}: x y\n!item.2: "i"\nB: "b"',
        'start ::= _pair{"a",B} | item\nB ::= "b"\n_pair{"a",B} ::= "a" B\nitem ::= "i"\n',
    ),
    ('start: "hi" <|end|> | <[7-9]>', 'start ::= "hi" <|end|> | <[7]> | <[8]> | <[9]>\n'),
    ("start: /\\/(?!\\/)[a-z]*\\//", 'start ::= "/" [a-z] [a-z]* "/"\n'),
    ('C: "<" /[a-z<>]*?/ ">"\nstart: C', 'start ::= C\nC ::= "<" [<a-z]* ">"\n'),
    ("start: /(?i)x[a-c]{1,2}/", "start ::= [Xx] [A-Ca-c]{1,2}\n"),
]


@pytest.mark.parametrize("grammar,expected", SNAPSHOTS, ids=range(len(SNAPSHOTS)))
def test_ir_snapshot(grammar, expected):
    assert format_grammar(parse_lark(grammar)) == expected


def test_ignore_structure():
    g = parse_lark('%ignore " "\nstart: "a"')
    assert g.start == START_RULE and g.rules[START_RULE] == seq(Ref(IGNORE_RULE), Ref("start"))
    assert parse_lark('start: "a"').start == "start"


# ---------------------------------------------------------------- IR helpers


def test_restrict_edge_and_prefix_codes():
    digits = byte_class(b"0123456789")
    e = seq(repeat(text("-"), 0, 1), repeat(digits, 1, None))
    first = restrict_edge(e, 1 << ord("-"), first=True)
    assert str(first) == '"-" [0-9]+'
    last = restrict_edge(seq(text("a"), repeat(text("b"), 0, None)), 1 << ord("a"), first=False)
    assert str(last) == '"a"'
    assert is_prefix_free(text("ab")) and is_prefix_free(seq(text("a"), digits))
    assert not is_prefix_free(repeat(text("a"), 1, 2))
    assert shortest_matches(repeat(text("a"), 1, None)) == text("a")


# ---------------------------------------------------------------- regex literals vs Python re

_ATOMS = ["a", "b", ".", "[ab]", "[^a]", "\\s", "\\w", "\\d", "é"]
_LOOKS = ["(?!", "(?=", "(?<!", "(?<="]


def _random_regex(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth > 2 or r < 0.35:
        return rng.choice(_ATOMS)
    if r < 0.5:
        return _random_regex(rng, depth + 1) + _random_regex(rng, depth + 1)
    if r < 0.6:
        return f"(?:{_random_regex(rng, depth + 1)}|{_random_regex(rng, depth + 1)})"
    if r < 0.75:
        return f"(?:{_random_regex(rng, depth + 1)}){rng.choice(['*', '+', '?', '{1,2}'])}"
    if r < 0.9:
        return rng.choice(_LOOKS) + rng.choice(["a", "b", "[ab]", "\\n"]) + ")"
    return _random_regex(rng, depth + 1) + "|" + _random_regex(rng, depth + 1)


def _strings(alphabet: str, n: int) -> list[str]:
    return [""] + [s + c for s in _strings(alphabet, n - 1) for c in alphabet] if n else [""]


@pytest.mark.filterwarnings("ignore::gramc.errors.GramcWarning")
def test_regex_terminals_match_python_fullmatch():
    """Without lazy quantifiers a terminal is exactly what re.fullmatch accepts (lookarounds
    included), or it is refused."""
    rng = random.Random(11)
    strings = sorted(set(_strings("ab\né1", 3)))
    checked = 0
    for _ in range(50):
        pattern, flags = _random_regex(rng), rng.choice(["", "s", "i"])
        try:
            accepts = EarleyOracle(parse_lark(f"start: /{pattern}/{flags}")).fullmatch
        except UnsupportedFeatureError:
            continue
        py = re.compile(
            pattern, (re.DOTALL if "s" in flags else 0) | (re.IGNORECASE if "i" in flags else 0)
        )
        wrong = [s for s in strings if bool(py.fullmatch(s)) != accepts(s.encode())]
        assert wrong == [], (pattern, flags)
        checked += 1
    assert checked > 30


def _python_tokens(pattern: str, strings: list[str], continuations: list[str]) -> set[str]:
    """The strings re.match returns as a whole for some continuation (lexer tokens)."""
    rx = re.compile(pattern, re.DOTALL)
    return {
        s
        for s in strings
        if any((m := rx.match(s + c)) and m.end() == len(s) for c in continuations)
    }


@pytest.mark.parametrize(
    "pattern,exact",
    [
        ('".*?"', True),
        ("<!--.*?-->", True),
        ("a.*?bc", True),
        ('"(?:[^\\\\]|\\\\.)*?"', True),
        ("a+?", True),
        ("(?:ab)*?c", True),
        ("a.*?b+", False),
        ("(?:a|ab)*?b", False),
    ],
)
def test_lazy_terminals_follow_python(pattern, exact):
    strings = _strings('ab"c<!->', 4) if "<" in pattern else _strings('ab"c\\', 5)
    continuations = _strings("abc", 2)
    want = _python_tokens(pattern, strings, continuations)
    accepts = EarleyOracle(parse_lark(f"start: /{pattern}/s")).fullmatch
    mine = {s for s in strings if accepts(s.encode())}
    assert want <= mine  # never forbids a token Python's lexer produces
    assert (mine == want) is exact


def test_lazy_random_patterns_never_forbid_python_tokens():
    rng = random.Random(5)
    atoms = ["a", "b", ".", "[ab]", "[^a]", "ab", "(?:a|b)", "(?:ab|c)", "(?:a|ab)"]
    strings, continuations = _strings("abc", 4), _strings("abc", 2)
    for _ in range(30):
        parts = [rng.choice(atoms) for _ in range(rng.randint(0, 1))]
        parts.append(f"(?:{rng.choice(atoms)}){rng.choice(['*?', '+?', '??', '{1,2}?'])}")
        pattern = "".join(parts + [rng.choice(atoms) for _ in range(rng.randint(0, 2))])
        accepts = EarleyOracle(parse_lark(f"start: /{pattern}/s")).fullmatch
        missing = _python_tokens(pattern, strings, continuations) - {
            s for s in strings if accepts(s.encode())
        }
        assert missing == set(), pattern


# ---------------------------------------------------------------- errors

ERRORS = [
    # (grammar, error class, line, col)
    ("start: (\n", GrammarSyntaxError, 1, 9),
    ('start: "abc\n', GrammarSyntaxError, 1, 8),
    ('start: "a" "b\n', GrammarSyntaxError, 1, 12),
    ("start: a\na: ->\n", GrammarSyntaxError, 2, 6),
    ('start: foo\nbar: "b"\n', GrammarSyntaxError, 1, 8),
    ('start: "a"\nstart: "b"\n', GrammarSyntaxError, 2, 1),
    ('start: A\nA: "a" | B\nB: "b" A\n', GrammarSyntaxError, 2, 1),
    ('start: A\nA: b\nb: "x"\n', GrammarSyntaxError, 2, 4),
    ('start: A\nA: "a" -> b\n', GrammarSyntaxError, 2, 1),
    ("start: A\nA:\n", GrammarSyntaxError, 2, 1),
    ('start: "a"~3..2\n', GrammarSyntaxError, 1, 12),
    ('start: "d".."a"\n', GrammarSyntaxError, 1, 8),
    ('start: "ab".."c"\n', GrammarSyntaxError, 1, 8),
    ('start: "\\xZZ"\n', GrammarSyntaxError, 1, 8),
    ("start: /[abc/\n", GrammarSyntaxError, 1, 8),
    ('Start: "a"\n', GrammarSyntaxError, 1, 2),
    ('start: x{"a"}\nx{p,q}: p q\n', GrammarSyntaxError, 1, 8),
    ("%import common.NOPE\nstart: NOPE\n", GrammarSyntaxError, 1, 16),
    ("%import nosuch.X\nstart: X\n", GrammarSyntaxError, 1, 1),
    ("start: <[5-2]>\n", GrammarSyntaxError, 1, 8),
    ('x: "a"\n', GrammarSyntaxError, 1, 1),
    ('start: x\nx: "a"\n%declare Y\n', UnsupportedFeatureError, 3, 1),
    ('start: "x"\n  | /(?<=b)a/\n', UnsupportedFeatureError, 2, 5),
    ("start: /a(?!bc)/\n", UnsupportedFeatureError, 1, 8),
    ("start: /a\\b/\n", UnsupportedFeatureError, 1, 8),
    ("start: /(a)\\1/\n", UnsupportedFeatureError, 1, 8),
    ("start: /a/l\n", UnsupportedFeatureError, 1, 8),
    ('start: "a" %json {\n', GrammarSyntaxError, 1, 12),
    ('start: "a" %json {"type": ]}\n', GrammarSyntaxError, 1, 27),
    ('start: "a"{3,2}\n', GrammarSyntaxError, 1, 11),
    ('start: "a"{2,3} b\nb[max_tokens=3]: "b"\n', UnsupportedFeatureError, 2, 1),
    ('start: "a" b\nb[stop=""]: "b"\n', UnsupportedFeatureError, 2, 1),
    ('start: "a"\nfoo[bogus]: "b"\n', GrammarSyntaxError, 2, 5),
    ('start: a\na: "a" & "b"\n', UnsupportedFeatureError, 2, 8),
    ('%llguidance {"bogus": 1}\nstart: "a"\n', UnsupportedFeatureError, 1, 1),
    ('start: "a" %regex {"substring": "x"}\n', GrammarSyntaxError, 1, 12),
    ('start: A\nA: "a" & (\n', GrammarSyntaxError, 2, 10),
    ("start: <[*]>\n", UnsupportedFeatureError, 1, 8),
]


@pytest.mark.parametrize("grammar,cls,line,col", ERRORS, ids=range(len(ERRORS)))
def test_error_positions(grammar, cls, line, col):
    with pytest.raises(cls) as info:
        parse_lark(grammar, source_name="g.lark")
    err = info.value
    assert (err.span.line, err.span.col, err.span.source_name) == (line, col, "g.lark")
    assert "Traceback" not in str(err) and "\n" not in err.reason
    assert err.__suppress_context__ or err.__cause__ is None


def test_limits():
    with pytest.raises(LimitExceededError, match="max_repeat"):
        parse_lark('start: "a"~1000000')
    with pytest.raises(LimitExceededError, match="max_repeat"):
        parse_lark("start: /a{2,5}/", limits=Limits(max_repeat=3))


# ---------------------------------------------------------------- lark's own grammars


def test_python_lark_is_refused_for_declare():
    text = (LARK_GRAMMARS / "python.lark").read_text()
    with pytest.raises(UnsupportedFeatureError) as info:
        parse_lark(text, "python.lark", start="file_input")
    assert info.value.feature == "%declare" and "_INDENT _DEDENT" in str(info.value)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if s.startswith("%declare"))
    assert info.value.span.line == line


@pytest.mark.parametrize("name", ["common", "unicode"])
def test_terminal_libraries_lower(name):
    text = (LARK_GRAMMARS / f"{name}.lark").read_text()
    terms = re.findall(r"^([A-Z_][A-Z0-9_]*)\s*:", text, re.MULTILINE)
    imports = "\n".join(f"%import {name}.{t} -> T{i}" for i, t in enumerate(terms))
    g = parse_lark(imports + "\nstart: " + " | ".join(f"T{i}" for i in range(len(terms))))
    assert len(terms) >= 2 and all(f"T{i}" in g.rules for i in range(len(terms)))


LARK_SAMPLES = [
    'start: "a"\n',
    'start: a b\na: "x"i\nb: /[0-9]+/ // comment\n',
    '?expr: term ("+" term)*\n!term: NUMBER | "(" expr ")"\n%import common.NUMBER\n%ignore " "\n',
    '_sep{x, sep}: x (sep x)*\nlist: "[" _sep{item, ","} "]"\nitem: WORD -> word\n',
    'A.2: /a(?!b)/i | "q".."z"\nb: A~2..3 [A]\n%declare C\n',
]


def test_lark_lark_accepts_lark_grammars():
    accepts = lang((LARK_GRAMMARS / "lark.lark").read_text(), source_name="lark.lark")
    for sample in LARK_SAMPLES + [
        (LARK_GRAMMARS / n).read_text() for n in ("lark.lark", "unicode.lark")
    ]:
        assert accepts(sample), sample
    for bad in ["start: (\n", "a: b??\n", 'A.B: "x"\n', 'a: "x" ->\n', "a: /x\n"]:
        assert not accepts(bad), bad


# ---------------------------------------------------------------- the corpus

REFUSED = {  # records using dialect extensions gramc does not implement
}

_JSON_ESCAPES = "llguidance's %json refuses \\u escapes of characters that need none; gramc's JSON does not"
DIFFERENT = {  # id -> (why, the strings on which gramc's verdict differs)
    "xgrammar/test_lark/test_lark_core_languages/37": (
        "xgrammar ignores the lookahead in /a(?=b)c/; under Python re no string matches",
        {"ac", "AC"},
    ),
    "xgrammar/test_lark/test_lark_multiple_ignore_declarations/1": (
        "xgrammar does not skip %ignore'd text before the first token; Lark and gramc do",
        {" // initial\na b"},
    ),
    "xgrammar/test_lark/test_lark_ignore_inline_regex/1": (
        "xgrammar does not skip %ignore'd text before the first token; Lark and gramc do",
        {"_ab"},
    ),
    "llguidance/test_lark/test_json_general_unicode_escapes_are_opt_in/1": (
        _JSON_ESCAPES, {'"\\u00e9"'}),
    "llguidance/test_lark/test_json_general_unicode_escapes_do_not_change_regex_constraints/1": (
        _JSON_ESCAPES, {'"\\u00e9"', '"\\uD83D\\uDE00"'}),
    "llguidance/test_lark/test_json_general_unicode_escapes_do_not_change_regex_constraints/2": (
        _JSON_ESCAPES, {'"\\u00e9"'}),
}
#: compile-only records where gramc's verdict differs: id -> why
BUILD_DIFFERENT = {
    "llguidance/test_lark/test_lark_syntax_general/32": "<[*]> needs the vocabulary size: refused",
    "llguidance/test_lark/test_lark_syntax_perc/4": "gramc compiles the schema {\"if\": {}} (valid JSON Schema)",
    "llguidance/test_lark/test_lark_syntax_attributes/3": 'stop="" (EOS as the stop) is refused',
}


def _records():
    if not CORPUS.exists():
        return []
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


RECORDS = _records()


@pytest.mark.skipif(not RECORDS, reason=f"shared corpus not found: {CORPUS}")
@pytest.mark.parametrize("rec", RECORDS, ids=[r["id"] for r in RECORDS])
def test_corpus_vector(rec):
    refused = rec["id"] in REFUSED or bool(rec.get("expect_build_error"))
    if (rec["id"] in BUILD_DIFFERENT) != refused:
        with pytest.raises((GrammarSyntaxError, UnsupportedFeatureError, SchemaError)):
            parse_lark(rec["grammar"])
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GramcWarning)
        g = parse_lark(rec["grammar"])
    accepts = matcher(g)
    wrong = {s for s in rec["passing"] if not accepts(s.encode())}
    wrong |= {s for s in rec["failing"] if accepts(s.encode())}
    assert wrong == DIFFERENT.get(rec["id"], ("", set()))[1]
    # llguidance rejected these only at the end of input: they must still be viable prefixes
    viable = EarleyOracle(g).is_viable_prefix
    assert all(viable(s.encode()) for s in rec.get("failing_prefix_ok") or [])


@pytest.mark.skipif(not RECORDS, reason="shared corpus not found")
def test_corpus_lists_are_current():
    ids = {r["id"] for r in RECORDS}
    assert set(REFUSED) <= ids and set(DIFFERENT) <= ids and set(BUILD_DIFFERENT) <= ids
    assert not set(REFUSED) & {r["id"] for r in RECORDS if r.get("expect_build_error")}


# ---------------------------------------------------------------- differential vs lark

DIFF_GRAMMARS = {
    "arith": (
        (
            '?start: sum\n?sum: product | sum "+" product | sum "-" product\n'
            '?product: atom | product "*" atom\n?atom: NUMBER | "(" sum ")"\n'
            'NUMBER: /[0-9]+/\n%ignore " "\n'
        ),
        "12+-*() ",
    ),
    "list": (
        (
            'start: "[" [_sep{item, ","}] "]"\n_sep{x, s}: x (s x)*\nitem: WORD | start\n'
            "WORD: /[a-c]+/\n"
        ),
        "[],abc",
    ),
    "strings": (
        '%import common.ESCAPED_STRING\nstart: ESCAPED_STRING ("," ESCAPED_STRING)*\n',
        '"a\\,',
    ),
    "repeat": ('start: ("ab"~2..3 | "c"?) "d"\n', "abcd"),
    "keyword": ('start: "if"i NAME\nNAME: ("a".."c")+\n%ignore " "\n', "iIfFabc "),
    "comments": ('%import common.C_COMMENT\n%ignore C_COMMENT\n%ignore " "\nstart: "x"+\n', "x/* "),
    "lookahead": ('start: (WORD | " ")*\nWORD: /(?!q)[a-z]+/\n', "abq "),
    "lookbehind": ('start: ITEM+\nITEM: /[ab]+(?<!a)/ ";"\n', "ab;"),
    "lazy": ("start: /<.*?>/+\n", "<>ab"),
    "nested": ('start: pair\n?pair: "(" pair? ")" pair? | "x"\n', "()x"),
    "numbers": (
        (
            "%import common (WS, SIGNED_NUMBER)\n%ignore WS\n"
            'start: SIGNED_NUMBER ("," SIGNED_NUMBER)*\n'
        ),
        "1.-e, \n",
    ),
    "unicode": ('start: /\\w+/ ("." /\\d+/)? /./s?\n', "aé٣1._\n\r"),
    "munch": ("start: A B\nA: /a+/\nB: /a/\n", "ab"),
}


class _TooDeep(Exception):
    pass


def _sample(g, rng: random.Random, alphabet: set[int], depth_limit: int = 10) -> str:
    """A random string of the IR grammar's language, preferring bytes of ``alphabet``."""

    def gen(e, depth):
        if isinstance(e, Bytes):
            values = e.byte_values()
            preferred = [b for b in values if b in alphabet]
            return bytes([rng.choice(preferred if preferred and rng.random() < 0.9 else values)])
        if isinstance(e, Seq):
            return b"".join(gen(i, depth) for i in e.items)
        if isinstance(e, Alt):
            return gen(rng.choice(e.items), depth)
        if isinstance(e, Repeat):
            hi = e.min + 2 if e.max is None else min(e.max, e.min + 2)
            return b"".join(gen(e.item, depth) for _ in range(rng.randint(e.min, hi)))
        if isinstance(e, Ref) and depth < depth_limit:
            return gen(g.rules[e.name], depth + 1)
        if e is EMPTY:
            return b""
        raise _TooDeep

    for _ in range(50):
        try:
            return gen(g.rules[g.start], 0).decode("utf-8")
        except _TooDeep:
            pass
    return ""


def _mutate(s: str, rng: random.Random, alphabet: str) -> str:
    i = rng.randint(0, len(s))
    return [
        s[:i] + rng.choice(alphabet) + s[i:],
        s[:i] + s[i + 1 :],
        s[:i] + rng.choice(alphabet) + s[i + 1 :],
    ][rng.randrange(3)]


def _lark_accepts(parser: lark.Lark, s: str) -> bool:
    try:
        parser.parse(s)
        return True
    except lark.exceptions.LarkError:
        return False


@pytest.mark.parametrize("lexer", ["dynamic_complete", "dynamic"])
@pytest.mark.parametrize("name", sorted(DIFF_GRAMMARS))
def test_differential_against_lark_earley(name, lexer):
    grammar, alphabet = DIFF_GRAMMARS[name]
    parser = lark.Lark(grammar, parser="earley", lexer=lexer)
    g = parse_lark(grammar)
    accepts = EarleyOracle(g).fullmatch
    rng = random.Random(f"{name}-{lexer}")
    strings = {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))) for _ in range(60)}
    for _ in range(80):
        s = _sample(g, rng, set(alphabet.encode()))
        strings |= {s, _mutate(s, rng, alphabet), _mutate(_mutate(s, rng, alphabet), rng, alphabet)}
    disagree = {s for s in strings if _lark_accepts(parser, s) != accepts(s.encode())}
    if name == "munch" and lexer == "dynamic":
        # lark's dynamic lexer matches each terminal greedily: A takes every "a", so it
        # rejects "aa"; gramc (like lexer="dynamic_complete") lets A stop anywhere
        assert disagree and all(set(s) == {"a"} and accepts(s.encode()) for s in disagree)
    else:
        assert disagree == set()
    assert sum(accepts(s.encode()) for s in strings) >= 4  # the test saw the language


def test_maximal_munch_difference_with_lark_lalr():
    grammar = "start: A B\nA: /a+/\nB: /a/\n"
    assert lang(grammar)("aa")
    with pytest.raises(lark.exceptions.UnexpectedInput):
        lark.Lark(grammar, parser="lalr").parse("aa")


def test_errors_are_gramc_errors_for_garbage():
    rng = random.Random(3)
    pieces = [
        "start",
        ":",
        '"a"',
        "/b/",
        "|",
        "(",
        ")",
        "[",
        "]",
        "~",
        "2",
        "..",
        "%ignore",
        "%import",
        "common.WS",
        "A",
        "->",
        "\n",
        "?",
        "*",
        "{",
        "}",
        ",",
        "<|x|>",
        "<[1]>",
    ]
    for _ in range(300):
        text = " ".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        try:
            parse_lark(text)
        except GramcError:
            pass
