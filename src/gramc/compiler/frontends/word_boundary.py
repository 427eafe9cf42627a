"""Word boundaries ``\\b`` and ``\\B``, compiled exactly into a regex's language.

A boundary is a condition on the characters on either side of a position: ``\\b`` holds
where exactly one of them is a word character, ``\\B`` where both or neither are (the start
and the end of the string count as non-word characters, in ECMA-262 as in Python's ``re``).
The regex parser lowers the pattern *symbolically* first: every character set becomes the
byte of its word part and the byte of its non-word part (one byte per distinct part), and
every boundary one marker byte of its own. The language over those symbols is intersected
with a small automaton that remembers whether the last character was a word character and
what a boundary demands of the next one; the product, back as IR, has the markers erased
and each symbol replaced by its real lowering (UTF-8 bytes, or every JSON spelling).

Where the text around the pattern is unknown (a Lark terminal, a ``Regex()`` of an EBNF
grammar: the characters before and after belong to other tokens), a boundary that looks
past the pattern's edge cannot be decided and is refused, naming its position.

>>> from gramc.compiler.ir import literal, byte_class, seq
>>> word, other, mark = 1 << 0x61, 1 << 0x20, 0x7E
>>> symbolic = seq(byte_class(b"a "), literal(b"~"), literal(b"a"))
>>> out = resolve(symbolic, word, other, {mark: Marker(0, False)}, {0x61: literal(b"a"), 0x20: literal(b" ")}, True)
>>> print(out)
" a"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gramc.compiler.ir import ALL_BYTES, EMPTY, Bytes, Expr, alt, machine
from gramc.compiler.passes import rewrite
from gramc.limits import DEFAULT_LIMITS
from gramc.compiler.regular import combine, dfa_of, intersection, is_empty

#: What the previous character was: a word character, a non-word one (or the start of the
#: string), or unknown (the pattern's start where the text before it is not known).
_WORD, _OTHER, _UNKNOWN = 0, 1, 2
#: What a boundary demands of the next character: nothing, a word or a non-word character.
_FREE, _NEED_WORD, _NEED_OTHER = 0, 1, 2


@dataclass(frozen=True)
class Marker:
    """One ``\\b`` (``negated``: ``\\B``) of the pattern, at ``offset``."""

    offset: int
    negated: bool


def resolve(symbolic: Expr, word: int, other: int, markers: Mapping[int, Marker],
            lowered: Mapping[int, Expr], edges_known: bool,
            refuse: Callable[[Marker], Exception] = lambda m: ValueError(m)) -> Expr:
    """The language of ``symbolic`` with its boundaries enforced, over real characters.

    Args:
        symbolic: the pattern over symbol bytes: the bytes of ``word`` (a mask) stand for word
            characters, those of ``other`` for non-word ones, those of ``markers`` for
            boundaries.
        lowered: the real IR of each character symbol.
        edges_known: the pattern is the whole text (its start and end are the string's);
            otherwise a boundary that depends on a character outside it raises
            ``refuse(marker)``.
    """
    if not edges_known:
        for byte, marker in markers.items():
            if not is_empty(intersection(symbolic, _constraint(word, other, markers, undecided=byte))):
                raise refuse(marker)
    # As a regular expression, not a Machine (which intersection() would give, the constraint
    # being one): the substitution below rewrites the expression's byte classes.
    out = combine(dfa_of(symbolic), dfa_of(_constraint(word, other, markers, undecided=None)), True, DEFAULT_LIMITS)

    def substitute(e: Expr) -> Expr | None:
        if not isinstance(e, Bytes):
            return None
        return alt(*(EMPTY if b in markers else lowered[b] for b in e.byte_values()))

    return rewrite(out, substitute)


def _constraint(word: int, other: int, markers: Mapping[int, Marker], undecided: int | None) -> Expr:
    """The symbol strings whose boundaries hold.

    States ``(last, need)``. With ``undecided`` set, the automaton instead accepts the
    strings where that marker meets an unknown side: placed before any character (the text
    before the pattern is unknown), or leaving a demand on the character after the pattern.
    """
    start_last = _OTHER if undecided is None else _UNKNOWN
    states = [(last, need, flagged) for last in (_WORD, _OTHER, _UNKNOWN)
              for need in (_FREE, _NEED_WORD, _NEED_OTHER) for flagged in (False, True)]
    index = {s: i for i, s in enumerate(states)}
    done = len(states)  # the undecided marker met an unknown side: anything may follow
    edges: list[list[tuple[int, int]]] = [[] for _ in range(done + 1)]
    accept = [False] * (done + 1)
    edges[done].append((ALL_BYTES, done))
    accept[done] = True
    for (last, need, flagged), q in index.items():
        if undecided is None:
            accept[q] = need != _NEED_WORD  # the end of the string is a non-word character
        else:
            accept[q] = flagged and need != _FREE
        for mask, kind in ((word, _WORD), (other, _OTHER)):
            if need == _FREE or need == (_NEED_WORD if kind == _WORD else _NEED_OTHER):
                edges[q].append((mask, index[(kind, _FREE, False)]))
        for byte, marker in markers.items():
            if last == _UNKNOWN:
                if byte == undecided:
                    edges[q].append((1 << byte, done))
                continue  # another marker at the unknown start: its own check
            # \b: the next character is of the other kind than the last; \B: of the same
            wanted = _NEED_WORD if (last == _WORD) == marker.negated else _NEED_OTHER
            if need in (_FREE, wanted):
                edges[q].append((1 << byte, index[(last, wanted, byte == undecided or (flagged and need == wanted))]))
    return machine(edges, accept, index[(start_last, _FREE, False)])
