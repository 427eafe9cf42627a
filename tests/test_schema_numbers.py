"""Exactness of the JSON Schema numeric leaves (gramc.schemas.numbers) against exact decimal
arithmetic, with the derivative oracle as the matcher.

The claim under test: a text is accepted exactly when it is in the documented sublanguage
(plain integer literals for ``integer``; plain decimals and normalised scientific forms for a
constrained ``number``; plain decimals when ``multipleOf`` is given) and its value satisfies
every keyword. Values and bounds are compared exactly (Fraction); float bounds mean their
shortest repr, which on ``json.dumps`` output agrees with Python float comparison.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from oracle import fullmatch

from gramc.compiler.dfa import build_dfa
from gramc.compiler.ir import NOTHING, Grammar
from gramc.schemas.approx import NotExpressible
from gramc.schemas.numbers import JSON_NUMBER, integer_ir, number_ir, value_spellings
from gramc.schemas.trie import trie

INTEGER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)")
PLAIN_TEXT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")
SCI_TEXT = re.compile(r"-?[1-9](\.[0-9]+)?[eE][+-]?[0-9]+")
JSON_NUMBER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")

SETTINGS = settings(max_examples=int(__import__("os").environ.get("NUM_EXAMPLES", 80)), deadline=None, suppress_health_check=list(HealthCheck))


def frac(x) -> Fraction:
    if isinstance(x, float):
        return Fraction(Decimal(repr(x)))
    return Fraction(x)


def satisfies(value: Fraction, kw: dict) -> bool:
    checks = {
        "minimum": lambda b: value >= b,
        "maximum": lambda b: value <= b,
        "exclusive_minimum": lambda b: value > b,
        "exclusive_maximum": lambda b: value < b,
    }
    for key, check in checks.items():
        if kw.get(key) is not None and not check(frac(kw[key])):
            return False
    m = kw.get("multiple_of")
    return m is None or (value / frac(m)).denominator == 1


def accepts(expr, text: str) -> bool:
    return fullmatch(expr, text.encode())


# ---------------------------------------------------------------- strategies

small_ints = st.integers(-1200, 1200)
huge_ints = st.integers(-(10**40), 10**40)
floats = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)
wide_floats = st.floats(allow_nan=False, allow_infinity=False)
decimals = st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-1000, max_value=1000)
# Bounds up to 1e40 (longer bounds are covered by examples: the oracle is slow on 300-digit texts).
bounded_floats = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e40, max_value=1e40)
bound_values = st.one_of(small_ints, huge_ints, floats, bounded_floats, decimals,
                         st.sampled_from([0, 0.0, -0.0, 0.5, -0.5, 1e-5, 1.5e-7, 1e20, 2.5, -2.5, 10, 100]))


@st.composite
def keyword_sets(draw, with_multiple=False):
    kw = {}
    for key in ("minimum", "maximum", "exclusive_minimum", "exclusive_maximum"):
        if draw(st.integers(0, 2)) == 0:
            kw[key] = draw(bound_values)
    if with_multiple and draw(st.booleans()):
        kw["multiple_of"] = draw(st.sampled_from([1, 2, 3, 4, 5, 7, 10, 16, 25, 0.5, 0.01, 0.25, 2.5, 0.3, 1.0, 12, 100]))
    return kw


def near(x: Fraction, draw) -> str:
    """A decimal text close to x (a few digits changed, appended or removed)."""
    s = format(Decimal(x.numerator) / Decimal(x.denominator), "f") if x.denominator != 1 else str(x.numerator)
    chars = list(s)
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(chars) - 1))
        if chars[i].isdigit():
            chars[i] = str(draw(st.integers(0, 9)))
    s = "".join(chars)
    if draw(st.booleans()):
        s += ("" if "." in s else ".") + draw(st.sampled_from(["0", "00", "1", "9", "0001", "5"]))
    return s


@st.composite
def number_texts(draw, kw):
    bounds = [frac(v) for k, v in kw.items() if v is not None and k != "multiple_of"]
    choice = draw(st.integers(0, 6))
    if choice == 0 and bounds:
        return near(draw(st.sampled_from(bounds)), draw)
    if choice == 1 and bounds:
        b = draw(st.sampled_from(bounds))
        return "-" + near(abs(b), draw) if b < 0 else near(b, draw)
    if choice == 2:
        return json.dumps(draw(wide_floats))
    if choice == 3:
        return json.dumps(draw(st.integers(-(10**42), 10**42)))
    if choice == 4:  # other spellings: exponents, leading zeros, signs
        mant = draw(st.sampled_from(["1", "12", "0.5", "0", "9.99", "1.0", "-3", "-0", "00", "1.", ".5"]))
        exp = draw(st.sampled_from(["", "e5", "E-3", "e+0", "e-05", "e400", "e-400", "E+21"]))
        return mant + exp
    if choice == 5:
        return json.dumps(draw(floats))
    return str(draw(small_ints)) + draw(st.sampled_from(["", ".0", ".5", ".25", ".001", ".999"]))


def reference(text: str, kw: dict, mode: str) -> bool:
    if mode == "integer":
        in_sub = INTEGER_TEXT.fullmatch(text)
    elif not any(v is not None for v in kw.values()):
        in_sub = JSON_NUMBER_TEXT.fullmatch(text)
    elif kw.get("multiple_of") is not None:
        in_sub = PLAIN_TEXT.fullmatch(text)
    else:
        in_sub = PLAIN_TEXT.fullmatch(text) or SCI_TEXT.fullmatch(text)
    if not in_sub:
        return False
    return satisfies(Fraction(Decimal(text)), kw)


# ---------------------------------------------------------------- properties


@SETTINGS
@given(st.data(), keyword_sets(with_multiple=True))
def test_integer_ir_is_exact(data, kw):
    try:
        expr = integer_ir(**kw)
    except NotExpressible:
        assume(False)
    for _ in range(25):
        text = data.draw(number_texts(kw))
        assert accepts(expr, text) == reference(text, kw, "integer"), (text, kw)


@SETTINGS
@given(st.data(), keyword_sets(with_multiple=True))
def test_number_ir_is_exact(data, kw):
    try:
        expr = number_ir(**kw)
    except NotExpressible:
        assume(False)
    for _ in range(25):
        text = data.draw(number_texts(kw))
        assert accepts(expr, text) == reference(text, kw, "number"), (text, kw)


@SETTINGS
@given(st.data(), keyword_sets())
def test_number_bounds_accept_json_dumps_floats_iff_python_says_so(data, kw):
    """The MaskBench view: json.dumps of a float is accepted iff Python's comparison holds."""
    expr = number_ir(**kw)
    for _ in range(20):
        value = data.draw(st.one_of(wide_floats, floats))
        expected = all(
            (v is None) or op(value, float(v) if not isinstance(v, int) else v)
            for v, op in (
                (kw.get("minimum"), lambda a, b: a >= b),
                (kw.get("maximum"), lambda a, b: a <= b),
                (kw.get("exclusive_minimum"), lambda a, b: a > b),
                (kw.get("exclusive_maximum"), lambda a, b: a < b),
            )
        )
        if any(isinstance(v, int) and abs(v) > 2**53 for v in kw.values()):
            continue  # Python compares a float with a huge int exactly; skip the mixed case
        assert accepts(expr, json.dumps(value)) == expected, (json.dumps(value), kw)


