"""The payload of a PDA artifact file, checked and decoded.

The PDA section (``pda.*``): shapes agree, every index is in range, transitions stay inside
their rule, every node can finish its rule. When bound, the node tables (``nodes.*``: the
distinct node rows, sparse, and the uncertain tokens) and, from layout 9, the stored
configuration masks (``configs.*``). Rows are sparse by their words from layout 10, by their
token ids in layouts 5 to 9 (converted here); files of layouts 1 and 3 store the node rows
packed, and the vocabulary's token bytes (``vocab.*``), which must match the recorded
fingerprint.
"""

from __future__ import annotations

import numpy as np

from gramc.automata.pda_bind import NodeTokens
from gramc.automata.pda_table import Calls, PDATable
from gramc.automata.tables import DEAD
from gramc.bitmask import WordRows, n_words, word_rows_of_ids
from gramc.formats.limits import ReadLimits
from gramc.runtime.artifact import (FINGERPRINT_ARTIFACT_VERSION, SPARSE_CALLS_ARTIFACT_VERSION,
                                    STORED_CONFIGS_ARTIFACT_VERSION, WORD_ROWS_ARTIFACT_VERSION, VocabInfo)
from gramc.runtime.pda_artifact import PDAArtifact, pda_from_parts
from gramc.runtime.pda_configs import MAX_ENCODING, StoredConfigs
from gramc.runtime.pda_finish import Edges, finish_ranks, unfinished, unjustified
from gramc.runtime.validate import check_arrays, get_field, in_range, no_extra, require
from gramc.runtime.vocab_bytes import VOCAB_BYTES_ARRAYS, bound_vocab, read_token_bytes
from gramc.vocab import Vocab

_PDA_ARRAYS = {
    "pda.delta": (np.int32, 2),
    "pda.byte_class": (np.uint8, 1),
    "pda.token_ids": (np.int32, 1),
    "pda.accept": (np.bool_, 1),
    "pda.node_rule": (np.int32, 1),
    "pda.rule_start": (np.int32, 1),
}
#: Layout 8's sparse calls (before it, a call column per rule in ``pda.delta``).
_CALL_ARRAYS = {
    "pda.call_indptr": (np.int64, 1),
    "pda.call_rule": (np.int32, 1),
    "pda.call_return": (np.int32, 1),
}
#: Layout 5's proof that every node can finish its rule (:mod:`gramc.runtime.pda_finish`).
_RANKS = {"pda.finish_rank": (np.int32, 1)}
#: Layout 10's node tables: the distinct node rows by their words, and the uncertain tokens.
_NODE_ARRAYS = {
    "nodes.row_indptr": (np.int64, 1),
    "nodes.row_word": (np.int32, 1),
    "nodes.row_value": (np.uint32, 1),
    "nodes.row_complement": (np.bool_, 1),
    "nodes.row_of": (np.int32, 1),
    "nodes.unc_indptr": (np.int64, 1),
    "nodes.unc_ids": (np.int32, 1),
}
#: Layouts 5 to 9 stored the rows by their token ids.
_NODE_ARRAYS_V5 = {**{k: v for k, v in _NODE_ARRAYS.items() if k not in ("nodes.row_word", "nodes.row_value")},
                   "nodes.row_ids": (np.int32, 1)}
#: Layout 10's stored configuration masks (:mod:`gramc.runtime.pda_configs`), the distinct
#: masks by their words.
_CONFIG_ARRAYS = {
    "configs.digest": (np.uint64, 1),
    "configs.enc_indptr": (np.int64, 1),
    "configs.enc": (np.int32, 1),
    "configs.row": (np.int32, 1),
    "configs.row_indptr": (np.int64, 1),
    "configs.row_word": (np.int32, 1),
    "configs.row_value": (np.uint32, 1),
    "configs.row_complement": (np.bool_, 1),
}
#: Layout 9 stored those rows by their token ids, as layouts 5 to 9 stored node rows.
_CONFIG_ARRAYS_V9 = {**{k: v for k, v in _CONFIG_ARRAYS.items() if k not in ("configs.row_word", "configs.row_value")},
                     "configs.row_ids": (np.int32, 1)}
