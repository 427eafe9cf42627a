"""The PDA table: one DFA per grammar rule, stacked, its reads dense and its calls sparse.

A grammar with recursion becomes a recursive transition network. Each rule's body is a
minimal DFA over byte classes, special tokens and *calls* (taking one enters the called rule
and continues at the target when that rule returns). The DFAs of all rules share one state
space, whose states are called *nodes*: node 0 is dead, and every other node belongs to one
rule (``node_rule``). A node is ``accept`` when its rule may return there.

Reads are a dense table (a row per node, a column per byte class and special token). Calls
are a sparse list per node: a node calls a few of the grammar's rules, and a column per rule
would make the table nodes x rules (a schema of 1,855 rules and 85,000 nodes: 650 MB).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from gramc.automata.tables import DEAD


@dataclass(frozen=True, eq=False)
class PDATable:
    """A recursive transition network as arrays.

    Attributes:
        delta: int32 ``[N, B + T]``: the next node by byte class, then by special token
            (``token_ids``).
        byte_class: uint8 ``[256]``.
        token_ids: int32 ``[T]`` ascending.
        accept: bool ``[N]``: the node's rule may return here.
        node_rule: int32 ``[N]``: the rule of each node (-1 for the dead node).
        rule_start: int32 ``[R]``: the first node of each rule.
        start_rule: the grammar's start rule.
        rule_names: the rule names (for messages and ``inspect``).
        call_indptr: int64 ``[N + 1]``: node ``n``'s calls are entries
            ``call_indptr[n] .. call_indptr[n + 1] - 1`` of the two arrays below, by rule.
        call_rule: int32 ``[E]``: the rule each call enters.
        call_return: int32 ``[E]``: the node of the caller's rule where it goes on once the
            called rule returns.
    """

    delta: np.ndarray
    byte_class: np.ndarray
    token_ids: np.ndarray
    accept: np.ndarray
    node_rule: np.ndarray
    rule_start: np.ndarray
    start_rule: int
    rule_names: tuple[str, ...]
    call_indptr: np.ndarray
    call_rule: np.ndarray
    call_return: np.ndarray
    _derived: dict = field(default_factory=dict, repr=False)

    @property
    def n_nodes(self) -> int:
        return int(self.delta.shape[0])

    @property
    def n_rules(self) -> int:
        return int(self.rule_start.shape[0])

    @property
    def n_byte_classes(self) -> int:
        return int(self.delta.shape[1]) - len(self.token_ids)

    def call_entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The calls as arrays: (node, rule, return node), by node then rule."""
        if "call_entries" not in self._derived:
            nodes = np.repeat(np.arange(self.n_nodes, dtype=np.int64), np.diff(self.call_indptr))
            self._derived["call_entries"] = (nodes, self.call_rule.astype(np.int64), self.call_return.astype(np.int64))
        return self._derived["call_entries"]

    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every transition as arrays (source, target, called rule), the reads (called rule
        -1) by node and column, then the calls (target: the return node) by node and rule."""
        src, col = np.nonzero(self.delta != DEAD)
        dst = self.delta[src, col].astype(np.int64)
        nodes, rules, rets = self.call_entries()
        return (np.concatenate([src, nodes]), np.concatenate([dst, rets]),
                np.concatenate([np.full(len(src), -1, dtype=np.int64), rules]))

    def calls(self) -> list[tuple[tuple[int, int], ...]]:
        """Per node: its (rule, return node) pairs."""
        if "calls" not in self._derived:
            out = [() for _ in range(self.n_nodes)]
            for n, r, ret in zip(*(a.tolist() for a in self.call_entries())):
                out[n] += ((r, ret),)
            self._derived["calls"] = out
        return self._derived["calls"]

    def nullable(self) -> np.ndarray:
        """Per rule: can it return without reading anything?"""
        if "nullable" not in self._derived:
            null = np.zeros(self.n_rules, dtype=bool)
            calls = self.calls()
            changed = True
            while changed:
                changed = False
                for r in range(self.n_rules):
                    if not null[r] and self._reaches_accept(int(self.rule_start[r]), calls, null):
                        null[r] = changed = True
            self._derived["nullable"] = null
        return self._derived["nullable"]

    def left_recursive(self) -> bool:
        """Can some rule call itself before reading anything (directly or through others)?"""
        if "left_recursive" not in self._derived:
            calls, null = self.calls(), self.nullable()
            first: list[set[int]] = []  # per rule: the rules it may call before reading
            for r in range(self.n_rules):
                called, seen, todo = set(), {int(self.rule_start[r])}, [int(self.rule_start[r])]
                while todo:
                    for r2, ret in calls[todo.pop()]:
                        called.add(r2)
                        if null[r2] and ret not in seen:
                            seen.add(ret)
                            todo.append(ret)
                first.append(called)
            self._derived["left_recursive"] = _has_cycle(first)
        return self._derived["left_recursive"]

    def _reaches_accept(self, node: int, calls, null: np.ndarray) -> bool:
        seen, todo = {node}, [node]
        while todo:
            n = todo.pop()
            if self.accept[n]:
                return True
            for r, ret in calls[n]:
                if null[r] and ret not in seen:
                    seen.add(ret)
                    todo.append(ret)
        return False

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "delta": self.delta,
            "byte_class": self.byte_class,
            "token_ids": self.token_ids,
            "accept": self.accept,
            "node_rule": self.node_rule,
            "rule_start": self.rule_start,
            "call_indptr": self.call_indptr,
            "call_rule": self.call_rule,
            "call_return": self.call_return,
        }


def _has_cycle(edges: list[set[int]]) -> bool:
    """Does the directed graph ``edges`` (successors per vertex) have a cycle? (iterative DFS)"""
    state = [0] * len(edges)  # 0 unvisited, 1 on the current path, 2 finished
    for root in range(len(edges)):
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, iter(edges[root]))]
        while stack:
            v, it = stack[-1]
            w = next(it, None)
            if w is None:
                state[v] = 2
                stack.pop()
            elif state[w] == 1:
                return True
            elif state[w] == 0:
                state[w] = 1
                stack.append((w, iter(edges[w])))
    return False


class Calls(TypedDict):
    """The call arrays of a :class:`PDATable`, as keyword arguments."""

    call_indptr: np.ndarray
    call_rule: np.ndarray
    call_return: np.ndarray


def no_calls(n_nodes: int) -> Calls:
    """The call arrays of a table of ``n_nodes`` nodes that call nothing."""
    return Calls(call_indptr=np.zeros(n_nodes + 1, dtype=np.int64), call_rule=np.zeros(0, dtype=np.int32),
                 call_return=np.zeros(0, dtype=np.int32))