@SETTINGS
@given(st.data(), st.integers(-(10**25), 10**25), st.integers(0, 10**6))
def test_integer_ranges_around_random_bounds(data, lo, width):
    hi = lo + width
    expr = integer_ir(minimum=lo, maximum=hi)
    for _ in range(30):
        x = data.draw(st.one_of(st.integers(lo - 3, lo + 3), st.integers(hi - 3, hi + 3),
                                st.integers(lo - 10 * width - 10, hi + 10 * width + 10)))
        assert accepts(expr, str(x)) == (lo <= x <= hi), (x, lo, hi)


# ---------------------------------------------------------------- examples


@pytest.mark.parametrize(
    "kw, good, bad",
    [
        ({}, ["0", "-0", "7", "-123", "10" * 20], ["01", "1.0", "1e2", "+1", "", "-", "1.5"]),
        ({"minimum": 2.5}, ["3", "4", "100"], ["2", "-3", "2.5"]),
        ({"exclusive_maximum": 0}, ["-1", "-99"], ["0", "-0", "1"]),
        ({"maximum": 0}, ["0", "-0", "-5"], ["1"]),
        ({"minimum": 0, "maximum": 0}, ["0", "-0"], ["1", "-1"]),
        ({"minimum": 1e300}, ["1" + "0" * 300, "2" + "0" * 300], ["9" * 300]),
        ({"multiple_of": 16, "minimum": -64, "maximum": 256}, ["-64", "256", "0", "-0", "160"], ["-65", "257", "8", "272"]),
        ({"multiple_of": 0.5}, ["3", "-7"], ["1.5"]),
        ({"multiple_of": 3}, ["0", "3", "99", "-3000003"], ["1", "31", "-8"]),
        ({"multiple_of": 7, "minimum": 0, "maximum": 100}, ["0", "7", "98"], ["1", "71", "105"]),
        ({"minimum": 3, "maximum": 2}, [], ["2", "3"]),
    ],
)
def test_integer_examples(kw, good, bad):
    expr = integer_ir(**kw)
    for t in good:
        assert accepts(expr, t), t
    for t in bad:
        assert not accepts(expr, t), t


