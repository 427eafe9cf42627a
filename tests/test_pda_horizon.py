"""Horizon classes: nodes that share a representative read the same strings up to the depth.

The claim is checked on the PDA's own semantics, independently of the refinement: from the
configuration of a node and of its representative (same continuation), every byte string of
up to ``depth`` bytes is stepped through the stack DFA, and both must stay alive, die and be
able to return together. The masks of lazy tables, which are memoised by canonical key, are
compared with the Earley oracle at every position of a counted repetition.
"""

from __future__ import annotations

import numpy as np
import pytest

from earley import EarleyOracle
from gramc.automata.tables import DEAD
from gramc.runtime.earley import TOP
from gramc.runtime.pda_horizon import Horizon, horizon_representatives
from gramc.runtime.pda_stack_dfa import StackDFA
from test_pda import GRAMMARS, make_vocab, oracle_mask, pda_artifact


def _returns(stack: StackDFA, state: int, k: int) -> bool:
    """Can the configurations of ``state`` return to the continuation ``k`` now?"""
    return any(stack._accept[n] and kk == k for n, kk in stack._states[state])


def _agree(stack: StackDFA, a: int, b: int, k: int, depth: int) -> bool:
    """Do nodes ``a`` and ``b``, both on continuation ``k``, read the same byte strings of up
    to ``depth`` bytes (alive, dead, able to return: the same after each)?"""
    pairs = {(stack._entry(a, k), stack._entry(b, k))}
    for _ in range(depth + 1):
        nxt = set()
        for sa, sb in pairs:
            if (sa == DEAD) != (sb == DEAD) or _returns(stack, sa, k) != _returns(stack, sb, k):
                return False
            if sa == DEAD:
                continue
            for c in range(stack.n_classes):
                for s in (sa, sb):
                    if stack._trans[s, c] < 0:
                        stack._build_all([(s, c)])
                nxt.add((int(stack._trans[sa, c]), int(stack._trans[sb, c])))
        pairs = nxt
    return True


@pytest.mark.parametrize("name", sorted(n for n in GRAMMARS if n != "left_recursive_sum"))
@pytest.mark.parametrize("depth", [1, 2, 4])
def test_nodes_agree_with_their_representative_up_to_the_depth(name, depth):
    table = pda_artifact(GRAMMARS[name], make_vocab(), lazy=True).token_table
    stack = StackDFA(table.table, table.parser, table.token_bytes)
    k = table.parser.intern(frozenset((TOP,)))
    rep = horizon_representatives(table.table, depth)
    for v in range(1, table.table.n_nodes):
        assert _agree(stack, v, int(rep[v]), k, depth), (name, v, int(rep[v]))


def test_far_positions_of_a_counted_repetition_share_one_class():
    """Positions at least ``depth`` items before the end agree; the last ones do not (each
    item reads a byte at least, and the end is a byte away)."""
    table = pda_artifact(GRAMMARS["counted"], make_vocab(), lazy=True).token_table
    parser = table.parser
    chart = parser.initial()
    positions = []
    for b in b"[" + b"a" * 12:
        chart = parser.feed(chart, bytes([b]))
        positions.append(next(n for n, _ in chart[-1].items if table.parser.byte_next[n][parser.cls[ord("]")]]))
    for depth in (2, 4):
        rep = horizon_representatives(table.table, depth)
        far = {int(rep[n]) for n in positions[: 13 - depth]}
        near = [int(rep[n]) for n in positions[13 - depth:]]
        assert len(far) == 1
        assert len(set(near)) == depth and far.isdisjoint(near)


@pytest.mark.parametrize("name", ["counted", "counted_calls"])
def test_masks_at_every_position_of_a_counted_repetition_equal_the_oracle(name):
    """Lazy masks are walked once per canonical key; at each position of the repetition (and
    one level of nesting down) they equal the oracle's, the vocabulary's longest token
    ``aaaa`` telling the last four positions apart."""
    g = GRAMMARS[name]
    vocab = make_vocab([b"aaaa"])
    oracle = EarleyOracle(g)
    art = pda_artifact(g, vocab, lazy=True)
    for prefix in (b"[", b"(["):
        m, chart = art.matcher(), oracle.initial()
        for i, b in enumerate(prefix + b"a" * 12):
            assert m.commit_bytes(bytes([b]))
            chart = oracle.feed(chart, [b])
            assert np.array_equal(m.mask(), oracle_mask(oracle, chart, vocab)), (prefix, i)
    horizon = art.token_table._horizon
    assert isinstance(horizon, Horizon) and horizon.merges
    assert len(art.token_table._walks) < len(art.token_table._memo)
