"""Exact IR for JSON Schema string leaves: every JSON spelling of every allowed value.

A JSON string literal can spell one code point several ways: raw UTF-8 (except ``"``, ``\\``
and the controls below U+0020), a short escape (``\\" \\\\ \\/ \\b \\f \\n \\r \\t``), or
``\\uXXXX`` with hex digits in either case, a surrogate pair of two such escapes for code points
above U+FFFF. :func:`json_codepoint_set_to_ir` lowers a set of code points to the alternation
of all of those spellings, so constraints stated on the DECODED value (``minLength``,
``maxLength``, ``pattern``, ``format``) stay exact whatever spelling the model picks:

>>> print(json_codepoint_set_to_ir([(0x22, 0x22)]))
"\\\\" ("\\"" | "u0022")

How the keywords combine (see docs/json-schema-leaves.md):

- lengths count code points of the decoded value: ``repeat(one code point, min, max)``;
- ``pattern`` is ECMA-262 with search semantics (:func:`~gramc.compiler.frontends.regex.
  parse_regex_search`), its classes and literals lowered through the JSON encoding;
- ``format`` is a whole-value regex from :mod:`gramc.schemas.formats`;
- a pattern or format combined with lengths is intersected exactly by a structural rewrite of
  the regex over code points ("letters"); when that rewrite would be too large, or when a
  pattern and a format have to be intersected, :class:`~gramc.schemas.approx.NotExpressible`
  is raised and the schema walker applies its policy.

Only well-formed strings are in the language: a ``\\uD800``-``\\uDFFF`` escape must be half of a
correctly ordered surrogate pair (a lone surrogate is not a code point).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from functools import lru_cache

from gramc.compiler.frontends.regex import parse_regex, parse_regex_search
from gramc.compiler.ir import (
    EMPTY,
    NOTHING,
    Alt,
    Expr,
    Repeat,
    Seq,
    Token,
    alt,
    byte_class,
    literal,
    postorder,
    repeat,
    seq,
)
from gramc.compiler.passes import rewrite
from gramc.compiler.regular import DFATable, combine, dfa_from_transitions, dfa_of, intersection, intersection_machine
from gramc.compiler.unicode import ALL_CODEPOINTS, CodepointSet
from gramc.errors import GramcError, GrammarSyntaxError, LimitExceededError
from gramc.limits import DEFAULT_LIMITS, Limits
from gramc.schemas.approx import InvalidKeyword, NotExpressible, TooLarge
from gramc.schemas.formats import format_pattern, format_spec
from gramc.schemas.jsontext import char_spellings
from gramc.schemas.lookahead import Branch, lookahead_language, split_lookaheads
from gramc.schemas.numbers import expanded_size

#: Largest minLength lowered without a maxLength (``x{m,}`` is unrolled: its automaton
#: grows with ``m``).
MAX_COUNTED_LENGTH = 10_000
#: Largest maxLength (and minLength beside one) lowered: a bounded repetition is a counter in
#: a regular schema, and in a recursive one a chain of one node per character, built directly
#: and priced by count at run time (100,000 compiles in about 2 s and 300 MB with gpt2).
MAX_COUNTED_MAX_LENGTH = 100_000
#: Largest expanded size (see :func:`~gramc.schemas.numbers.expanded_size`) of a string leaf.
MAX_STRING_SIZE = 400_000
#: Most separate lengths one sequence may be split into when lengths meet a pattern.
MAX_LENGTH_SPLITS = 256

QUOTE = literal(b'"')

_SHORT_ESCAPES = {0x22: b'"', 0x5C: b"\\", 0x2F: b"/", 0x08: b"b", 0x0C: b"f", 0x0A: b"n", 0x0D: b"r", 0x09: b"t"}
_NOT_RAW = CodepointSet([(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])
_HEX_DIGITS = "0123456789abcdef"


def _hex_nibbles(lo: int, hi: int) -> Expr:
    """One hex digit (either case) with value lo..hi."""
    chars = "".join(_HEX_DIGITS[v] for v in range(lo, hi + 1))
    return byte_class((chars + chars.upper()).encode())


def _hex_range(lo: int, hi: int, width: int) -> Expr:
    """``width`` hex digits (either case) spelling a value in lo..hi."""
    if width == 0:
        return EMPTY
    unit = 16 ** (width - 1)
    a, b = divmod(lo, unit)
    c, d = divmod(hi, unit)
    if a == c:
        return seq(_hex_nibbles(a, a), _hex_range(b, d, width - 1))
    parts = []
    first_full, last_full = a, c
    if b:
        parts.append(seq(_hex_nibbles(a, a), _hex_range(b, unit - 1, width - 1)))
        first_full = a + 1
    if d != unit - 1:
        parts.append(seq(_hex_nibbles(c, c), _hex_range(0, d, width - 1)))
        last_full = c - 1
    if first_full <= last_full:
        parts.append(seq(_hex_nibbles(first_full, last_full), _hex_range(0, unit - 1, width - 1)))
    return alt(*parts)


def json_codepoint_set_to_ir(ranges) -> Expr:
    """Every JSON string spelling of one code point of the set.

    Args:
        ranges: a :class:`~gramc.compiler.unicode.CodepointSet` or inclusive ``(lo, hi)``
            code-point ranges (surrogates are dropped: they are not code points).

    Returns:
        IR matching exactly the raw UTF-8 form (where JSON allows it), the short escape (where
        one exists) and every ``\\uXXXX`` / surrogate-pair spelling of each code point in the
        set; :data:`~gramc.compiler.ir.NOTHING` for an empty set.
    """
    cps = ranges if isinstance(ranges, CodepointSet) else CodepointSet(ranges)
    return _json_lower(cps)


@lru_cache(maxsize=4096)
def _json_lower(cps: CodepointSet) -> Expr:
    if not cps:
        return NOTHING
    raw = cps.difference(_NOT_RAW).to_ir() if cps.difference(_NOT_RAW) else NOTHING
    short = byte_class(esc[0] for cp, esc in _SHORT_ESCAPES.items() if cp in cps)
    bmp = alt(*(_hex_range(lo, min(hi, 0xFFFF), 4) for lo, hi in cps.ranges if lo <= 0xFFFF))
    pairs = alt(*(_surrogate_pairs(max(lo, 0x10000), hi) for lo, hi in cps.ranges if hi >= 0x10000))
    escaped = alt(short, seq(literal(b"u"), alt(bmp, pairs)))
    return alt(raw, seq(literal(b"\\"), escaped))


def _surrogate_pairs(lo: int, hi: int) -> Expr:
    """``XXXX\\uYYYY`` (after a first ``\\u``) for the code points lo..hi above U+FFFF."""
    ha, la = divmod(lo - 0x10000, 0x400)
    hb, lb = divmod(hi - 0x10000, 0x400)
    pieces = [(ha, ha, la, lb)] if ha == hb else [(ha, ha, la, 0x3FF), (hb, hb, 0, lb)]
    if hb - ha >= 2:
        pieces.append((ha + 1, hb - 1, 0, 0x3FF))
    return alt(
        *(
            seq(_hex_range(0xD800 + h1, 0xD800 + h2, 4), literal(b"\\u"), _hex_range(0xDC00 + l1, 0xDC00 + l2, 4))
            for h1, h2, l1, l2 in pieces
        )
    )


#: One code point, any JSON spelling.
JSON_CHAR = json_codepoint_set_to_ir(ALL_CODEPOINTS)
_ANY_STRING = seq(QUOTE, repeat(JSON_CHAR, 0, None), QUOTE)


def json_key_excluding(names: Iterable[str]) -> Expr:
    """Every JSON string literal (quotes included) whose decoded value is none of ``names``,
    as one Machine leaf: the minimal DFA of any string less every spelling of the names
    (a product of their DFAs). Names with a lone surrogate are dropped: no string of this
    language decodes to one.

    An undeclared member's key is written at every place a member may go. As an expression
    it spells each name character in every JSON escape (five names: 1,809 NFA states
    against 151 DFA states), so each copy cost the NFA's states and the rule around it
    determinised over large state sets; as an automaton each copy costs the DFA's states,
    and the rule determinises in about half the time.

    >>> from gramc.compiler.regular import matches
    >>> key = json_key_excluding(["ab"])
    >>> [matches(key, t) for t in (b'"ab"', b'"a\\\\u0062"', b'"a"', b'"abc"', b'"b"', b'""')]
    [False, False, True, True, True, True]
    """
    return _key_excluding(tuple(sorted({n for n in names if not any(0xD800 <= ord(c) <= 0xDFFF for c in n)})))


@lru_cache(maxsize=1024)
def _key_excluding(names: tuple[str, ...]) -> Expr:
    """:func:`json_key_excluding` of sorted names (an object reached through several
    ``$ref`` paths asks again for the same names)."""
    return combine(dfa_of(_ANY_STRING), names_dfa(names), False, DEFAULT_LIMITS, as_machine=True)


def names_dfa(names: Iterable[str]) -> DFATable:
    """A DFA of every JSON spelling of the quoted ``names`` (none with a lone surrogate):
    the language of ``alt(*(string_literal_ir(n, all_spellings=True) for n in names))``,
    built directly. A state between two characters is a node of the names' trie; from it,
    the spellings of each next character (:func:`~gramc.schemas.jsontext.char_spellings`)
    share their leading bytes (``\\u00``) and end at the child's node. Spellings are a
    prefix code, so this is deterministic. Through the Thompson NFA and a subset
    construction the same DFA took 1.4 ms for seven property names."""
    trans: list[dict[int, int]] = [{}, {}]  # 0 dead, 1 start
    final = 2
    trans.append({})
    between: dict[tuple[int, str], int] = {}  # (node, next character) -> the child's node

    def new_state() -> int:
        trans.append({})
        return len(trans) - 1

    root = trans[1][0x22] = new_state()
    for name in names:
        node = root
        for ch in name:
            child = between.get((node, ch))
            if child is None:
                child = between[(node, ch)] = new_state()
                for spelling in char_spellings(ch):
                    state, hex_escape = node, spelling[:2] == b"\\u"
                    for i, b in enumerate(spelling):
                        last = i == len(spelling) - 1
                        nxt = trans[state].get(b)
                        if nxt is None:
                            nxt = child if last else new_state()
                            trans[state][b] = nxt
                            if hex_escape and i % 6 >= 2 and 0x61 <= b <= 0x66:  # \uXXXX: either case
                                trans[state][b - 0x20] = nxt
                        state = nxt
            node = child
        trans[node][0x22] = final
    return dfa_from_transitions(trans, [state == final for state in range(len(trans))], start=1)


# ---------------------------------------------------------------- letters
#
# Patterns and formats are first parsed into "letter" IR: each leaf is a Token standing for
# one code point of a set (ids are negative and private to this module). Lengths are then
# applied at the code-point level, and the letters are finally replaced by their JSON spellings.


class _Letters:
    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self.sets: dict[int, CodepointSet] = {}
        self.ids: dict[CodepointSet, int] = {}

    def letter(self, cps: CodepointSet) -> Expr:
        if cps not in self.ids:
            self.ids[cps] = -1 - len(self.ids)
            self.sets[self.ids[cps]] = cps
        return Token(self.ids[cps])

    def pattern(self, pattern: str, keyword: str, search: bool) -> Expr:
        try:
            if search:
                return parse_regex_search(pattern, source_name=keyword, charset_to_ir=self.letter,
                                          limits=self.limits)
            return parse_regex(pattern, source_name=keyword, charset_to_ir=self.letter, limits=self.limits,
                               whole_text=True)
        except LimitExceededError:
            raise  # the caller's limit, not an inexpressible pattern: never approximated
        except GrammarSyntaxError as e:
            if _python_rejects(pattern):  # a second opinion before calling the schema invalid
                raise InvalidKeyword(keyword, f"{pattern!r} is not a valid regular expression ({e})") from e
            raise NotExpressible(keyword, str(e)) from e
        except GramcError as e:
            raise NotExpressible(keyword, str(e)) from e

    def to_json(self, expr: Expr) -> Expr:
        """Replace every letter by its JSON spellings."""
        return rewrite(expr, lambda n: json_codepoint_set_to_ir(self.sets[n.id]) if isinstance(n, Token) else None)


#: A length-restricted pattern whose expression passes this size (the structural rewrite
#: spreads the lengths over every split of the pattern's parts: ``[0-9a-f]+`` searched in 12
#: characters is 45,530) is built as one minimal automaton instead where that is small:
#: :func:`_length_machine`.
MACHINE_FIRST_SIZE = 4_096
#: Most states of a :func:`_length_machine`, and the longest length it is tried for (its
#: operand "lo..hi characters" has about 20 states per character).
MAX_MACHINE_STATES = 20_000
MAX_MACHINE_LENGTH = 1_000


@lru_cache(maxsize=64)
def _length_machine(body: Expr, lo: int, hi: int | None, limits: Limits) -> Expr | None:
    """The JSON string bodies of ``body`` with ``lo`` to ``hi`` code points, as the minimal
    DFA of the intersection (one :class:`~gramc.compiler.ir.Machine` leaf), or None where
    the lengths are too long to try or the DFA passes :data:`MAX_MACHINE_STATES` (memoised:
    a schema repeats its string leaves, and a product that fails costs up to 0.2 s)."""
    if max(lo, hi or 0) > MAX_MACHINE_LENGTH:
        return None
    try:
        return intersection_machine(body, repeat(JSON_CHAR, lo, hi), replace(limits, max_dfa_states=MAX_MACHINE_STATES))
    except LimitExceededError:
        return None


#: Most states (letter-DFA states times counts) of a :func:`_length_product`.
MAX_LENGTH_PRODUCT = 4_096


def _length_product(lang: Expr, letters: _Letters, lo: int, hi: int) -> Expr | None:
    """The words of ``lang`` (over letters) with ``lo`` to ``hi`` letters, by the product of
    its DFA over letters with a count: node ``(s, n)`` reads a letter and goes on to
    ``(t, n + 1)``; it accepts where ``s`` does and ``n >= lo``. Each letter is one code point
    whatever its set, so the count is the decoded length, exactly. The nodes are shared
    (a DAG the compiler turns into called rules), so the size grows with the DFA's states
    times ``hi``, not with the number of paths. None when that product would pass
    :data:`MAX_LENGTH_PRODUCT`."""
    dfa = dfa_of(rewrite(lang, lambda n: Token(-n.id) if isinstance(n, Token) else None))
    if (dfa.n_states - 1) * (hi + 1) > MAX_LENGTH_PRODUCT:
        return None
    nbc = dfa.n_byte_classes
    moves: list[list[tuple[int, Expr]]] = []
    for s in range(dfa.n_states):
        by_target: dict[int, CodepointSet] = {}
        for col, letter in enumerate(dfa.token_ids.tolist()):
            t = int(dfa.delta[s, nbc + col])
            if t:  # 0 is the dead state
                cps = letters.sets[-letter]
                by_target[t] = by_target[t] | cps if t in by_target else cps
        moves.append([(t, letters.letter(cps)) for t, cps in sorted(by_target.items())])
    after: dict[int, Expr] = {}  # the nodes of the count one higher
    for n in range(hi, -1, -1):
        here = {}
        for s in range(1, dfa.n_states):
            parts = [EMPTY] if dfa.accept[s] and n >= lo else []
            if n < hi:
                parts += [seq(letter, after[t]) for t, letter in moves[s] if after[t] is not NOTHING]
            here[s] = alt(*parts) if parts else NOTHING
        after = here
    return after[dfa.start] if dfa.start else NOTHING


class _TooHard(Exception):
    pass


class _LengthRestrictor:
    """Intersect a letter IR with "between lo and hi letters", structurally and exactly."""

    def __init__(self) -> None:
        self.lengths: dict[Expr, tuple[int, int | None]] = {}
        self.splits = 0

    def span(self, e: Expr) -> tuple[int, int | None]:
        """(fewest, most) letters of a string of e (most None: unbounded)."""
        for node in postorder(e):
            if node in self.lengths:
                continue
            r: tuple[int, int | None]
            if isinstance(node, Token):
                r = (1, 1)
            elif isinstance(node, (Seq, Alt)):
                spans = [self.lengths[c] for c in node.items]
                highs = [s[1] for s in spans if s[1] is not None]
                hi = None if len(highs) < len(spans) else sum(highs) if isinstance(node, Seq) else max(highs)
                lows = [s[0] for s in spans]
                r = (sum(lows) if isinstance(node, Seq) else min(lows), hi)
            elif isinstance(node, Repeat):
                lo, hi = self.lengths[node.item]
                if hi == 0:
                    r = (0, 0)
                else:
                    r = (lo * node.min, None if hi is None or node.max is None else hi * node.max)
            else:  # EMPTY
                r = (0, 0)
            self.lengths[node] = r
        return self.lengths[e]

    def restrict(self, e: Expr, lo: int, hi: int | None) -> Expr:
        lo = max(lo, 0)
        if e is NOTHING or (hi is not None and hi < lo):
            return NOTHING
        mn, mx = self.span(e)
        if (hi is not None and mn > hi) or (mx is not None and mx < lo):
            return NOTHING
        if mn >= lo and (hi is None or (mx is not None and mx <= hi)):
            return e
        if isinstance(e, Alt):
            return alt(*(self.restrict(i, lo, hi) for i in e.items))
        if isinstance(e, Repeat):
            imn, imx = self.span(e.item)
            if imn != imx:
                raise _TooHard
            k = imn  # > 0: a zero-length item would have made e fixed-length
            a = max(e.min, -(-lo // k))
            b = e.max if hi is None else (hi // k if e.max is None else min(e.max, hi // k))
            return NOTHING if b is not None and a > b else repeat(e.item, a, b)
        if isinstance(e, Seq):
            return self._seq(e.items, lo, hi)
        raise _TooHard

    def _seq(self, items: tuple[Expr, ...], lo: int, hi: int | None) -> Expr:
        i = 0
        while i < len(items) and self.span(items[i])[0] == self.span(items[i])[1]:
            i += 1
        head = seq(*items[:i])
        fixed = self.span(head)[0]
        v = items[i]
        rest = seq(*items[i + 1 :])
        lo2, hi2 = lo - fixed, None if hi is None else hi - fixed
        vmn, vmx = self.span(v)
        rmn, rmx = self.span(rest)
        if rmn == rmx:  # only v varies
            return seq(head, self.restrict(v, lo2 - rmn, None if hi2 is None else hi2 - rmn), rest)
        # v of length n leaves [lo2 - n, hi2 - n] for the rest; that is no constraint at all for
        # n in the "free" block, and each other n is written out on its own
        top = vmx if hi2 is None else (hi2 - rmn if vmx is None else min(vmx, hi2 - rmn))
        free_lo = max(vmn, lo2 - rmn)
        free_hi = top if hi2 is None else (None if rmx is None else hi2 - rmx)
        if free_hi is not None and top is not None:
            free_hi = min(free_hi, top)
        if hi2 is not None and rmx is None:
            free_lo, free_hi = 1, 0  # no free block: the rest is unbounded, hi2 binds it
        singles = []
        end = top if top is not None else free_lo - 1
        for n in range(vmn, end + 1):
            if not (free_lo <= n and (free_hi is None or n <= free_hi)):
                singles.append(n)
        self.splits += len(singles)
        if self.splits > MAX_LENGTH_SPLITS:
            raise _TooHard
        parts = []
        if free_hi is None or free_lo <= free_hi:
            parts.append(seq(self.restrict(v, free_lo, free_hi), rest))
        for n in singles:
            parts.append(seq(self.restrict(v, n, n), self.restrict(rest, lo2 - n, None if hi2 is None else hi2 - n)))
        return seq(head, alt(*parts))


# ---------------------------------------------------------------- the string leaf


def json_string_ir(
    min_length: int | None = None,
    max_length: int | None = None,
    pattern: str | None = None,
    format: str | None = None,
    *,
    allow_approximate_format: bool = False,
    exact_leap_seconds: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> Expr:
    """The complete JSON string literals (quotes included) whose decoded value satisfies
    ``minLength``/``maxLength`` (code points), ``pattern`` (ECMA-262, unanchored) and
    ``format`` (a name known to :mod:`gramc.schemas.formats`).

    Args:
        allow_approximate_format: use the over-approximation of a format gramc cannot check
            exactly (see :func:`gramc.schemas.formats.format_spec`) instead of raising; the
            caller is then responsible for warning about it.
        exact_leap_seconds: use the exact (large) ``time``/``date-time`` regex.
        limits: ``max_repeat`` bounds counted lengths and the pattern's ``{m,n}``,
            ``max_nesting`` the pattern's groups.

    Raises:
        NotExpressible: ``format`` is unknown or only approximate (keyword ``format``); the
            pattern uses something the regex frontend refuses, or does not parse
            (``pattern``); a pattern and a format together (``format``); a ``maxLength``
            above :data:`MAX_COUNTED_MAX_LENGTH`, a ``minLength`` alone above
            :data:`MAX_COUNTED_LENGTH`, or lengths that cannot be combined with the
            pattern/format compactly (``minLength``, ``maxLength`` or ``minLength/maxLength``).
        ValueError: a length that is not a non-negative integer.
        LimitExceededError: a counted length or the pattern exceeds ``limits``.

    >>> print(json_string_ir(min_length=1, max_length=2, pattern="^[a-c]+$"))
    "\\"" ([a-c] | "\\\\u006" [1-3]){1,2} "\\""
    """
    for name, value in (("minLength", min_length), ("maxLength", max_length)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
            bound = MAX_COUNTED_LENGTH if max_length is None else MAX_COUNTED_MAX_LENGTH
            if value > bound:
                alone = " without a maxLength" if max_length is None else ""
                raise NotExpressible(name, f"{value} is above the largest counted length{alone} {bound}")
            limits.check("max_repeat", value, name)
    lo, hi = min_length or 0, max_length
    letters = _Letters(limits)
    branches = None if pattern is None else split_lookaheads(pattern)
    if branches is not None:
        if format is not None:
            raise NotExpressible("format", "a format together with a pattern cannot be intersected exactly")
        return seq(QUOTE, _lookahead_body(branches, letters, min_length, max_length, limits), QUOTE)
    lang = None
    if format is not None:
        regex = format_pattern(
            format, allow_approximate=allow_approximate_format, exact_leap_seconds=exact_leap_seconds
        )
        if regex is None:
            spec = format_spec(format, exact_leap_seconds=exact_leap_seconds)
            reason = (
                f"format {format!r} is only approximated ({spec.note})"
                if spec is not None
                else f"format {format!r} is not enforced (unknown to gramc)"
            )
            raise NotExpressible("format", reason)
        lang = letters.pattern(regex, "format", search=False)
    if pattern is not None:
        searched = letters.pattern(pattern, "pattern", search=True)
        if lang is None:
            lang = searched
        else:
            raise NotExpressible(
                "format", "a format together with a pattern cannot be intersected exactly"
            )
    if lang is None:
        body = repeat(JSON_CHAR, lo, hi) if hi is None or lo <= hi else NOTHING
    elif not lo and hi is None:
        body = letters.to_json(lang)
    else:
        try:
            restricted: Expr | None = letters.to_json(_LengthRestrictor().restrict(lang, lo, hi))
        except _TooHard:
            restricted = None
        if restricted is None or expanded_size(restricted) > MACHINE_FIRST_SIZE:
            automaton = _length_machine(letters.to_json(lang), lo, hi, limits)
            if automaton is not None:
                return seq(QUOTE, automaton, QUOTE)
        if restricted is None:
            what = "format" if pattern is None else "pattern"
            product = None if hi is None else _length_product(lang, letters, lo, hi)
            if product is None:
                raise NotExpressible(
                    _length_keyword(min_length, max_length),
                    f"the length limits cannot be combined compactly with the {what}",
                )
            return seq(QUOTE, letters.to_json(product), QUOTE)  # shared nodes: not a tree to measure
        body = restricted
    size = 0 if lang is None else expanded_size(body)  # plain lengths: one counted repeat
    if size > MAX_STRING_SIZE:
        if lo or hi is not None:
            keyword = _length_keyword(min_length, max_length)
        else:
            keyword = "pattern" if pattern is not None else "format"
        raise TooLarge(keyword, f"the string automaton would need {size} states (limit {MAX_STRING_SIZE})")
    return seq(QUOTE, body, QUOTE)


def raw_string_ir(
    min_length: int | None = None,
    max_length: int | None = None,
    pattern: str | None = None,
    *,
    limits: Limits = DEFAULT_LIMITS,
) -> Expr:
    """The texts themselves (UTF-8, no quotes, no escapes) of the strings that satisfy
    ``minLength``/``maxLength`` (code points) and ``pattern`` (ECMA-262, unanchored): string
    values as tool-call formats write them raw between XML tags.

    Raises:
        NotExpressible: the pattern does not parse or uses what the regex frontend refuses,
            opens with a lookahead, or cannot be combined with the lengths compactly.
        ValueError: a length that is not a non-negative integer.
        LimitExceededError: a length or the pattern exceeds ``limits``.

    >>> print(raw_string_ir(max_length=2, pattern="^[a-c]+$"))
    [a-c]{1,2}
    """
    for name, value in (("minLength", min_length), ("maxLength", max_length)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
            limits.check("max_repeat", value, name)
    lo, hi = min_length or 0, max_length
    if pattern is None:
        return repeat(ALL_CODEPOINTS.to_ir(), lo, hi) if hi is None or lo <= hi else NOTHING
    if split_lookaheads(pattern) is not None:
        raise NotExpressible("pattern", "a lookahead in the pattern of a raw string value")
    letters = _Letters(limits)
    lang = letters.pattern(pattern, "pattern", search=True)
    if lo or hi is not None:
        try:
            lang = _LengthRestrictor().restrict(lang, lo, hi)
        except _TooHard:
            raise NotExpressible(_length_keyword(min_length, max_length),
                                 "the length limits cannot be combined compactly with the pattern") from None
    return rewrite(lang, lambda n: letters.sets[n.id].to_ir() if isinstance(n, Token) else None)


def relaxed_pattern_ir(pattern: str, limits: Limits = DEFAULT_LIMITS) -> tuple[Expr, list[str]]:
    """A smaller over-approximation of ``pattern``'s strings, for a pattern whose exact
    automaton is too large (:class:`~gramc.schemas.approx.TooLarge`): its bounded
    repetitions, costliest first, lose their upper bound (``x{1,200}`` becomes ``x+``,
    ``x{0,9}`` becomes ``x*``) until the automaton fits. What the pattern says about which
    characters may appear where is kept, so ``^[A-Za-z]{1,200}$`` still refuses ``""`` and
    ``"a b"``. Returns the string literal IR and the relaxed repetitions, in words.

    Raises:
        NotExpressible: the pattern has lookaheads, or does not fit even with every
            repetition relaxed.
    """
    if split_lookaheads(pattern) is not None:
        raise NotExpressible("pattern", "a pattern with lookaheads is not relaxed")
    letters = _Letters(limits)
    lang = letters.pattern(pattern, "pattern", search=True)
    relaxed: list[str] = []
    while True:
        body = letters.to_json(lang)
        size = expanded_size(body)
        if size <= MAX_STRING_SIZE:
            return seq(QUOTE, body, QUOTE), relaxed
        counted = [n for n in postorder(lang)
                   if isinstance(n, Repeat) and n.max is not None and n.max > max(n.min, 1)]
        if not counted:
            raise NotExpressible("pattern", f"the string automaton would need {size} states (limit "
                                            f"{MAX_STRING_SIZE}) even with its repetitions unbounded")
        costs = [(n.max or 0) * expanded_size(letters.to_json(n.item)) for n in counted]
        costliest = counted[costs.index(max(costs))]
        loose = repeat(costliest.item, min(costliest.min, 1), None)
        swap: dict[Expr, Expr] = {costliest: loose}
        lang = rewrite(lang, swap.get)
        relaxed.append(f"{{{costliest.min},{costliest.max}}} as {{{min(costliest.min, 1)},}}")


def _lookahead_body(branches: list[Branch], letters: _Letters, min_length: int | None, max_length: int | None,
                    limits: Limits) -> Expr:
    """The JSON string body (between the quotes) of a pattern whose alternatives open with
    lookaheads (:mod:`gramc.schemas.lookahead`), within the lengths: products of automata
    over JSON spellings, exact because every spelling decodes to one value, so a language of
    values and its spellings agree on intersections and differences."""

    def searched(piece: str) -> Expr:
        return letters.to_json(letters.pattern(piece, "pattern", search=True))

    lo, hi = min_length or 0, max_length
    if hi is not None and lo > hi:
        return NOTHING
    body = lookahead_language(branches, searched, JSON_CHAR, limits)
    if lo or hi is not None:
        try:
            body = intersection(body, repeat(JSON_CHAR, lo, hi), limits)
        except LimitExceededError as err:
            raise NotExpressible(_length_keyword(min_length, max_length),
                                 f"the length limits cannot be combined compactly with the pattern ({err})") from None
    size = expanded_size(body)
    if size > MAX_STRING_SIZE:
        raise TooLarge("pattern", f"the string automaton would need {size} states (limit {MAX_STRING_SIZE})")
    return body


@lru_cache(maxsize=64)
def format_ir(name: str, *, allow_approximate: bool = False, exact_leap_seconds: bool = False) -> Expr | None:
    """The IR of the JSON string BODY (between the quotes, every JSON spelling) whose decoded
    value is in format ``name``; None for unknown formats and (unless ``allow_approximate``)
    for formats gramc can only over-approximate (see
    :func:`~gramc.schemas.formats.format_pattern`).

    >>> format_ir("uuid") is not None, format_ir("idn-email"), format_ir("hostname")
    (True, None, None)
    >>> format_ir("hostname", allow_approximate=True) is not None
    True
    """
    if format_pattern(name, allow_approximate=allow_approximate, exact_leap_seconds=exact_leap_seconds) is None:
        return None
    full = json_string_ir(
        format=name, allow_approximate_format=allow_approximate, exact_leap_seconds=exact_leap_seconds
    )
    assert isinstance(full, Seq) and full.items[0] is QUOTE and full.items[-1] is QUOTE
    return seq(*full.items[1:-1])


def _python_rejects(pattern: str) -> bool:
    """Python's ``re`` cannot compile the pattern either (its syntax is close to ECMA-262's)."""
    import re

    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError):
        return True
    return False


def _length_keyword(min_length, max_length) -> str:
    if min_length is not None and max_length is not None:
        return "minLength/maxLength"
    return "maxLength" if max_length is not None else "minLength"
