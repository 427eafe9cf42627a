"""The regex frontend (gramc.compiler.frontends.regex) and UTF-8 lowering (gramc.compiler.unicode).

Reference semantics come from three independent places: the derivative oracle over the IR,
Python's ``re`` (differential tests on a sub-language where the dialects agree, including
ASCII-only ``(?i)``), and the ``regex`` package's partial matching (viable prefixes).
"""

from __future__ import annotations

import json
import re
import unicodedata

import pytest
import regex as regex_pkg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import derive, fullmatch, is_viable_prefix, nullable

from paths import SHARED
from gramc.compiler.frontends.regex import REGEX_DIALECTS, parse_regex
from gramc.compiler.ir import EMPTY, NOTHING, Expr, alt, byte_range, seq
from gramc.compiler.unicode import (
    ALL_CODEPOINTS,
    ECMA_SPACE,
    MAX_CODEPOINT,
    CodepointSet,
    codepoint_set_to_ir,
)
from gramc.errors import (
    GramcError,
    GrammarSyntaxError,
    LimitExceededError,
    UnsupportedFeatureError,
)
from gramc.limits import Limits

CORPUS = SHARED / "corpora" / "regex-vectors.dev.jsonl"
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------- helpers over IR languages


def _pairs_violating(a: Expr, b: Expr, bad) -> bool:
    """Explore derivative pairs of two finite-or-regular IRs; True when ``bad(da, db)`` ever holds."""
    seen, todo = set(), [(a, b)]
    while todo:
        pair = todo.pop()
        if pair in seen:
            continue
        seen.add(pair)
        if bad(*pair):
            return True
        if pair[0] is not NOTHING:
            todo.extend((derive(pair[0], c), derive(pair[1], c)) for c in range(256))
    return False


def equivalent(a: Expr, b: Expr) -> bool:
    return not _pairs_violating(
        a, b, lambda x, y: nullable(x) != nullable(y) or (x is NOTHING) != (y is NOTHING)
    )


def subset(a: Expr, b: Expr) -> bool:
    return not _pairs_violating(a, b, lambda x, y: nullable(x) and not nullable(y))


def count_strings(e: Expr, memo: dict | None = None) -> int:
    """How many byte strings a finite IR language holds."""
    memo = {} if memo is None else memo
    if e is NOTHING:
        return 0
    if e not in memo:
        memo[e] = int(nullable(e)) + sum(count_strings(derive(e, c), memo) for c in range(256))
    return memo[e]


def _seq_of(*ranges: tuple[int, int]) -> Expr:
    return seq(*(byte_range(lo, hi) for lo, hi in ranges))


