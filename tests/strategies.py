"""Random test inputs shared by the tests: hypothesis strategies for IR expressions and small
vocabularies, and strings near given ones."""

from __future__ import annotations

import random

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


def mutants(strings: list[str], rng: random.Random, n: int) -> list[str]:
    """``n`` strings near ``strings``: a truncation, an inserted, deleted or replaced
    character (from the strings' own alphabet), or a prefix of one joined to a suffix of another."""
    alphabet = sorted({c for s in strings for c in s}) or ["a"]
    out = []
    for _ in range(n):
        s = list(rng.choice(strings))
        kind = rng.randrange(5)
        if kind == 0 and s:
            del s[rng.randrange(len(s))]
        elif kind == 1:
            s.insert(rng.randrange(len(s) + 1), rng.choice(alphabet))
        elif kind == 2 and s:
            s[rng.randrange(len(s))] = rng.choice(alphabet)
        elif kind == 3:
            s = s[:rng.randrange(len(s) + 1)]
        else:
            t = rng.choice(strings)
            s = s[:rng.randrange(len(s) + 1)] + list(t[rng.randrange(len(t) + 1):])
        out.append("".join(s))
    return out
