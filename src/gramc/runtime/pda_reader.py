"""The payload of a PDA artifact file, checked and decoded.

The PDA section (``pda.*``): shapes agree, every index is in range, transitions stay inside
their rule, every node can finish its rule. When bound, the node tables (``nodes.*``) and the
vocabulary's token bytes (``vocab.*``), which must match the recorded fingerprint.
"""

from __future__ import annotations

import numpy as np

from gramc.automata.pda_bind import NodeTokens
from gramc.automata.pda_table import PDATable
from gramc.automata.tables import DEAD
from gramc.formats.limits import ReadLimits
from gramc.runtime.artifact import VocabInfo
from gramc.runtime.pda_artifact import PDAArtifact, pda_from_parts
from gramc.runtime.validate import (NARROW_FRONTIER, check_arrays, get_field, grouped, in_range, members, no_extra,
                                    require)
from gramc.runtime.vocab_bytes import VOCAB_BYTES_ARRAYS, read_token_bytes
from gramc.vocab import Vocab

_PDA_ARRAYS = {
    "pda.delta": (np.int32, 2),
    "pda.byte_class": (np.uint8, 1),
    "pda.token_ids": (np.int32, 1),
    "pda.accept": (np.bool_, 1),
    "pda.node_rule": (np.int32, 1),
    "pda.rule_start": (np.int32, 1),
}
_NODE_ARRAYS = {
    "nodes.rows": (np.uint32, 2),
    "nodes.row_of": (np.int32, 1),
    "nodes.unc_indptr": (np.int64, 1),
    "nodes.unc_ids": (np.int32, 1),
    **VOCAB_BYTES_ARRAYS,
}
#: Layout 1 stored one accepted row per node.
_NODE_ARRAYS_V1 = {**{k: v for k, v in _NODE_ARRAYS.items() if k not in ("nodes.rows", "nodes.row_of")},
                   "nodes.accepted": (np.uint32, 2)}