@pytest.mark.parametrize(
    "kw, good, bad",
    [
        ({}, ["0", "-0.0", "1e5", "1E+05", "-12.5e-3", "0e0"], ["01", ".5", "1.", "+1", "1e", "--1"]),
        ({"minimum": 0}, ["0", "-0", "-0.000", "0.0001", "1e-05", "1.5e+300"], ["-1e-05", "-0.1", "12e3"]),
        ({"exclusive_minimum": 0}, ["0.0001", "1e-05"], ["0", "-0", "0.000"]),
        ({"minimum": -1.5, "maximum": 2.25}, ["-1.5", "-1.50", "2.25", "0", "1e-300", "2.2500", "-1.4999"],
         ["-1.5001", "2.2501", "-1.51", "3", "2.26"]),
        ({"exclusive_maximum": 1e20}, ["1e+19", "9.99999e19", "99999999999999999999.99"], ["1e+20", "1e20", "100000000000000000000"]),
        ({"multiple_of": 0.01, "minimum": 0}, ["1230.55", "500.0", "0.0", "12.300"], ["500.234", "-0.01", "0.001", "1e-2"]),
        ({"multiple_of": 0.3}, ["0.3", "0.6", "-0.9", "3", "3.0"], ["0.1", "1", "0.31"]),
        ({"multiple_of": 2.5, "maximum": 10}, ["10", "7.5", "-2.5", "-1000"], ["12.5", "1"]),
    ],
)
def test_number_examples(kw, good, bad):
    expr = number_ir(**kw)
    for t in good:
        assert accepts(expr, t), t
    for t in bad:
        assert not accepts(expr, t), t


def test_unconstrained_number_is_the_json_number_grammar():
    assert number_ir() is JSON_NUMBER


def test_allow_zero_fraction():
    expr = integer_ir(minimum=1, maximum=3, allow_zero_fraction=True)
    assert accepts(expr, "2.0") and accepts(expr, "3.000") and accepts(expr, "2")
    assert not accepts(expr, "2.5") and not accepts(expr, "4.0") and not accepts(expr, "2.")


def test_empty_ranges_are_nothing():
    assert integer_ir(minimum=1.2, maximum=1.8) is NOTHING
    assert number_ir(minimum=2, exclusive_maximum=2) is NOTHING


def test_bad_arguments():
    with pytest.raises(ValueError):
        integer_ir(minimum=float("nan"))
    with pytest.raises(ValueError):
        number_ir(multiple_of=0)
    with pytest.raises(TypeError):
        number_ir(maximum="3")


def test_multiple_of_beyond_the_residue_limit_is_not_expressible():
    with pytest.raises(NotExpressible) as info:
        integer_ir(multiple_of=10**9 + 7)
    assert info.value.keyword == "multipleOf"


def test_huge_bound_is_not_expressible():
    with pytest.raises(NotExpressible):
        integer_ir(maximum=int("123456789" * 100))


@pytest.mark.parametrize(
    "kw",
    [
        {"minimum": -(10**30), "maximum": 10**40},
        {"minimum": 0.001, "exclusive_maximum": 123456.789},
        {"multiple_of": 4, "minimum": 0},
        {"multiple_of": 16, "minimum": -64, "maximum": 256},
        {"multiple_of": 0.01, "minimum": 0, "maximum": 1e9},
        {"multiple_of": 3},
        {"multiple_of": 97, "minimum": -1e6, "maximum": 1e9},
        {"minimum": 1e308},
        {"maximum": 9223372036854775807, "minimum": -9223372036854775808},
    ],
)
def test_builds_small_dfas(kw):
    for fn in (integer_ir, number_ir):
        dfa = build_dfa(Grammar.single(fn(**kw)))
        assert dfa.n_states < 5000


