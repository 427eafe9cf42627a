"""Code-point sets, and their lowering to UTF-8 byte-sequence IR.

The IR is byte-level, so a set of Unicode code points (a regex class such as ``[é-ü]``, or
ECMAScript's ``.``) has to become an expression over bytes that matches exactly the UTF-8
encodings of the code points in the set, and no other byte string. :func:`codepoint_set_to_ir`
does that with the classic "utf8-ranges" split: a code-point range is cut at the boundaries
where the UTF-8 length changes (U+007F/U+0080, U+07FF/U+0800, U+FFFF/U+10000) and where a
continuation byte wraps, until every piece is a sequence of byte ranges; the pieces are then
merged into a small trie-shaped alternation.

Surrogates (U+D800..U+DFFF) are not encodable in UTF-8 (their three-byte "encodings"
``ED A0..BF xx`` are invalid UTF-8), so a :class:`CodepointSet` never contains them: they are
silently dropped from any range that spans them, and the complement of a set excludes them.
The lowered IR therefore accepts only well-formed UTF-8 (no overlong forms, no surrogates,
nothing above U+10FFFF, never the bytes C0, C1 or F5..FF).

>>> print(CodepointSet([(ord("a"), ord("c")), (0xE9, 0xE9)]).to_ir())
[a-c] | "\\xc3\\xa9"
>>> print(codepoint_set_to_ir([(0x80, 0x7FF)]))
[\\xc2-\\xdf] [\\x80-\\xbf]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import lru_cache

from gramc.compiler.ir import EMPTY, Expr, alt, byte_range, seq

MAX_CODEPOINT = 0x10FFFF
SURROGATE_LO, SURROGATE_HI = 0xD800, 0xDFFF

Range = tuple[int, int]
_LENGTH_LIMITS = (0x7F, 0x7FF, 0xFFFF)  # last code point of the 1-, 2- and 3-byte forms


class CodepointSet:
    """An immutable set of code points, stored as sorted, disjoint, non-adjacent ranges.

    The universe is U+0000..U+10FFFF without the surrogates (see the module docstring).

    >>> s = CodepointSet([(ord("a"), ord("z"))])
    >>> s.complement().complement() == s, ord("q") in s, len(s)
    (True, True, 26)
    """

    __slots__ = ("ranges",)

    def __init__(self, ranges: Iterable[Range] = ()):
        self.ranges: tuple[Range, ...] = _normalise(ranges)

    @classmethod
    def of(cls, *chars: str | int) -> CodepointSet:
        """The set of the given characters (or code points)."""
        cps = [c if isinstance(c, int) else ord(c) for c in chars]
        return cls((c, c) for c in cps)

    def __contains__(self, cp: object) -> bool:
        return isinstance(cp, int) and any(lo <= cp <= hi for lo, hi in self.ranges)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __len__(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CodepointSet) and self.ranges == other.ranges

    def __hash__(self) -> int:
        return hash(self.ranges)

    def __repr__(self) -> str:
        body = ", ".join(f"(0x{lo:X}, 0x{hi:X})" for lo, hi in self.ranges)
        return f"CodepointSet([{body}])"

    def __or__(self, other: CodepointSet) -> CodepointSet:
        return self.union(other)

    def __and__(self, other: CodepointSet) -> CodepointSet:
        return self.intersection(other)

    def union(self, other: CodepointSet) -> CodepointSet:
        """Code points in either set."""
        return CodepointSet(self.ranges + other.ranges)

    def intersection(self, other: CodepointSet) -> CodepointSet:
        """Code points in both sets."""
        return CodepointSet(_intersect(self.ranges, other.ranges))

    def complement(self) -> CodepointSet:
        """Every encodable code point (U+0000..U+10FFFF minus surrogates) not in the set."""
        return CodepointSet(_gaps(self.ranges))

    def difference(self, other: CodepointSet) -> CodepointSet:
        """Code points in this set and not in ``other``."""
        return self.intersection(other.complement())

    def to_ir(self) -> Expr:
        """The IR matching the UTF-8 encoding of exactly one code point of the set."""
        return _lower(self.ranges)


def codepoint_set_to_ir(ranges: Iterable[Range]) -> Expr:
    """Lower a set of code-point ranges to IR over UTF-8 bytes.

    Args:
        ranges: inclusive ``(lo, hi)`` pairs in 0..0x10FFFF, in any order, possibly
            overlapping. Surrogates are dropped (they have no UTF-8 encoding).

    Returns:
        An expression matching exactly the UTF-8 encodings of the code points in the set
        (:data:`~gramc.compiler.ir.NOTHING` for an empty set).

    Raises:
        ValueError: a range is reversed or outside 0..0x10FFFF.
    """
    return _lower(_normalise(ranges))


# ---------------------------------------------------------------- range arithmetic


def _normalise(ranges: Iterable[Range]) -> tuple[Range, ...]:
    checked = sorted(_check(lo, hi) for lo, hi in ranges)
    merged: list[list[int]] = []
    for lo, hi in checked:
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple(piece for lo, hi in merged for piece in _cut_surrogates(lo, hi))


def _check(lo: int, hi: int) -> Range:
    if not 0 <= lo <= hi <= MAX_CODEPOINT:
        raise ValueError(f"bad code-point range ({lo:#x}, {hi:#x})")
    return (lo, hi)


def _cut_surrogates(lo: int, hi: int) -> list[Range]:
    pieces = [(lo, min(hi, SURROGATE_LO - 1)), (max(lo, SURROGATE_HI + 1), hi)]
    return [(a, b) for a, b in pieces if a <= b]


def _intersect(a: tuple[Range, ...], b: tuple[Range, ...]) -> list[Range]:
    out: list[Range] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _gaps(ranges: tuple[Range, ...]) -> list[Range]:
    out: list[Range] = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODEPOINT:
        out.append((nxt, MAX_CODEPOINT))
    return out


# ---------------------------------------------------------------- UTF-8 lowering

ByteSeq = tuple[Range, ...]  # one byte range per byte of the encoding


@lru_cache(maxsize=1024)
def _lower(ranges: tuple[Range, ...]) -> Expr:
    return _build_trie([s for lo, hi in ranges for s in utf8_sequences(lo, hi)])


def utf8_sequences(lo: int, hi: int) -> Iterator[ByteSeq]:
    """The byte-range sequences whose union encodes the code points ``lo..hi``, ascending.

    ``lo..hi`` must not contain surrogates.

    >>> [[f"{a:02X}-{b:02X}" for a, b in s] for s in utf8_sequences(0x7E, 0x800)]
    [['7E-7F'], ['C2-DF', '80-BF'], ['E0-E0', 'A0-A0', '80-80']]
    """
    stack = [(lo, hi)]
    while stack:
        lo, hi = stack.pop()
        halves = _split(lo, hi)
        if halves is None:
            yield tuple(zip(chr(lo).encode(), chr(hi).encode()))
        else:
            stack.extend(reversed(halves))


def _split(lo: int, hi: int) -> tuple[Range, Range] | None:
    """Cut ``lo..hi`` once, or None when it already is one sequence of byte ranges."""
    for limit in _LENGTH_LIMITS:
        if lo <= limit < hi:
            return (lo, limit), (limit + 1, hi)
    if hi <= 0x7F:
        return None
    for i in (1, 2, 3):
        m = (1 << (6 * i)) - 1  # the code-point bits held by the last i continuation bytes
        if lo & ~m == hi & ~m:
            continue
        if lo & m:
            return (lo, lo | m), ((lo | m) + 1, hi)
        if hi & m != m:
            return (lo, (hi & ~m) - 1), (hi & ~m, hi)
    return None


def _build_trie(seqs: list[ByteSeq]) -> Expr:
    """Factor common leading byte ranges, then merge heads whose continuations are equal."""
    groups: dict[Range, list[ByteSeq]] = {}
    for s in seqs:
        groups.setdefault(s[0], []).append(s[1:])
    heads_by_tail: dict[Expr, list[Range]] = {}
    for head, rests in groups.items():
        tail = EMPTY if rests[0] == () else _build_trie(rests)
        heads_by_tail.setdefault(tail, []).append(head)
    return alt(*(seq(_byte_ranges(heads), tail) for tail, heads in heads_by_tail.items()))


def _byte_ranges(heads: list[Range]) -> Expr:
    return alt(*(byte_range(lo, hi) for lo, hi in heads))


# ---------------------------------------------------------------- class data

#: ECMAScript ``\d``: ASCII digits.
ECMA_DIGIT = CodepointSet([(0x30, 0x39)])
#: ECMAScript ``\w``: ASCII letters, digits and underscore.
ECMA_WORD = CodepointSet([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
#: ECMAScript LineTerminator: LF, CR, U+2028, U+2029 (what ``.`` excludes).
ECMA_LINE_TERMINATORS = CodepointSet([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])
#: ECMAScript ``\s``: WhiteSpace (TAB, VT, FF, U+FEFF, every Zs) plus LineTerminator.
ECMA_SPACE = CodepointSet(
    [
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ]
)
#: Every encodable code point.
ALL_CODEPOINTS = CodepointSet([(0, MAX_CODEPOINT)])
#: ASCII letters, the only letters that ``(?i)`` folds.
ASCII_LETTERS = CodepointSet([(0x41, 0x5A), (0x61, 0x7A)])


def ascii_case_closure(cps: CodepointSet) -> CodepointSet:
    """``cps`` plus the other case of every ASCII letter in it (non-ASCII is left alone)."""
    letters = cps & ASCII_LETTERS
    swapped = [(lo ^ 0x20, hi ^ 0x20) for lo, hi in letters.ranges]
    return cps | CodepointSet(swapped)
