"""Readable text forms of automata (``gramc inspect --dfa``, golden ``automaton.txt`` files)."""

from __future__ import annotations

import numpy as np

from gramc.automata.pda_table import PDATable
from gramc.automata.tables import DEAD, DFATable


def _byte(b: int) -> str:
    if 0x21 <= b < 0x7F and b not in b"\\-[]":
        return chr(b)
    return f"\\x{b:02x}"


def describe_bytes(values: list[int]) -> str:
    """A compact byte-class text such as ``[0-9a-f]`` or ``'x'`` ('' for no bytes)."""
    if not values:
        return ""
    if len(values) == 1:
        return repr(bytes(values))[1:]
    parts, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(_byte(values[i]) if i == j else f"{_byte(values[i])}-{_byte(values[j])}")
        i = j + 1
    return "[" + "".join(parts) + "]"


def format_dfa(dfa: DFATable) -> str:
    """One line per live state: ``state [accept]: bytes -> target, ...`` (stable)."""
    nbc = dfa.n_byte_classes
    lines = [f"start {dfa.start}; {dfa.n_states} states (0 is dead); {nbc} byte classes"]
    for s in range(1, dfa.n_states):
        targets = dfa.delta[s, dfa.byte_class]  # per byte
        edges = [f"{describe_bytes(np.flatnonzero(targets == t).tolist())} -> {int(t)}"
                 for t in sorted(set(targets.tolist()) - {DEAD})]
        edges += [f"<[{int(tid)}]> -> {int(t)}" for tid, t in zip(dfa.token_ids, dfa.delta[s, nbc:]) if t != DEAD]
        lines.append((f"{s}{' accept' if dfa.accept[s] else ''}: " + ", ".join(edges)).rstrip())
    return "\n".join(lines) + "\n"


def format_pda(pda: PDATable) -> str:
    """Per rule, one line per node: ``node [accept]: bytes -> node, <rule> -> node, ...``."""
    nbc = pda.n_byte_classes
    calls = pda.calls()
    lines = [f"{pda.n_nodes} nodes (0 is dead); {nbc} byte classes; start rule {pda.rule_names[pda.start_rule]}"]
    for r, name in enumerate(pda.rule_names):
        lines.append(f"rule {name} (starts at {int(pda.rule_start[r])}):")
        for n in np.flatnonzero(pda.node_rule == r):
            targets = pda.delta[n, pda.byte_class]
            edges = [f"{describe_bytes(np.flatnonzero(targets == t).tolist())} -> {int(t)}"
                     for t in sorted(set(targets.tolist()) - {DEAD})]
            edges += [f"<[{int(tid)}]> -> {int(t)}"
                      for tid, t in zip(pda.token_ids, pda.delta[n, nbc:]) if t != DEAD]
            edges += [f"{pda.rule_names[r]}() -> {ret}" for r, ret in calls[n]]
            lines.append((f"  {n}{' accept' if pda.accept[n] else ''}: " + ", ".join(edges)).rstrip())
    return "\n".join(lines) + "\n"


def format_counted(cdfa) -> str:
    """The outer DFA as :func:`format_dfa`, each call written ``counter<k>() -> return state``,
    then each counter's bounds and item DFA (a :class:`~gramc.automata.counted.CountedDFA`)."""
    lines = format_dfa(cdfa.outer).splitlines()
    for p in cdfa.sites.tolist():
        call = f"counter{int(cdfa.call_kind[p])}() -> {int(cdfa.call_next[p])}"
        lines[p] += f" {call}" if lines[p].endswith(":") else f", {call}"
    for k, ((lo, hi), item) in enumerate(zip(cdfa.bounds.tolist(), cdfa.items)):
        lines.append(f"counter{k} {{{lo},{hi}}} of:")
        lines.extend(f"  {line}" for line in format_dfa(item).splitlines())
    return "\n".join(lines) + "\n"


def format_automaton(artifact) -> str:
    """The text form of an artifact's automaton, whatever its kind."""
    if artifact.kind == "counted":
        return format_counted(artifact.cdfa)
    return format_dfa(artifact.dfa) if artifact.kind == "dfa" else format_pda(artifact.pda)