#: Layout 3 stored the distinct rows packed, and the token bytes.
_NODE_ARRAYS_V3 = {"nodes.rows": (np.uint32, 2), "nodes.row_of": (np.int32, 1),
                   "nodes.unc_indptr": (np.int64, 1), "nodes.unc_ids": (np.int32, 1), **VOCAB_BYTES_ARRAYS}
#: Layout 1 stored one accepted row per node.
_NODE_ARRAYS_V1 = {**{k: v for k, v in _NODE_ARRAYS_V3.items() if k not in ("nodes.rows", "nodes.row_of")},
                   "nodes.accepted": (np.uint32, 2)}


def read_payload(meta: dict, arrays: dict, source: dict, info: VocabInfo | None,
                 limits: ReadLimits, vocab: Vocab | None = None) -> PDAArtifact:
    """The PDA artifact of a container whose header :mod:`gramc.runtime.reader` has checked.

    A bound one reads ``vocab``, the decoder's vocabulary, where it has the recorded
    fingerprint (else a known one: :func:`~gramc.runtime.vocab_bytes.bound_vocab`); without
    it, it awaits its vocabulary. Files of layouts 1 and 3 carry the token bytes, checked
    against the fingerprint."""
    version = meta["artifact_version"]  # an int: checked by the reader
    stores_bytes = version < FINGERPRINT_ARTIFACT_VERSION  # 5 and later bind by fingerprint
    by_words = version >= WORD_ROWS_ARTIFACT_VERSION
    spec = _NODE_ARRAYS_V1 if version == 1 else _NODE_ARRAYS_V3 if stores_bytes else \
        _NODE_ARRAYS if by_words else _NODE_ARRAYS_V5
    sparse_calls = version >= SPARSE_CALLS_ARTIFACT_VERSION
    stores_configs = info is not None and version >= STORED_CONFIGS_ARTIFACT_VERSION
    config_spec = _CONFIG_ARRAYS if by_words else _CONFIG_ARRAYS_V9
    no_extra(arrays, _PDA_ARRAYS, spec if info else {}, {} if stores_bytes else _RANKS,
             _CALL_ARRAYS if sparse_calls else {}, config_spec if stores_configs else {})
    if not stores_bytes:
        check_arrays(arrays, _RANKS)
    pda, depth = read_pda(meta, arrays, None if stores_bytes else arrays["pda.finish_rank"], sparse_calls)
    if info is None:
        return pda_from_parts(pda, source, depth, None, None, None)
    check_arrays(arrays, spec)
    in_range("pda.token_ids", pda.token_ids, 0, info.size)
    n = pda.n_nodes - 1
    rows: np.ndarray | WordRows
    if "nodes.accepted" in spec:
        rows, row_of = arrays["nodes.accepted"], None
        require(rows.shape[0] == n, "nodes.accepted must have one mask row per node")
    elif "nodes.rows" in spec:
        rows, row_of = arrays["nodes.rows"], arrays["nodes.row_of"]
    else:
        rows, row_of = WordRows(*_row_arrays(arrays, info.size, "nodes", by_words), info.size), arrays["nodes.row_of"]
    if row_of is not None:
        require(row_of.shape == (n,), "nodes.row_of must have one entry per node")
        in_range("nodes.row_of", row_of, -1, len(rows))
    if isinstance(rows, np.ndarray):
        require(rows.shape[1] == (info.size + 31) // 32, "node mask rows must have ceil(V/32) words")
        if info.size % 32 and len(rows):  # ids at or past the vocabulary size are never allowed
            require(not (rows[:, -1] >> np.uint32(info.size % 32)).any(),
                    "node mask rows set padding bits past the vocabulary size")
    indptr, ids = arrays["nodes.unc_indptr"], arrays["nodes.unc_ids"]
    require(indptr.shape == (n + 1,) and indptr[0] == 0 and indptr[-1] == len(ids)
            and bool(np.all(indptr[1:] >= indptr[:-1])), "nodes.unc_indptr must run from 0 to len(nodes.unc_ids)")
    in_range("nodes.unc_ids", ids, 0, info.size)
    if row_of is not None:
        require(not (indptr[1:] - indptr[:-1])[row_of < 0].any(), "a node without a stored row has uncertain tokens")
    nodes = NodeTokens(accepted=rows, unc_indptr=indptr, unc_ids=ids, row_of=row_of)
    known = read_token_bytes(arrays, info, vocab) if stores_bytes else bound_vocab(info, vocab)
    configs = _configs(meta, arrays, info.size, config_spec, by_words) if stores_configs else None
    return pda_from_parts(pda, source, depth, info, nodes, known, configs)


def _configs(meta: dict, arrays: dict, vocab_size: int, spec: dict, by_words: bool) -> StoredConfigs:
    """The stored configuration masks, checked: digests ascending, encodings and rows
    partitioned by their index arrays, every entry's row in range. An encoding or digest that
    is wrong can only fail to match (a lookup compares whole encodings), never crash."""
    check_arrays(arrays, spec)
    depth = get_field(meta["pda"], "config_depth", int, "metadata.pda")
    require(0 <= depth <= 64, f"pda.config_depth must be in [0, 64], got {depth}")
    digests, indptr, enc, row = (arrays[f"configs.{k}"] for k in ("digest", "enc_indptr", "enc", "row"))
    n = len(digests)
    require(row.shape == (n,), "configs.row must have one entry per configs.digest entry")
    require(bool(np.all(digests[1:] >= digests[:-1])), "configs.digest must be ascending")
    require(indptr.shape == (n + 1,) and indptr[0] == 0 and indptr[-1] == len(enc)
            and bool(np.all(indptr[1:] >= indptr[:-1])),
            "configs.enc_indptr must run from 0 to len(configs.enc), one entry per configuration")
    require(bool(np.all(np.diff(indptr) <= MAX_ENCODING)), f"a configuration encoding is longer than {MAX_ENCODING}")
    rows = _row_arrays(arrays, vocab_size, "configs", by_words)
    in_range("configs.row", row, 0, len(rows[3]))
    configs = {k: arrays[k] for k in ("configs.digest", "configs.enc_indptr", "configs.enc", "configs.row")}
    configs.update(zip(("configs.row_indptr", "configs.row_word", "configs.row_value", "configs.row_complement"), rows))
    return StoredConfigs(configs, depth, vocab_size)


def _row_arrays(arrays: dict, vocab_size: int, section: str,
                by_words: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A section's distinct rows (``{section}.row_*``), checked, as
    :func:`~gramc.bitmask.word_rows` gives them: stored so from layout 10 (words in
    ``[0, ceil(V/32))``, ascending within each row, no bit set past ``V``: a complement row
    lists its last word where ``V`` is not a multiple of 32, since its fill would set those
    bits), converted from the token ids of layouts 5 to 9 (ids in ``[0, V)``, ascending)."""
    name = f"{section}.row_word" if by_words else f"{section}.row_ids"
    indptr, listed, complement = (arrays[k] for k in (f"{section}.row_indptr", name, f"{section}.row_complement"))
    require(indptr.shape == (len(complement) + 1,) and indptr[0] == 0 and indptr[-1] == len(listed)
            and bool(np.all(indptr[1:] >= indptr[:-1])),
            f"{section}.row_indptr must run from 0 to len({name}), one row per {section}.row_complement entry")
    last = n_words(vocab_size) - 1
    in_range(name, listed, 0, last + 1 if by_words else vocab_size)
    ascending = listed[1:] > listed[:-1]
    starts = indptr[1:-1]
    ascending[starts[(starts > 0) & (starts < len(listed))] - 1] = True  # a row's first entry follows another row
    require(bool(ascending.all()), f"{name} must be strictly ascending within each row")
    if not by_words:
        return word_rows_of_ids(indptr, listed, complement, vocab_size)
    value = arrays[f"{section}.row_value"]
    require(value.shape == listed.shape, f"{section}.row_value must have one entry per {name} entry")
    tail = vocab_size % 32
    if tail:
        require(not (value[listed == last] >> np.uint32(tail)).any(),
                f"{section}.row_value sets bits past the vocabulary size")
        firsts, ends = indptr[:-1][complement], indptr[1:][complement]
        require(bool(np.all(ends > firsts)) and bool(np.all(listed[ends - 1] == last)),
                f"a complement row of {section}.row_* must list its last word (its fill would set bits past "
                "the vocabulary size)")
    return indptr, listed, value, complement


def read_pda(meta: dict, arrays: dict, ranks: np.ndarray | None = None,
             sparse_calls: bool = True) -> tuple[PDATable, int]:
    """The PDA section and its expansion depth, fully checked (shapes, ranges, rule
    structure, productivity: by the file's ``ranks``, a proof checked edge by edge, where
    layout 5 stores them, else found by propagation). Files before layout 8 (not
    ``sparse_calls``) have a call column per rule in ``pda.delta``, made sparse here."""
    check_arrays(arrays, _PDA_ARRAYS)
    delta, classes = arrays["pda.delta"], arrays["pda.byte_class"]
    token_ids, accept = arrays["pda.token_ids"], arrays["pda.accept"]
    node_rule, rule_start = arrays["pda.node_rule"], arrays["pda.rule_start"]
    n_nodes, n_cols = delta.shape
    n_rules = len(rule_start)
    if sparse_calls:
        check_arrays(arrays, _CALL_ARRAYS)
        calls = Calls(call_indptr=arrays["pda.call_indptr"], call_rule=arrays["pda.call_rule"],
                      call_return=arrays["pda.call_return"])
    else:
        require(n_cols > n_rules, "pda.delta has too few columns")
        delta, calls = _split_calls(delta, n_cols - n_rules)
        n_cols -= n_rules
    n_byte_cols = n_cols - len(token_ids)
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
    _check_calls(calls, n_nodes, n_rules)
    table = PDATable(delta=delta, byte_class=classes, token_ids=token_ids, accept=accept,
                     node_rule=node_rule, rule_start=rule_start, start_rule=start_rule,
                     rule_names=tuple(names), **calls)
    edges = Edges(table)
    require(bool(np.all(node_rule[edges.dst] == node_rule[edges.src])),
            "pda.delta and pda.call_return must stay inside each rule")
    if ranks is None:
        bad = unfinished(finish_ranks(edges, accept, node_rule, rule_start))
    else:
        require(ranks.shape == (n_nodes,), "pda.finish_rank must have one entry per node")
        bad = unjustified(edges, accept, rule_start, ranks)
    require(bad is None, f"pda: node {bad} cannot finish its rule" + ("" if ranks is None else
            " (pda.finish_rank shows no way)"))
    return table, depth


def _split_calls(delta: np.ndarray, call_base: int) -> tuple[np.ndarray, Calls]:
    """A table of layouts 1-7 (call columns from ``call_base`` on) as its read columns and
    its sparse calls."""
    calls = delta[:, call_base:]
    nodes, rules = np.nonzero(calls != DEAD)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(nodes, minlength=len(delta)))]).astype(np.int64)
    return np.ascontiguousarray(delta[:, :call_base]), Calls(
        call_indptr=indptr, call_rule=rules.astype(np.int32), call_return=calls[nodes, rules])


def _check_calls(calls: Calls, n_nodes: int, n_rules: int) -> None:
    """The sparse calls: each node's entries (none for node 0) by strictly ascending rule,
    every rule in range, every return a live node."""
    indptr, rule, ret = calls["call_indptr"], calls["call_rule"], calls["call_return"]
    require(indptr.shape == (n_nodes + 1,) and indptr[0] == 0 and indptr[1] == 0 and indptr[-1] == len(rule)
            and bool(np.all(indptr[1:] >= indptr[:-1])),
            "pda.call_indptr must run from 0 to len(pda.call_rule), node 0 calling nothing")
    require(ret.shape == rule.shape, "pda.call_rule and pda.call_return differ in length")
    in_range("pda.call_rule", rule, 0, n_rules)
    in_range("pda.call_return", ret, 1, n_nodes)
    ascending = rule[1:] > rule[:-1]
    starts = indptr[1:-1]
    ascending[starts[(starts > 0) & (starts < len(rule))] - 1] = True  # a node's first call follows another node's
    require(bool(ascending.all()), "pda.call_rule must be strictly ascending within each node")


