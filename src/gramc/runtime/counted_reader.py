"""The payload of a counted DFA artifact file, checked and decoded.

The outer DFA (``dfa.*``, as a DFA artifact's, its calls counted as edges), the counted
section (``counted.*``: which state calls which counter, where it returns, the items' own
DFAs and their bounds) and, when bound, the outer states' token rows (``tokens.*``; layouts
2 and 4 also stored the vocabulary's token bytes, ``vocab.*``). Every call must read unambiguously, as the compiler
guarantees, or masks would be wrong.
"""

from __future__ import annotations

import numpy as np

from gramc.automata.counted import MAX_COUNTED_STATES, CountedDFA, item_is_countable, unambiguous
from gramc.automata.tables import DEAD, DFATable
from gramc.formats.limits import ReadLimits
from gramc.limits import RuntimeLimits
from gramc.runtime.artifact import FINGERPRINT_ARTIFACT_VERSION, VocabInfo
from gramc.runtime.counted import COUNTED_ARRAYS, CountedArtifact, CountedTokenTable
from gramc.runtime.dfa_reader import DFA_ARRAYS, TOKEN_ARRAYS, check_coreachable, check_derived_rows, read_dfa, read_rows
from gramc.runtime.validate import check_arrays, get_field, in_range, no_extra, require
from gramc.runtime.vocab_bytes import VOCAB_BYTES_ARRAYS, bound_vocab, read_token_bytes
from gramc.vocab import Vocab


def read_payload(meta: dict, arrays: dict, source: dict, info: VocabInfo | None,
                 limits: ReadLimits, vocab: Vocab | None = None) -> CountedArtifact:
    """A counted artifact from a container whose header :mod:`gramc.runtime.reader` has
    checked, every array checked against its meaning (docs/format/gmask-v1.md, 11.6) before
    any of it is used. The stored token bytes are ``vocab``'s own, shared, where they equal
    them."""

    spec = {f"counted.{k}": v for k, v in COUNTED_ARRAYS.items()}
    stored_bytes = VOCAB_BYTES_ARRAYS if meta["artifact_version"] < FINGERPRINT_ARTIFACT_VERSION else {}
    no_extra(arrays, DFA_ARRAYS, spec, {**TOKEN_ARRAYS, **stored_bytes} if info else {})
    check_arrays(arrays, DFA_ARRAYS)
    check_arrays(arrays, spec)
    section = get_field(meta, "counted", dict)
    n_outer = arrays["dfa.delta"].shape[0]
    kind, ret = arrays["counted.call_kind"], arrays["counted.call_next"]
    bounds = get_field(section, "bounds", list, "metadata.counted")
    starts = get_field(section, "item_starts", list, "metadata.counted")
    n_items = len(bounds)
    require(n_items >= 1 and len(starts) == n_items, "metadata.counted must give bounds and a start per counter")
    require(all(isinstance(b, list) and len(b) == 2 and all(type(v) is int for v in b) and 1 <= b[0] <= b[1] < 2**31
                 for b in bounds), "metadata.counted.bounds must be [min, max] pairs with 1 <= min <= max < 2^31")
    require(kind.shape == (n_outer,) and ret.shape == (n_outer,), "counted.call_* must have one entry per state")
    in_range("counted.call_kind", kind, -1, n_items)
    in_range("counted.call_next", ret, 0, n_outer)
    require(bool(np.all((ret != DEAD) == (kind >= 0))), "counted.call_next must name a state exactly where a call is")
    require(len(arrays["dfa.token_ids"]) == 0, "a counted DFA has no special-token columns")
    outer = read_dfa({"dfa": get_field(meta, "counted", dict)}, arrays, ret)
    offset, classes = arrays["counted.item_offset"], arrays["counted.item_byte_class"]
    delta, accept = arrays["counted.item_delta"], arrays["counted.item_accept"]
    require(offset.shape == (n_items + 1,) and offset[0] == 0 and offset[-1] == len(delta)
             and bool(np.all(np.diff(offset) >= 2)), "counted.item_offset must run from 0 to the item states, "
             "two states (the dead one and the start) at least per item")
    require(classes.shape == (n_items, 256) and accept.shape == (len(delta),) and delta.shape[1] >= 1,
             "counted.item_* arrays differ in shape")
    in_range("counted.item_byte_class", classes, 0, delta.shape[1])
    items = []
    for k in range(n_items):
        a, b = int(offset[k]), int(offset[k + 1])
        sub, acc = delta[a:b], accept[a:b]
        in_range("counted.item_delta", sub, 0, b - a)
        start = starts[k]
        require(type(start) is int and 0 < start < b - a, f"counter {k}: item start out of range")
        require(not sub[DEAD].any() and not acc[DEAD], f"counter {k}: item state 0 must be the dead state")
        check_coreachable(sub, acc)
        item = DFATable(delta=sub, byte_class=classes[k], token_ids=np.zeros(0, dtype=np.int32), accept=acc, start=start)
        require(item_is_countable(item), f"counter {k}: the item may be empty, is too large, or reads on "
                 "from an accepting state")
        items.append(item)
    cdfa = CountedDFA(outer, kind, ret, tuple(items), np.array(bounds, dtype=np.int64))
    require(cdfa.n_states <= MAX_COUNTED_STATES, "the counted DFA has more states than int32 ids can number")
    require(unambiguous(cdfa), "a call of the counted DFA cannot be read unambiguously")
    if info is None:
        return CountedArtifact(cdfa, source)
    check_derived_rows(n_outer, info.size, limits)
    stores_bytes = meta["artifact_version"] < FINGERPRINT_ARTIFACT_VERSION
    known = read_token_bytes(arrays, info, vocab) if stores_bytes else bound_vocab(info, vocab)
    rows = read_rows(arrays, n_outer, info.size, cdfa.n_states)
    if known is not None:
        return CountedArtifact(cdfa, source, info, CountedTokenTable(cdfa, known, rows))
    art = CountedArtifact(cdfa, source, info)

    def attach(vocab: Vocab, limits: RuntimeLimits) -> None:
        art._table = CountedTokenTable(cdfa, vocab, rows, limits=limits)

    art._await_vocab(attach)
    return art
