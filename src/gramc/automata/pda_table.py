"""The dense PDA table: one DFA per grammar rule, stacked, with rule-call columns.

A grammar with recursion becomes a recursive transition network. Each rule's body is a
minimal DFA over byte classes, special tokens and *calls* (one column per rule: taking it
enters the called rule and continues at the target when that rule returns). The DFAs of all
rules share one state space, whose states are called *nodes*: node 0 is dead, and every other
node belongs to one rule (``node_rule``). A node is ``accept`` when its rule may return there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gramc.automata.tables import DEAD


@dataclass(frozen=True, eq=False)
class PDATable:
    """A recursive transition network as arrays.

    Attributes:
        delta: int32 ``[N, C]``; columns are ``n_byte_classes`` byte classes, then one per
            special token (``token_ids``), then one call column per rule.
        byte_class: uint8 ``[256]``.
        token_ids: int32 ``[T]`` ascending.
        accept: bool ``[N]``: the node's rule may return here.
        node_rule: int32 ``[N]``: the rule of each node (-1 for the dead node).
        rule_start: int32 ``[R]``: the first node of each rule.
        start_rule: the grammar's start rule.
        rule_names: the rule names (for messages and ``inspect``).
    """

    delta: np.ndarray
    byte_class: np.ndarray
    token_ids: np.ndarray
    accept: np.ndarray
    node_rule: np.ndarray
    rule_start: np.ndarray
    start_rule: int
    rule_names: tuple[str, ...]
    _derived: dict = field(default_factory=dict, repr=False)

    @property
    def n_nodes(self) -> int:
        return int(self.delta.shape[0])

    @property
    def n_rules(self) -> int:
        return int(self.rule_start.shape[0])

    @property
    def n_byte_classes(self) -> int:
        return int(self.delta.shape[1]) - len(self.token_ids) - self.n_rules

    @property
    def call_base(self) -> int:
        """The column of rule 0's call; rule r's is ``call_base + r``."""
        return int(self.delta.shape[1]) - self.n_rules

    def call_entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The live call columns as arrays: (node, rule, return node), by node then rule."""
        if "call_entries" not in self._derived:
            nodes, rules = np.nonzero(self.delta[:, self.call_base :] != DEAD)
            rets = self.delta[nodes, self.call_base + rules]
            self._derived["call_entries"] = (nodes.astype(np.int64), rules.astype(np.int64), rets.astype(np.int64))
        return self._derived["call_entries"]

    def calls(self) -> list[tuple[tuple[int, int], ...]]:
        """Per node: the (rule, return node) pairs of its live call columns."""
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
