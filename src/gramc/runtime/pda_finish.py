"""Can every node of a PDA finish its rule? Found by propagation, or checked from a proof.

The Earley runtime treats "some item is left" as "the input can still be completed", so a
reader refuses a PDA with a node that cannot finish its rule (through calls of rules that
can). A node finishes when it accepts, or has an edge into a finishing node that reads, or
that calls a rule whose start finishes.

:func:`finish_ranks` finds which nodes finish, by propagation from the accepting nodes, each
edge looked at when its target finishes and when the rule it calls does: linear in the
edges, but a chain of nodes takes one step per node, most of a load's time in Python. It
also numbers the nodes in the order they were found: a *rank* with which every node that
does not accept has an edge into a node of lower rank that reads, or that calls a rule whose
start has a lower rank too. A writer stores those ranks (``pda.finish_rank``, layout 5), and
:func:`unjustified` checks them edge by edge in a few vectorised steps: ranks strictly
decrease along the justifying edges down to accepting nodes, so any ranks it accepts prove
that every node finishes, whoever wrote them.
"""

from __future__ import annotations

import numpy as np

from gramc.automata.pda_table import PDATable
from gramc.automata.tables import DEAD
from gramc.runtime.validate import NARROW_FRONTIER, grouped, members


class Edges:
    """The edges of a PDA table: ``src``, ``dst`` and ``called`` (the rule a call enters, or
    -1 for a read), one entry per transition (:meth:`PDATable.edges`)."""

    def __init__(self, table: PDATable):
        self.n_nodes = table.n_nodes
        self.src, self.dst, self.called = table.edges()


def unfinished(ranks: np.ndarray) -> int | None:
    """The first node (other than the dead one) that :func:`finish_ranks` left unranked."""
    bad = np.flatnonzero(ranks[1:] < 0)
    return int(bad[0]) + 1 if len(bad) else None


def unjustified(edges: Edges, accept: np.ndarray, rule_start: np.ndarray, ranks: np.ndarray) -> int | None:
    """The first node, other than the dead one, that ``ranks`` do not show can finish: it does
    not accept and has no edge into a lower-ranked node that reads or calls a rule whose start
    is lower-ranked too. None when every node is shown to finish."""
    src, dst, called = edges.src, edges.dst, edges.called
    rank = ranks.astype(np.int64)
    below = rank[dst] < rank[src]
    calls = called >= 0
    below[calls] &= rank[rule_start[called[calls]]] < rank[src[calls]]
    shown = accept.copy()
    shown[src[below]] = True
    shown[DEAD] = True
    bad = np.flatnonzero(~shown)
    return int(bad[0]) if len(bad) else None


def finish_ranks(edges: Edges, accept: np.ndarray, node_rule: np.ndarray, rule_start: np.ndarray) -> np.ndarray:
    """Each node's rank (int32, see the module doc), -1 for a node that cannot finish its
    rule (and for the dead node). Wide frontiers step in numpy, narrow ones in Python (a
    chain of nodes has one node per round)."""
    src, dst, called = edges.src, edges.dst, edges.called
    by_dst = grouped(dst.astype(np.int64), edges.n_nodes)
    calls = np.flatnonzero(called >= 0)
    order, indptr = grouped(called[calls], len(rule_start))
    by_rule = (calls[order], indptr)
    rank = np.where(accept, 0, -1).astype(np.int64)
    rule_ok = np.zeros(len(rule_start), dtype=bool)

    def rules_started(nodes: np.ndarray) -> np.ndarray:
        starts = nodes[rule_start[node_rule[nodes]] == nodes]
        rules = node_rule[starts]
        rule_ok[rules] = True
        return rules

    nodes = np.flatnonzero(accept)
    rules = rules_started(nodes)
    step = 0
    while len(nodes) + len(rules) >= NARROW_FRONTIER:
        found = np.concatenate([members(*by_dst, nodes), members(*by_rule, rules)])
        rule = called[found]
        ok = (rank[dst[found]] >= 0) & ((rule < 0) | rule_ok[np.maximum(rule, 0)])
        nodes = np.unique(src[found[ok]])
        nodes = nodes[rank[nodes] < 0]
        step += 1
        rank[nodes] = step
        rules = rules_started(nodes)
    if len(nodes) or len(rules):
        _finish_in_python(edges, by_dst, by_rule, node_rule, rule_start, rank, rule_ok, nodes, rules, step)
    rank[DEAD] = -1
    return rank.astype(np.int32)


def _finish_in_python(edges: Edges, by_dst, by_rule, node_rule, rule_start, rank: np.ndarray,
                      rule_ok: np.ndarray, nodes: np.ndarray, rules: np.ndarray, step: int) -> None:
    """The propagation of :func:`finish_ranks` from the frontier ``nodes`` / ``rules`` on,
    one node or rule at a time (each edge looked at once per end), into ``rank`` (each node
    found gets the next rank after ``step``) and ``rule_ok``. The tables become Python lists
    once."""
    src_by_dst, called_by_dst = edges.src[by_dst[0]].tolist(), edges.called[by_dst[0]].tolist()
    src_by_rule, dst_by_rule = edges.src[by_rule[0]].tolist(), edges.dst[by_rule[0]].tolist()
    dst_ptr, rule_ptr = by_dst[1].tolist(), by_rule[1].tolist()
    node_rule_l, rule_start_l = node_rule.tolist(), rule_start.tolist()
    ranks, ok = rank.tolist(), rule_ok.tolist()
    work_nodes, work_rules = nodes.tolist(), rules.tolist()
    while work_nodes or work_rules:
        if work_rules:  # a rule that can finish: its callers whose return node finishes
            r = work_rules.pop()
            a, b = rule_ptr[r], rule_ptr[r + 1]
            found = [src_by_rule[i] for i in range(a, b) if ranks[dst_by_rule[i]] >= 0]
        else:  # a node that finishes: the edges into it that read, or call a rule that can
            n = work_nodes.pop()
            a, b = dst_ptr[n], dst_ptr[n + 1]
            found = [src_by_dst[i] for i in range(a, b) if called_by_dst[i] < 0 or ok[called_by_dst[i]]]
        for s in found:
            if ranks[s] >= 0:
                continue
            step += 1
            ranks[s] = step
            work_nodes.append(s)
            own = node_rule_l[s]
            if rule_start_l[own] == s and not ok[own]:
                ok[own] = True
                work_rules.append(own)
    rank[:] = ranks
    rule_ok[:] = ok
