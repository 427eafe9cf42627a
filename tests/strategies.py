"""Hypothesis strategies shared by the tests: random IR expressions, small vocabularies."""

from __future__ import annotations

from hypothesis import strategies as st

from gramc.compiler.ir import Expr, alt, byte_class, literal, repeat, seq

#: A small alphabet keeps random strings likely to hit the language.
ALPHABET = b"abc\x00\xff"


def byte_classes() -> st.SearchStrategy[Expr]:
    return st.sets(st.sampled_from(list(ALPHABET)), min_size=1, max_size=3).map(byte_class)


def exprs(max_leaves: int = 12) -> st.SearchStrategy[Expr]:
    """Random rule-free IR expressions over :data:`ALPHABET`."""
    leaves = st.one_of(
        byte_classes(),
        st.binary(min_size=0, max_size=3).map(lambda b: literal(bytes(ALPHABET[x % len(ALPHABET)] for x in b))),
    )

    def extend(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        bounds = st.tuples(st.integers(0, 2), st.one_of(st.none(), st.integers(0, 3)))
        return st.one_of(
            st.lists(children, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
            st.lists(children, min_size=2, max_size=3).map(lambda xs: alt(*xs)),
            st.tuples(children, bounds).map(
                lambda t: repeat(t[0], t[1][0], None if t[1][1] is None else max(t[1][0], t[1][1]))
            ),
        )

    return st.recursive(leaves, extend, max_leaves=max_leaves)


def strings(max_size: int = 8) -> st.SearchStrategy[bytes]:
    return st.lists(st.sampled_from(list(ALPHABET)), max_size=max_size).map(bytes)


def small_vocabs() -> st.SearchStrategy[list[bytes]]:
    """Lists of distinct non-empty tokens over :data:`ALPHABET` (always all single bytes)."""
    singles = [bytes([b]) for b in ALPHABET]
    return st.lists(st.binary(min_size=2, max_size=4).map(
        lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b)), max_size=12, unique=True
    ).map(lambda extra: singles + [t for t in extra if t not in singles])