# Unicode 15, Table 3-7 "Well-Formed UTF-8 Byte Sequences", written out independently.
WELL_FORMED_UTF8 = alt(
    _seq_of((0x00, 0x7F)),
    _seq_of((0xC2, 0xDF), (0x80, 0xBF)),
    _seq_of((0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)),
    _seq_of((0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)),
    _seq_of((0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)),
    _seq_of((0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)),
    _seq_of((0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    _seq_of((0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    _seq_of((0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)),
)

# ---------------------------------------------------------------- unicode.py

BOUNDARIES = [
    0,
    0x7F,
    0x80,
    0x7FF,
    0x800,
    0xFFF,
    0x1000,
    0xD7FF,
    0xE000,
    0xFFFF,
    0x10000,
    0x3FFFF,
    0x40000,
    0x10FFFF,
]
SURROGATES = range(0xD800, 0xE000)
codepoints = st.one_of(
    st.sampled_from(BOUNDARIES),
    st.sampled_from(BOUNDARIES).flatmap(
        lambda b: st.integers(max(0, b - 3), min(MAX_CODEPOINT, b + 3))
    ),
    st.integers(0, 0x7FF),
    st.integers(0, MAX_CODEPOINT),
).filter(lambda cp: cp not in SURROGATES)
range_sets = st.lists(st.tuples(codepoints, codepoints).map(sorted).map(tuple), max_size=6)


def _in_ranges(cp: int, ranges) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


@FAST
@given(range_sets, st.lists(codepoints, max_size=30))
def test_codepoint_set_membership_matches_utf8(ranges, probes):
    ir = codepoint_set_to_ir(ranges)
    probes += [
        cp for lo, hi in ranges for cp in (lo - 1, lo, hi, hi + 1) if 0 <= cp <= MAX_CODEPOINT
    ]
    for cp in probes:
        if cp not in SURROGATES:
            assert fullmatch(ir, chr(cp).encode()) == _in_ranges(cp, ranges), hex(cp)


@FAST
@given(range_sets)
def test_codepoint_set_accepts_only_well_formed_utf8(ranges):
    ir = codepoint_set_to_ir(ranges)
    assert subset(ir, WELL_FORMED_UTF8)
    expected = len(CodepointSet(ranges))
    if expected < 5000:  # counting walks every derivative; keep it cheap
        assert count_strings(ir) == expected


@FAST
@given(range_sets, st.binary(min_size=1, max_size=4))
def test_codepoint_set_random_bytes(ranges, data):
    ir = codepoint_set_to_ir(ranges)
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        text = None
    expected = (
        text is not None
        and len(text) == 1
        and _in_ranges(ord(text), ranges)
        and ord(text) not in SURROGATES
    )
    assert fullmatch(ir, data) == expected


def test_full_set_is_exactly_well_formed_utf8():
    assert equivalent(ALL_CODEPOINTS.to_ir(), WELL_FORMED_UTF8)
    assert equivalent(codepoint_set_to_ir([(0, MAX_CODEPOINT)]), WELL_FORMED_UTF8)


@pytest.mark.parametrize(
    "data",
    [
        b"\xc0\x80",
        b"\xc1\xbf",
        b"\xe0\x80\x80",
        b"\xe0\x9f\xbf",
        b"\xf0\x80\x80\x80",
        b"\xf0\x8f\xbf\xbf",
        b"\xed\xa0\x80",
        b"\xed\xbf\xbf",
        "\ud800".encode("utf-8", "surrogatepass"),
        b"\xf4\x90\x80\x80",
        b"\xf5\x80\x80\x80",
        b"\xff",
        b"\x80",
        b"\xc3",
        b"\xe2\x82",
        b"\xf0\x9f\x98",
    ],
)
def test_full_set_rejects_invalid_utf8(data):
    assert not fullmatch(ALL_CODEPOINTS.to_ir(), data)


def test_surrogates_are_dropped_and_documented_boundaries():
    s = CodepointSet([(0xD000, 0xE100)])
    assert s.ranges == ((0xD000, 0xD7FF), (0xE000, 0xE100))
    assert 0xD800 not in ALL_CODEPOINTS and len(ALL_CODEPOINTS) == 0x110000 - 0x800
    assert codepoint_set_to_ir([]) is NOTHING
    with pytest.raises(ValueError):
        codepoint_set_to_ir([(5, 4)])
    with pytest.raises(ValueError):
        codepoint_set_to_ir([(0, 0x110000)])


@FAST
@given(range_sets, range_sets, codepoints)
def test_codepoint_set_algebra(a_ranges, b_ranges, cp):
    a, b = CodepointSet(a_ranges), CodepointSet(b_ranges)
    in_a, in_b = _in_ranges(cp, a_ranges), _in_ranges(cp, b_ranges)
    assert (cp in a | b) == (in_a or in_b)
    assert (cp in a & b) == (in_a and in_b)
    assert (cp in a.complement()) == (not in_a)
    assert (cp in a.difference(b)) == (in_a and not in_b)
    assert a.complement().complement() == a
    flat = [r for pair in a.ranges for r in pair]
    assert flat == sorted(flat) and all(
        a.ranges[i][1] + 1 < a.ranges[i + 1][0] for i in range(len(a.ranges) - 1)
    )


def test_lowering_is_small_and_deterministic():
    assert str(codepoint_set_to_ir([(0x80, 0x7FF)])) == "[\\xc2-\\xdf] [\\x80-\\xbf]"
    assert str(codepoint_set_to_ir([(0xE9, 0xFC)])) == '"\\xc3" [\\xa9-\\xbc]'
    assert len(ALL_CODEPOINTS.to_ir().items) == 8
    assert codepoint_set_to_ir([(0x10, 0x20), (0x0, 0x15)]) is codepoint_set_to_ir([(0, 0x20)])


def test_ecma_space_is_exactly_the_spec_list():
    zs = {cp for cp in range(MAX_CODEPOINT + 1) if unicodedata.category(chr(cp)) == "Zs"}
    spec = zs | {0x09, 0x0B, 0x0C, 0xFEFF} | {0x0A, 0x0D, 0x2028, 0x2029}
    assert ECMA_SPACE == CodepointSet((cp, cp) for cp in spec)


# ---------------------------------------------------------------- the corpus

# Vector ids whose pattern we refuse on purpose (UnsupportedFeatureError). Reviewed; keep small.
EXPECTED_UNSUPPORTED: frozenset[str] = frozenset()


def _corpus() -> list[dict]:
    if not CORPUS.exists():
        return []
    return [
        json.loads(line) for line in CORPUS.read_text(encoding="utf-8").split("\n") if line.strip()
    ]


@pytest.mark.skipif(not CORPUS.exists(), reason="shared regex corpus not present")
@pytest.mark.parametrize("record", _corpus(), ids=lambda r: r["id"])
def test_corpus_vector(record):
    if record["id"] in EXPECTED_UNSUPPORTED:
        with pytest.raises(UnsupportedFeatureError):
            parse_regex(record["grammar"])
        return
    expr = parse_regex(record["grammar"], dialect="unicode")
    for s in record["passing"]:
        assert fullmatch(expr, s.encode()), f"should accept {s!r}"
    for s in record["failing"]:
        assert not fullmatch(expr, s.encode()), f"should reject {s!r}"


# ---------------------------------------------------------------- differential tests vs re / regex

LITERALS = [
    "a",
    "b",
    "c",
    "1",
    "_",
    " ",
    "-",
    "\\.",
    "\\*",
    "\\(",
    "\\\\",
    "\\t",
    "\\n",
    "\\x41",
    "\\u0062",
]
CLASS_ITEMS = ["a", "b-d", "0-9", "_", "\\-", "\\d", "\\w", "\\s", "\\D", "\\n", " ", ".", "\\]"]
ESCAPES = ["\\d", "\\w", "\\s", "\\D", "\\W", "\\S", "."]
GREEDY = ["", "", "", "*", "+", "?", "{2}", "{1,2}", "{0,}", "{,2}"]
QUANTIFIERS = GREEDY + ["*?", "+?", "??", "{1,3}?"]


def _class(items: list[str], negated: bool) -> str:
    return "[" + ("^" if negated else "") + "".join(items) + "]"


def _atoms(class_items: list[str]) -> st.SearchStrategy[str]:
    classes = st.builds(
        _class, st.lists(st.sampled_from(class_items), min_size=1, max_size=3), st.booleans()
    )
    return st.one_of(st.sampled_from(LITERALS), st.sampled_from(ESCAPES), classes)


atoms = _atoms(CLASS_ITEMS)


def _pattern_strategy(
    atom: st.SearchStrategy[str], quantifiers: list[str] = QUANTIFIERS
) -> st.SearchStrategy[str]:
    piece = st.tuples(atom, st.sampled_from(quantifiers)).map("".join)

    def extend(inner):
        group = st.tuples(st.sampled_from(["(", "(?:"]), inner).map(lambda t: t[0] + t[1] + ")")
        item = st.tuples(st.one_of(atom, group), st.sampled_from(quantifiers)).map("".join)
        sequence = st.lists(item, max_size=3).map("".join)
        return st.lists(sequence, min_size=1, max_size=3).map("|".join)

    return st.recursive(piece, extend, max_leaves=8)


def _with_flags(body: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(st.sampled_from(["", "", "(?i)"]), body).map("".join)


patterns = _with_flags(_pattern_strategy(atoms))
# No \r, U+2028/9 (ECMA `.` excludes them, Python's does not) and no non-ASCII whitespace.
TEXT_CHARS = "abcABC019_ -.*()\\\t\n"


def _strings_for(pattern: str, extra: str = "") -> st.SearchStrategy[str]:
    own = sorted({c for c in pattern if c in TEXT_CHARS or c in extra} | set("a1 "))
    alphabet = st.one_of(st.sampled_from(own), st.sampled_from(TEXT_CHARS + extra))
    return st.text(alphabet, max_size=8)


@FAST
@given(st.data())
def test_differential_unicode_vs_python_re(data):
    p = data.draw(patterns, label="pattern")
    expr = parse_regex(p)
    for _ in range(4):
        s = data.draw(_strings_for(p), label="string")
        assert fullmatch(expr, s.encode()) == (re.fullmatch(p, s, re.ASCII) is not None), (p, s)


NON_ASCII = [
    "é",
    "ü",
    "好",
    "😀",
    "[é-ü]",
    "[^é]",
    "[^a]",
    "[😀-😂]",
    "\\u00e9",
    "\\u{1F600}",
    "\\U0001F601",
]


@FAST
@given(st.data())
def test_differential_unicode_non_ascii_vs_python_re(data):
    p = data.draw(_pattern_strategy(st.one_of(atoms, st.sampled_from(NON_ASCII))), label="pattern")
    expr = parse_regex(p)
    py = p.replace("\\u{1F600}", "\\U0001F600")  # Python spells it \U
    for _ in range(4):
        s = data.draw(_strings_for(p, extra="éüñ好😀😁"), label="string")
        assert fullmatch(expr, s.encode()) == (re.fullmatch(py, s, re.ASCII) is not None), (p, s)


BYTE_ATOMS = ["\\xff", "\\x80", "[\\x80-\\xff]", "[^\\x00-\\x7f]", "[a\\xc3]"]
BYTE_STRING_CHARS = [c.encode() for c in TEXT_CHARS] + [
    b"\x80",
    b"\xc3",
    b"\xa9",
    b"\xff",
    b"\r",
    b"\x0b",
]


@FAST
@given(st.data())
def test_differential_bytes_dialect_vs_python_re_bytes(data):
    p = data.draw(_pattern_strategy(st.one_of(atoms, st.sampled_from(BYTE_ATOMS))), label="pattern")
    py = p.replace("\\u0062", "b")  # Python bytes patterns have no \u
    expr = parse_regex(p, dialect="bytes")
    for _ in range(4):
        s = b"".join(
            data.draw(st.lists(st.sampled_from(BYTE_STRING_CHARS), max_size=8), label="bytes")
        )
        assert fullmatch(expr, s) == (re.fullmatch(py.encode(), s) is not None), (p, s)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_viable_prefixes_vs_regex_partial(data):
    # `regex` (2026.5) partial matching is not exact in two places, kept out of this language:
    # - lazy quantifiers: it reports a partial match of " " for "|a??b" and "(?:|a*?a)";
    #   laziness does not change the language anyway (covered by the `re` tests);
    # - empty classes such as [^0-9\D]: it reports a partial match whenever input runs out.
    no_empty_class = _atoms([item for item in CLASS_ITEMS if item != "\\D"])
    p = data.draw(_with_flags(_pattern_strategy(no_empty_class, GREEDY)), label="pattern")
    expr = parse_regex(p)
    for _ in range(2):
        s = data.draw(_strings_for(p), label="string")
        for i in range(len(s) + 1):
            partial = regex_pkg.fullmatch(p, s[:i], flags=regex_pkg.ASCII, partial=True)
            assert is_viable_prefix(expr, s[:i].encode()) == (partial is not None), (p, s[:i])


# ---------------------------------------------------------------- unicode specifics


def test_unicode_dot_and_classes():
    dot = parse_regex(".")
    assert fullmatch(dot, "😀".encode()) and fullmatch(dot, "é".encode()) and fullmatch(dot, b"a")
    assert (
        not fullmatch(dot, b"\xff")
        and not fullmatch(dot, b"\xf0\x9f\x98")
        and not fullmatch(dot, b"ab")
    )
    for terminator in "\n\r\u2028\u2029":
        assert not fullmatch(dot, terminator.encode())
    assert fullmatch(parse_regex("[é-ü]"), "ö".encode()) and not fullmatch(
        parse_regex("[é-ü]"), "ÿ".encode()
    )
    assert fullmatch(parse_regex("[^a]"), "é".encode()) and not fullmatch(
        parse_regex("[^a]"), b"\xc3"
    )
    assert fullmatch(parse_regex("\\s"), "\u3000".encode()) and not fullmatch(
        parse_regex("\\s"), "\u0085".encode()
    )
    assert fullmatch(parse_regex("\\S"), "\u0085".encode())
    assert fullmatch(parse_regex("\\xff"), "ÿ".encode())
    assert fullmatch(parse_regex("[^]"), "😀".encode()) and parse_regex("[]") is NOTHING


def test_bytes_dialect_specifics():
    assert fullmatch(parse_regex(".", dialect="bytes"), b"\xff")
    assert not fullmatch(parse_regex(".", dialect="bytes"), b"\n")
    assert fullmatch(parse_regex("\\xff", dialect="bytes"), b"\xff")
    assert fullmatch(parse_regex("é", dialect="bytes"), "é".encode())
    cls = parse_regex("[aé]", dialect="bytes")
    assert fullmatch(cls, "é".encode()) and fullmatch(cls, b"a") and not fullmatch(cls, b"\xc3")
    assert not fullmatch(parse_regex("\\s", dialect="bytes"), "\u3000".encode())
    assert fullmatch(parse_regex("[a-é]", dialect="bytes"), "Ã".encode())
    assert REGEX_DIALECTS == ("unicode", "bytes")
    with pytest.raises(ValueError):
        parse_regex("a", dialect="pcre")


def test_case_insensitive_is_ascii_only():
    e = parse_regex("(?i)ab[x-z]é")
    assert fullmatch(e, "AbYé".encode()) and not fullmatch(e, "AbYÉ".encode())
    assert not fullmatch(parse_regex("(?i)[^a]"), b"A")
    assert not fullmatch(
        parse_regex("(?i)k"), "\u212a".encode()
    )  # no Unicode folding (Kelvin sign)


def test_named_groups_comments_and_anchors():
    assert str(parse_regex("(?<year>\\d{4})-(?P<m>\\d\\d)")) == '[0-9]{4} "-" [0-9] [0-9]'
    assert parse_regex("(?#note)a") is parse_regex("a")
    assert parse_regex("^a$|^b$") is parse_regex("a|b")
    assert parse_regex("\\Aab\\Z") is parse_regex("ab")
    assert parse_regex("^$") is EMPTY


# ---------------------------------------------------------------- errors and limits

ERRORS = [
    ("(abc", "unicode", GrammarSyntaxError, 0, "unterminated group"),
    ("abc)", "unicode", GrammarSyntaxError, 3, "unbalanced parenthesis"),
    ("*a", "unicode", GrammarSyntaxError, 0, "nothing to repeat"),
    ("a|+", "unicode", GrammarSyntaxError, 2, "nothing to repeat"),
    ("{2}", "unicode", GrammarSyntaxError, 0, "nothing to repeat"),
    ("a**", "unicode", GrammarSyntaxError, 2, "multiple repeat"),
    ("a{2}{3}", "unicode", GrammarSyntaxError, 4, "multiple repeat"),
    ("[z-a]", "unicode", GrammarSyntaxError, 1, "bad character range z-a"),
    ("[\\d-z]", "unicode", GrammarSyntaxError, 1, "bad character range"),
    ("[abc", "unicode", GrammarSyntaxError, 0, "unterminated character class"),
    ("\\x4", "unicode", GrammarSyntaxError, 0, "incomplete escape \\x4"),
    ("a{3,2}", "unicode", GrammarSyntaxError, 1, "min repeat greater than max repeat"),
    ("ab\\", "unicode", GrammarSyntaxError, 2, "trailing backslash"),
    ("\\q", "unicode", GrammarSyntaxError, 0, "bad escape \\q"),
    ("(?<1x>a)", "unicode", GrammarSyntaxError, 3, "bad group name"),
    ("(?<a>x)(?<a>y)", "unicode", GrammarSyntaxError, 10, "redefinition of group name"),
    ("(?%a)", "unicode", GrammarSyntaxError, 0, "unknown group extension"),
    ("\\u{110000}", "unicode", GrammarSyntaxError, 0, "\\u{...}"),
    ("[\\x80-é]", "bytes", GrammarSyntaxError, 1, "mixes a raw byte"),
    ("a(?=b)", "unicode", UnsupportedFeatureError, 1, "lookahead (?="),
    ("a(?!b)", "unicode", UnsupportedFeatureError, 1, "negative lookahead"),
    ("(?<=a)b", "unicode", UnsupportedFeatureError, 0, "lookbehind (?<="),
    ("(?<!a)b", "unicode", UnsupportedFeatureError, 0, "negative lookbehind"),
    ("(a)\\1", "unicode", UnsupportedFeatureError, 3, "backreference \\1"),
    ("(?<n>a)\\k<n>", "unicode", UnsupportedFeatureError, 7, "named backreference"),
    ("(?P<n>a)(?P=n)", "unicode", UnsupportedFeatureError, 8, "backreference (?P=name)"),
    ("\\bc", "unicode", UnsupportedFeatureError, 0, "word boundary \\b"),
    ("a\\B", "unicode", UnsupportedFeatureError, 1, "word boundary \\B"),
    ("a^b", "unicode", UnsupportedFeatureError, 1, "anchor ^"),
    ("(^a)", "unicode", UnsupportedFeatureError, 1, "anchor ^"),
    ("a$b", "unicode", UnsupportedFeatureError, 1, "anchor $"),
    ("(a$)", "unicode", UnsupportedFeatureError, 2, "anchor $"),
    ("(?>a)", "unicode", UnsupportedFeatureError, 0, "atomic group"),
    ("(?(1)a|b)", "unicode", UnsupportedFeatureError, 0, "conditional"),
    ("a*+", "unicode", UnsupportedFeatureError, 2, "possessive quantifier"),
    ("a(?i)b", "unicode", UnsupportedFeatureError, 1, "(?i)"),
    ("(?s).", "unicode", UnsupportedFeatureError, 0, "inline flags (?s)"),
    ("\\p{L}", "bytes", UnsupportedFeatureError, 0, "Unicode property escape \\p{...} in the bytes dialect"),
    ("x\\p{letter}", "unicode", GrammarSyntaxError, 1, "unknown Unicode property or General_Category value 'letter'"),
    ("[\\P{IsGreek}]", "unicode", GrammarSyntaxError, 1, "value 'IsGreek'"),
    ("\\pL", "unicode", GrammarSyntaxError, 0, "expected \\p{Name}"),
    ("\\p{L", "unicode", GrammarSyntaxError, 0, "expected \\p{Name}"),
    ("\\p{Script=Nowhere}", "unicode", GrammarSyntaxError, 0, "unknown Unicode property 'sc=Nowhere'"),
    ("\\p{Block=Basic_Latin}", "unicode", GrammarSyntaxError, 0, "unknown Unicode property name 'Block'"),
    ("\\p{gc=Greek}", "unicode", GrammarSyntaxError, 0, "unknown General_Category value 'Greek'"),
    ("\\01", "unicode", UnsupportedFeatureError, 0, "octal escape"),
    ("x\\ud800", "unicode", UnsupportedFeatureError, 1, "lone surrogate"),
    ("^*", "unicode", GrammarSyntaxError, 1, "nothing to repeat"),
    ("a*??", "unicode", GrammarSyntaxError, 3, "multiple repeat"),
    ("(?i:a)", "unicode", UnsupportedFeatureError, 0, "inline flags (?i:"),
    ("[\\ud800]", "unicode", UnsupportedFeatureError, 1, "lone surrogate"),
    ("(?P>n)", "unicode", UnsupportedFeatureError, 0, "recursive group"),
    ("[^é]", "bytes", UnsupportedFeatureError, 0, "negated class"),
]


@pytest.mark.parametrize(
    ("pattern", "dialect", "cls", "offset", "needle"), ERRORS, ids=[e[0] for e in ERRORS]
)
def test_errors(pattern, dialect, cls, offset, needle):
    with pytest.raises(cls) as info:
        parse_regex(pattern, dialect=dialect, source_name="pat.re")
    err = info.value
    assert type(err) is cls
    assert err.span.offset == offset and err.span.source_name == "pat.re"
    assert needle in str(err)
    assert str(err).startswith(f"pat.re:1:{offset + 1}: ")


def test_nesting_limit():
    ok = "(" * 500 + "a" + ")" * 500
    assert parse_regex(ok) is parse_regex("a")
    with pytest.raises(LimitExceededError) as info:
        parse_regex("(" * 501 + "a" + ")" * 501)
    assert info.value.limit == "max_nesting"
    with pytest.raises(LimitExceededError):
        parse_regex("((a))", limits=Limits(max_nesting=1))
    deep = "(?:" * 20_000  # never a RecursionError, whatever the limit
    with pytest.raises(GrammarSyntaxError):
        parse_regex(deep + "a", limits=Limits(max_nesting=10**6))


@pytest.mark.parametrize(
    "pattern", ["a{100001}", "a{1,100001}", "a{100001,}", "a{1,99999999999999999999999999}"]
)
def test_repeat_limit(pattern):
    with pytest.raises(LimitExceededError) as info:
        parse_regex(pattern)
    assert info.value.limit == "max_repeat"
    assert parse_regex("a{0,100000}") is not None
    with pytest.raises(LimitExceededError):
        parse_regex("a{11}", limits=Limits(max_repeat=10))


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from("ab()[]{}|*+?^$\\.-,:<>=!PdxuUk0123é"), max_size=14))
def test_fuzz_only_gramc_errors(pattern):
    for dialect in REGEX_DIALECTS:
        try:
            assert isinstance(parse_regex(pattern, dialect=dialect), Expr)
        except GramcError:
            pass


# ---------------------------------------------------------------- IR snapshots

SNAPSHOTS = [
    ("a|b", "unicode", "[ab]"),
    ("abc", "unicode", '"abc"'),
    ("a+b*c?", "unicode", '"a"+ "b"* "c"?'),
    ("(ab){2,3}", "unicode", '("ab"){2,3}'),
    ("[0-9a-f]{4}", "unicode", "[0-9a-f]{4}"),
    ("x{,2}|y{3,}", "unicode", '"x"{0,2} | "y"{3,}'),
    ("a{|}", "unicode", '"a{" | "}"'),
    ("(|a)", "unicode", '"" | "a"'),
    ("a{x}a{1,2", "unicode", '"a{x}a{1,2"'),
    ("\\cJ\\/", "unicode", '"\\n/"'),
    ("[\\u0000-\\uffff]", "unicode", str(CodepointSet([(0, 0xFFFF)]).to_ir())),
    ("(?i)ok", "unicode", "[Oo] [Kk]"),
    ("é", "unicode", '"\\xc3\\xa9"'),
    ("[é-ü]", "unicode", '"\\xc3" [\\xa9-\\xbc]'),
    ("\\s", "unicode", str(ECMA_SPACE.to_ir())),
    (".", "bytes", "[^\\n]"),
    ("\\xff[^a]", "bytes", '"\\xff" [^a]'),
    ("[é\\d]", "bytes", '[0-9] | "\\xc3\\xa9"'),
]


@pytest.mark.parametrize(
    ("pattern", "dialect", "expected"), SNAPSHOTS, ids=[s[0] for s in SNAPSHOTS]
)
def test_ir_snapshot(pattern, dialect, expected):
    assert str(parse_regex(pattern, dialect=dialect)) == expected


PROPERTIES = ["L", "Lu", "Letter", "Nd", "gc=Mn", "General_Category=Currency_Symbol", "P", "Zs", "LC", "digit",
              "Script=Greek", "sc=Hani", "scx=Cyrl", "Script_Extensions=Latin", "Alphabetic", "White_Space",
              "ASCII", "Emoji", "Any", "Cn"]


@pytest.mark.parametrize("name", PROPERTIES)
def test_a_unicode_property_escape_matches_what_the_regex_package_matches(name):
    """\\p{...} and \\P{...} (ECMA-262 names) against the regex package, on every code
    point at the edges of the property's ranges and a sample inside them."""
    inside, outside = _automaton(f"\\p{{{name}}}"), _automaton(f"\\P{{{name}}}")
    negated_class = _automaton(f"[^\\p{{{name}}}x]")
    reference = regex_pkg.compile(f"\\p{{{name}}}")
    probes = set(range(0, 0x250)) | {0x10FFFF, 0xFFFD, 0x1F600, 0x4E00, 0x3B1}
    for lo, hi in _ranges_of(name):
        probes |= {lo - 1, lo, (lo + hi) // 2, hi, hi + 1}
    probes = sorted(c for c in probes if 0 <= c <= MAX_CODEPOINT and not 0xD800 <= c <= 0xDFFF)
    for cp in probes:
        ch = chr(cp)
        expected = bool(reference.fullmatch(ch))
        data = ch.encode()
        assert inside.fullmatch(data) == expected, (name, hex(cp))
        assert outside.fullmatch(data) == (not expected), (name, hex(cp))
        assert negated_class.fullmatch(data) == (not expected and ch != "x"), (name, hex(cp))


def test_property_escapes_combine_in_classes_and_sequences():
    dfa = _automaton(r"\p{Lu}[\p{Ll}\p{Script=Greek}\d]*")
    for text in ["Élan", "Aαβ9", "Z", "ΩΩ"]:
        assert dfa.fullmatch(text.encode()) == bool(regex_pkg.fullmatch(r"\p{Lu}[\p{Ll}\p{Script=Greek}\d]*", text))
    assert not dfa.fullmatch("élan".encode()) and not dfa.fullmatch("A-".encode())


def _ranges_of(name: str) -> list[tuple[int, int]]:
    from gramc.compiler.unicode_properties import property_set

    return list(property_set(name).ranges)


def _automaton(pattern: str):
    from gramc.compiler.dfa import build_dfa
    from gramc.compiler.ir import Grammar

    return build_dfa(Grammar.single(parse_regex(pattern)))