# ---------------------------------------------------------------- listed values


def _same_language(a, b) -> bool:
    from gramc.compiler.regular import difference, is_empty

    return is_empty(difference(a, b)) and is_empty(difference(b, a))


@SETTINGS
@given(st.one_of(bound_values, wide_floats))
def test_value_spellings_are_the_range_of_one_value(value):
    """An enum's number is spelled from its digits (linear time); the language must be the
    one number_ir gives the one-value range."""
    assert _same_language(trie(value_spellings(value)), number_ir(minimum=value, maximum=value))


@pytest.mark.parametrize("value", [0, -0.0, 7, -3, 10, 12340, 0.001, 1e-05, 5e-324, 1.7976931348623157e308,
                                   1e22, 123.456, -0.5, 10**40, Decimal("1.50")])
def test_value_spellings_examples(value):
    assert _same_language(trie(value_spellings(value)), number_ir(minimum=value, maximum=value))


def test_value_spellings_refuse_what_number_ir_refuses():
    for value in (10**1000, Decimal("1e-1001")):
        with pytest.raises(NotExpressible):
            number_ir(minimum=value, maximum=value)
        with pytest.raises(NotExpressible):
            value_spellings(value)


# ---------------------------------------------------------------- multipleOf by brute force

#: Divisors coprime to 10 (their residues never settle), sharing factors with it, and
#: decimals of several scales (``0.07``: K = 7, s = 2).
MULTIPLES = [7, 13, 97, 6, 12, 250, 3, 0.07, 0.13, 1.3, 0.25, 0.06, 2.5, 0.001, 0.5, 1, Decimal("0.12")]
MULTIPLE_BOUNDS = [{}, {"minimum": -37, "maximum": 1234.5}, {"exclusive_minimum": -0.5, "exclusive_maximum": 99},
                   {"minimum": 12.34}, {"maximum": -3}]
VIABLE_PLAIN = re.compile(r"-?((0|[1-9][0-9]*)(\.[0-9]*)?)?")
SHORT_TEXT_LENGTH = 5


class ShortTexts:
    """Every text over ``-.0-9`` of at most :data:`SHORT_TEXT_LENGTH` bytes that could still
    start a plain decimal, and each of those followed by one byte that cannot, as arrays:
    the bytes (padded), lengths, and for plain decimals the value ``n / 10**t``."""

    def __init__(self, max_len: int):
        texts, todo = [], [""]
        while todo:
            text = todo.pop()
            texts.append(text)
            if VIABLE_PLAIN.fullmatch(text) and len(text) < max_len:
                todo.extend(text + c for c in "-.0123456789")
        self.texts = texts
        self.bytes = np.zeros((len(texts), max_len), dtype=np.uint8)
        for i, text in enumerate(texts):
            self.bytes[i, : len(text)] = np.frombuffer(text.encode(), dtype=np.uint8)
        self.length = np.array([len(t) for t in texts])
        self.viable = np.array([bool(VIABLE_PLAIN.fullmatch(t)) for t in texts])
        self.integer = np.array([bool(INTEGER_TEXT.fullmatch(t)) for t in texts])
        self.plain = np.array([bool(PLAIN_TEXT.fullmatch(t)) for t in texts])
        self.n = np.array([int(t.replace(".", "")) if p else 0 for t, p in zip(texts, self.plain)], dtype=np.int64)
        self.t = np.array([len(t.partition(".")[2]) for t in texts], dtype=np.int64)

    def states(self, dfa) -> np.ndarray:
        """The DFA state after each text (vectorised over the texts, one byte at a time)."""
        state = np.full(len(self.texts), dfa.start, dtype=np.int64)
        for i in range(self.bytes.shape[1]):
            on = self.length > i
            state[on] = dfa.delta[state[on], dfa.byte_class[self.bytes[on, i]]]
        return state

    def satisfying(self, kw: dict) -> np.ndarray:
        """Whether the value of each plain decimal satisfies the keywords, exactly."""
        scale = 10**self.t
        ok = self.plain.copy()
        for key, holds in (("minimum", np.greater_equal), ("maximum", np.less_equal),
                           ("exclusive_minimum", np.greater), ("exclusive_maximum", np.less)):
            if key in kw:
                b = frac(kw[key])  # n / 10**t against p / q: n q against p 10**t
                ok &= holds(self.n * b.denominator, b.numerator * scale)
        m = frac(kw["multiple_of"])  # n / 10**t = i p / q: n q divisible by p 10**t
        ok &= (self.n * m.denominator) % (m.numerator * scale) == 0
        return ok


