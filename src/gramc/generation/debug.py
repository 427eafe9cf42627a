"""Seeing what the grammar allows at a step: the allowed token ids, decoded as text."""

from __future__ import annotations

from typing import Any

import numpy as np

from gramc.vocab import Vocab


def allowed_text(matcher: Any, vocab: Vocab | str | None = None, limit: int | None = 50,
                 scores: Any = None) -> list[tuple[int, str]]:
    """The tokens ``matcher`` allows now as ``(id, text)`` pairs.

    ``text`` is the token's bytes as a Python literal without the ``b`` (``'\\n'``, ``' {'``,
    ``'\\xe2\\x82'``); end-of-sequence and other special ids show as ``<eos:ID>`` /
    ``<special:ID>``. With ``scores`` (one row of logits) the most likely tokens come first,
    else ascending ids. At most ``limit`` pairs (None: all).
    """
    from gramc.generation.loop import resolve_token_bytes
    from gramc.generation.sampling import as_row

    token_bytes = resolve_token_bytes(matcher, vocab)
    ids = matcher.allowed_tokens()
    if scores is not None:
        row = as_row(scores, "scores")
        vals = np.full(len(ids), -np.inf)
        inside = ids < row.shape[0]
        vals[inside] = row[ids[inside]]
        ids = ids[np.argsort(-vals, kind="stable")]
    if limit is not None:
        ids = ids[:limit]
    eos = set(getattr(matcher, "_eos", ()))
    special = _special_ids(matcher, vocab)
    out = []
    for t in ids.tolist():
        if t in eos:
            out.append((t, f"<eos:{t}>"))
        elif t in special or token_bytes is None:
            out.append((t, f"<special:{t}>" if t in special else f"<id:{t}>"))
        else:
            out.append((t, repr(bytes(token_bytes[t]))[2:-1]))
    return out


def format_allowed(matcher: Any, vocab: Vocab | str | None = None, limit: int | None = 20,
                   scores: Any = None) -> str:
    """One line for a log: ``N allowed: 'a' 'ab' ' b' … <eos:50256>``."""
    pairs = allowed_text(matcher, vocab, None if limit is None else limit + 1, scores)
    total = len(matcher.allowed_tokens())
    shown = " ".join(f"'{text}'" if not text.startswith("<") else text for _, text in pairs[:limit])
    more = f" … (+{total - limit} more)" if limit is not None and total > limit else ""
    state = " [complete]" if matcher.is_complete() else ""
    return f"{total} allowed{state}: {shown}{more}"


def _special_ids(matcher: Any, vocab) -> frozenset[int]:
    if isinstance(vocab, Vocab):
        return vocab.special_ids
    table = getattr(getattr(matcher, "_artifact", None), "_table", None)
    special = getattr(table, "special", None)
    return frozenset(special) if special is not None else frozenset()