def read_payload(meta: dict, arrays: dict, source: dict, info: VocabInfo | None,
                 limits: ReadLimits, vocab: Vocab | None = None) -> PDAArtifact:
    """The PDA artifact of a container whose header :mod:`gramc.runtime.reader` has checked.

    A bound one carries the vocabulary's token bytes; they must match the recorded
    fingerprint (and it shares ``vocab``, the decoder's, where they are its bytes)."""
    pda, depth = read_pda(meta, arrays)
    spec = _NODE_ARRAYS if meta.get("artifact_version") != 1 else _NODE_ARRAYS_V1
    no_extra(arrays, _PDA_ARRAYS, spec if info else {})
    if info is None:
        return pda_from_parts(pda, source, depth, None, None, None)
    check_arrays(arrays, spec)
    in_range("pda.token_ids", pda.token_ids, 0, info.size)
    vocab = read_token_bytes(arrays, info, vocab)
    n = pda.n_nodes - 1
    if "nodes.accepted" in spec:
        rows, row_of = arrays["nodes.accepted"], None
        require(rows.shape[0] == n, "nodes.accepted must have one mask row per node")
    else:
        rows, row_of = arrays["nodes.rows"], arrays["nodes.row_of"]
        require(row_of.shape == (n,), "nodes.row_of must have one entry per node")
        in_range("nodes.row_of", row_of, -1, len(rows))
    require(rows.shape[1] == (info.size + 31) // 32, "node mask rows must have ceil(V/32) words")
    if info.size % 32 and len(rows):  # ids at or past the vocabulary size are never allowed
        require(not (rows[:, -1] >> np.uint32(info.size % 32)).any(),
                "node mask rows set padding bits past the vocabulary size")
    indptr, ids = arrays["nodes.unc_indptr"], arrays["nodes.unc_ids"]
    require(indptr.shape == (n + 1,) and indptr[0] == 0 and indptr[-1] == len(ids)
            and bool(np.all(np.diff(indptr) >= 0)), "nodes.unc_indptr must run from 0 to len(nodes.unc_ids)")
    in_range("nodes.unc_ids", ids, 0, info.size)
    if row_of is not None:
        require(not np.diff(indptr)[row_of < 0].any(), "a node without a stored row has uncertain tokens")
    nodes = NodeTokens(accepted=rows, unc_indptr=indptr, unc_ids=ids, row_of=row_of)
    return pda_from_parts(pda, source, depth, info, nodes, vocab)


def read_pda(meta: dict, arrays: dict) -> tuple[PDATable, int]:
    """The PDA section and its expansion depth, fully checked (shapes, ranges, rule
    structure, productivity)."""
    check_arrays(arrays, _PDA_ARRAYS)
    delta, classes = arrays["pda.delta"], arrays["pda.byte_class"]
    token_ids, accept = arrays["pda.token_ids"], arrays["pda.accept"]
    node_rule, rule_start = arrays["pda.node_rule"], arrays["pda.rule_start"]
    n_nodes, n_cols = delta.shape
    n_rules = len(rule_start)
    n_byte_cols = n_cols - len(token_ids) - n_rules
    info = get_field(meta, "pda", dict)
    names = get_field(info, "rule_names", list, "metadata.pda")
    start_rule = get_field(info, "start_rule", int, "metadata.pda")
    depth = get_field(info, "depth", int, "metadata.pda")
    require(n_nodes >= 2 and n_rules >= 1 and n_byte_cols >= 1, "pda.delta has too few nodes or columns")
    require(classes.shape == (256,), "pda.byte_class must have 256 entries")
    require(accept.shape == (n_nodes,) and node_rule.shape == (n_nodes,), "pda node arrays differ in length")
    require(len(names) == n_rules and all(isinstance(n, str) for n in names), "metadata.pda.rule_names must name every rule")
    require(0 <= start_rule < n_rules and 0 <= depth <= 8, "metadata.pda start_rule or depth out of range")
    in_range("pda.delta", delta, 0, n_nodes)
    in_range("pda.byte_class", classes, 0, n_byte_cols)
    in_range("pda.rule_start", rule_start, 1, n_nodes)
    require(node_rule[0] == -1 and not delta[DEAD].any() and not accept[DEAD], "node 0 must be the dead node")
    in_range("pda.node_rule", node_rule[1:], 0, n_rules)
    require(bool(np.all(node_rule[rule_start] == np.arange(n_rules))), "pda.rule_start nodes must belong to their rules")
    require(bool(np.all(token_ids[1:] > token_ids[:-1])), "pda.token_ids must be strictly ascending")
    in_range("pda.token_ids", token_ids, 0, 2**31 - 1)
    src, cols = np.nonzero(delta != DEAD)
    dst = delta[src, cols]
    require(bool(np.all(node_rule[dst] == node_rule[src])), "pda.delta must stay inside each rule")
    _check_productive(delta, accept, node_rule, rule_start, n_cols - n_rules)
    return PDATable(delta=delta, byte_class=classes, token_ids=token_ids, accept=accept,
                    node_rule=node_rule, rule_start=rule_start, start_rule=start_rule,
                    rule_names=tuple(names)), depth


def _check_productive(delta, accept, node_rule, rule_start, call_base: int) -> None:
    """Every node must be able to finish its rule, through calls of rules that can finish.

    The Earley runtime treats "some item is left" as "the input can still be completed".
    A node finishes when it accepts, or has an edge into a finishing node that reads, or
    that calls a rule whose start finishes. Solved by propagation from the accepting
    nodes, each edge looked at when its target finishes and when the rule it calls does:
    linear in the edges. Wide frontiers step in numpy, narrow ones in Python (a chain of
    nodes has one node per round).
    """
    src, col = np.nonzero(delta != DEAD)
    dst, called = delta[src, col], col.astype(np.int64) - call_base  # called < 0: a read
    by_dst = grouped(dst.astype(np.int64), len(delta))
    calls = np.flatnonzero(called >= 0)
    order, indptr = grouped(called[calls], len(rule_start))
    by_rule = (calls[order], indptr)
    reach, rule_ok = accept.copy(), np.zeros(len(rule_start), dtype=bool)

    def rules_started(nodes: np.ndarray) -> np.ndarray:
        starts = nodes[rule_start[node_rule[nodes]] == nodes]
        rules = node_rule[starts]
        rule_ok[rules] = True
        return rules

    nodes = np.flatnonzero(reach)
    rules = rules_started(nodes)
    while len(nodes) + len(rules) >= NARROW_FRONTIER:
        edges = np.concatenate([members(*by_dst, nodes), members(*by_rule, rules)])
        rule = called[edges]
        ok = reach[dst[edges]] & ((rule < 0) | rule_ok[np.maximum(rule, 0)])
        nodes = np.unique(src[edges[ok]])
        nodes = nodes[~reach[nodes]]
        reach[nodes] = True
        rules = rules_started(nodes)
    if len(nodes) or len(rules):
        _finish_in_python(src, dst, called, by_dst, by_rule, node_rule, rule_start, reach, rule_ok, nodes, rules)
    reach[DEAD] = True
    bad = np.flatnonzero(~reach)
    require(not len(bad), f"pda: node {int(bad[0]) if len(bad) else 0} cannot finish its rule")


def _finish_in_python(src, dst, called, by_dst, by_rule, node_rule, rule_start, reach, rule_ok,
                      nodes: np.ndarray, rules: np.ndarray) -> None:
    """The propagation of :func:`_check_productive` from the frontier ``nodes`` / ``rules``
    on, one node or rule at a time (each edge looked at once per end), into ``reach`` and
    ``rule_ok``. Only the edges of the node or rule at hand become Python lists."""
    src_by_dst, called_by_dst = src[by_dst[0]], called[by_dst[0]]
    src_by_rule, dst_by_rule = src[by_rule[0]], dst[by_rule[0]]
    dst_ptr, rule_ptr = by_dst[1].tolist(), by_rule[1].tolist()
    node_rule_l, rule_start_l = node_rule.tolist(), rule_start.tolist()
    done, ok = bytearray(reach.tobytes()), bytearray(rule_ok.tobytes())
    work_nodes, work_rules = nodes.tolist(), rules.tolist()
    while work_nodes or work_rules:
        if work_rules:  # a rule that can finish: its callers whose return node finishes
            r = work_rules.pop()
            a, b = rule_ptr[r], rule_ptr[r + 1]
            found = [s for s, d in zip(src_by_rule[a:b].tolist(), dst_by_rule[a:b].tolist()) if done[d]]
        else:  # a node that finishes: the edges into it that read, or call a rule that can
            n = work_nodes.pop()
            a, b = dst_ptr[n], dst_ptr[n + 1]
            found = [s for s, c in zip(src_by_dst[a:b].tolist(), called_by_dst[a:b].tolist()) if c < 0 or ok[c]]
        for s in found:
            if done[s]:
                continue
            done[s] = 1
            work_nodes.append(s)
            own = node_rule_l[s]
            if rule_start_l[own] == s and not ok[own]:
                ok[own] = 1
                work_rules.append(own)
    reach[:] = np.frombuffer(bytes(done), dtype=bool)
    rule_ok[:] = np.frombuffer(bytes(ok), dtype=bool)