@pytest.fixture(scope="module")
def short_texts() -> ShortTexts:
    return ShortTexts(SHORT_TEXT_LENGTH)


@pytest.mark.parametrize("bounds", MULTIPLE_BOUNDS, ids=lambda b: ",".join(f"{k}={v}" for k, v in b.items()) or "unbounded")
@pytest.mark.parametrize("m", MULTIPLES, ids=str)
def test_multiple_of_against_every_short_text(m, bounds, short_texts):
    """Every text of up to 5 bytes over ``-.0-9``: the compiled DFA accepts it exactly when
    it is a plain decimal (a plain integer for ``integer``) whose value is a multiple and in
    the bounds (exact integer arithmetic), and is dead on every prefix no plain decimal has.
    Unbounded ``multipleOf: 7`` used to be dropped."""
    kw = dict(bounds, multiple_of=m)
    expected = short_texts.satisfying(kw)
    for fn, syntax in ((integer_ir, short_texts.integer), (number_ir, short_texts.plain)):
        dfa = build_dfa(Grammar.single(fn(**kw)))
        state = short_texts.states(dfa)
        wrong = (dfa.accept[state] != (expected & syntax)) | ((state != 0) & ~short_texts.viable)
        assert not wrong.any(), (fn.__name__, kw, [short_texts.texts[i] for i in np.flatnonzero(wrong)[:10]])


@pytest.mark.parametrize("m, k, s", [(7, 7, 0), (13, 13, 0), (97, 97, 0), (6, 6, 0), (12, 12, 0), (250, 250, 0),
                                     (0.07, 7, 2), (0.13, 13, 2), (1.3, 13, 1), (0.001, 1, 3)])
def test_multiple_of_dfas_are_minimal_residue_automata(m, k, s):
    """Unbounded: a start, a state after '-', '0' and the residues of the integer part; for
    decimals also the residues after each of the s fraction digits (k (s + 2) in all, fewer
    where residues merge), never the millions of states a regular expression needs."""
    ints = build_dfa(Grammar.single(integer_ir(multiple_of=m))).n_states - 1  # without the dead state
    nums = build_dfa(Grammar.single(number_ir(multiple_of=m))).n_states - 1
    assert ints <= frac(m).numerator + 3
    assert nums <= k * (s + 2) + 3
    if k in (7, 13, 97) and s == 0:
        assert ints == k + 3  # coprime to 10: every residue is its own state


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
@pytest.mark.parametrize("kw", [{"multiple_of": 7}, {"multiple_of": 0.13, "minimum": -50},
                                {"multiple_of": 12, "maximum": 10**6}], ids=str)
def test_multiple_of_masks_on_gpt2_equal_the_oracle(kw, lazy):
    """Masks over the real gpt2 vocabulary along random walks, eager and lazy binding: a
    token is allowed exactly when the derivative oracle (IR semantics, no automata) says the
    text so far plus the token can still become a multiple in range."""
    import random

    import oracle

    import gramc
    from gramc.runtime.dfa_artifact import DFAArtifact

    vocab = gramc.load_vocab("gpt2")
    fn = number_ir if isinstance(kw["multiple_of"], float) else integer_ir
    expr = fn(**kw)
    art = DFAArtifact.bound(build_dfa(Grammar.single(expr)), {"format": "ir"}, vocab, lazy=lazy)
    rng = random.Random(str(kw))
    for _ in range(2):
        matcher, prefix = art.matcher(), b""
        for _ in range(5):
            expected = np.zeros(vocab.size, dtype=bool)
            for i, tok in enumerate(vocab.tokens):
                if i in vocab.special_ids:
                    expected[i] = i in vocab.eos_ids and oracle.fullmatch(expr, prefix)
                else:
                    expected[i] = bool(tok) and oracle.is_viable_prefix(expr, prefix + tok)
            assert np.array_equal(matcher.mask(), expected), (kw, prefix)
            allowed = [i for i in np.flatnonzero(expected) if i not in vocab.special_ids]
            if not allowed:
                break
            t = rng.choice(allowed)
            assert matcher.commit_token(int(t))
            prefix += vocab.tokens[t]
