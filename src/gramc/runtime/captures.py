"""Captures: the text spans of a grammar's named rules (llguidance Lark ``[capture]``), read
off the committed output.

An artifact whose source names captures carries a capture grammar (``meta["captures"]``, see
:mod:`gramc.compiler.captures`): the lowered grammar as a plain context-free grammar. Its
matchers are of a subclass (:func:`capturing_class`) that also keeps what was committed, as a
persistent list shared by rollback history and forks; :meth:`CapturingMatcher.captures` parses
it with an Earley recogniser on demand. Other artifacts' matchers are unchanged: a grammar
without captures pays nothing.

When a capture is reported: ``(name, start, end)`` is reported once *every* parse of the
output so far contains that rule spanning bytes ``start..end``, completed. More text can then
neither move nor remove it (every parse of a longer output extends a parse of this one). A
capture whose rule could still go on (``/[0-9]+/`` after ``12``), or that only some parses
hold (an ambiguous grammar), is not reported yet; once the output is final (EOS committed, or
``captures(final=True)``), only complete parses count, so the last one settles. This is checked
by parsing again with that one completion forbidden: the capture is reported when no parse
is left.
"""

from __future__ import annotations

from typing import Any, Sequence

from gramc.errors import UnsupportedFeatureError, VocabularyError
from gramc.runtime.matcher import Matcher

__all__ = ["CaptureGrammar", "Capture", "capturing_class"]

#: One reported capture: (name, start byte, end byte, the bytes).
Capture = tuple[str, int, int, bytes]

_Item = tuple[int, int, int]  # (alternative, dot, origin)


class CaptureGrammar:
    """The capture grammar of an artifact, ready to parse (unproductive alternatives removed)."""

    def __init__(self, doc: dict):
        rules = doc["rules"]
        self.start: int = doc["start"]
        self.names: dict[int, str] = {k: n for k, n in doc["names"]}
        self.unsupported: dict[str, str] = dict(doc.get("unsupported", {}))
        alts: list[tuple[int, tuple[Any, ...]]] = []
        self.tokens: set[int] = set()
        for lhs, alternatives in enumerate(rules):
            for alternative in alternatives:
                rhs: list[Any] = []
                for kind, value in alternative:
                    if kind == "r":
                        rhs.append(value)
                    elif kind == "b":
                        rhs.append(("b", int(value, 16)))
                    else:
                        rhs.append(("t", -1 - value))
                        self.tokens.add(value)
                alts.append((lhs, tuple(rhs)))
        productive: set[int] = set()
        changed = True
        while changed:
            changed = False
            for lhs, body in alts:
                if lhs not in productive and all(not isinstance(s, int) or s in productive for s in body):
                    productive.add(lhs)
                    changed = True
        self.alts = [(lhs, body) for lhs, body in alts
                     if all(not isinstance(s, int) or s in productive for s in body)]
        self.by_lhs: dict[int, list[int]] = {}
        for a, (lhs, _) in enumerate(self.alts):
            self.by_lhs.setdefault(lhs, []).append(a)
        self.nullable: set[int] = set()
        changed = True
        while changed:
            changed = False
            for lhs, body in self.alts:
                if lhs not in self.nullable and all(isinstance(s, int) and s in self.nullable for s in body):
                    self.nullable.add(lhs)
                    changed = True

        # Rules that can begin with themselves (A =>+ A ...): only they can hold two captures
        # starting at the same byte in one parse.
        left: dict[int, set[int]] = {}
        for lhs, body in self.alts:
            for sym in body:
                if not isinstance(sym, int):
                    break
                left.setdefault(lhs, set()).add(sym)
                if sym not in self.nullable:
                    break
        self.self_left: set[int] = set()
        for a in left:
            seen, todo = set(), list(left[a])
            while todo:
                b = todo.pop()
                if b not in seen:
                    seen.add(b)
                    todo.extend(left.get(b, ()))
            if a in seen:
                self.self_left.add(a)

    # ------------------------------------------------------------ the recogniser

    def parse(self, text: Sequence[int], blocked: tuple[int, int, int] | None = None,
              chart: list[set[_Item]] | None = None, waiting: list[dict[int, list[_Item]]] | None = None,
              restart: int = 0) -> tuple[list[set[_Item]], list[dict[int, list[_Item]]]]:
        """The Earley sets of ``text`` (bytes as 0-255, special token ``t`` as ``-1 - t``);
        ``blocked`` = (rule, origin, end) is a completion left out; with ``chart`` and
        ``waiting`` given, their sets before ``restart`` are kept and the rest recomputed."""
        chart = (chart or [])[:restart]
        waiting = (waiting or [])[:restart]
        if restart == 0:
            chart.append({(a, 0, 0) for a in self.by_lhs.get(self.start, ())})
        else:
            chart.append(self._scanned(text, chart[restart - 1], restart - 1))
        for i in range(restart, len(text) + 1):
            if i > restart:
                chart.append(self._scanned(text, chart[i - 1], i - 1))
            waiting.append({})
            self._close(i, chart, waiting, blocked)
            if not chart[i]:  # no parse goes on: the later sets are empty too
                chart += [set() for _ in range(i, len(text))]
                break
        return chart, waiting

    def _scanned(self, text: Sequence[int], items: set[_Item], i: int) -> set[_Item]:
        x = text[i]
        out = set()
        for a, d, o in items:
            rhs = self.alts[a][1]
            if d < len(rhs) and not isinstance(rhs[d], int):
                kind, value = rhs[d]
                if (kind == "b" and x >= 0 and (value >> x) & 1) or (kind == "t" and x == value):
                    out.add((a, d + 1, o))
        return out

    def _close(self, i: int, chart: list[set[_Item]], waiting: list[dict[int, list[_Item]]],
               blocked: tuple[int, int, int] | None) -> None:
        items, wait = chart[i], waiting[i]
        todo = list(items)
        while todo:
            a, d, o = todo.pop()
            lhs, rhs = self.alts[a]
            new: list[_Item] = []
            if d == len(rhs):
                if blocked != (lhs, o, i):
                    new = [(a2, d2 + 1, o2) for a2, d2, o2 in (waiting[o].get(lhs, ()) if o < i else ())]
            elif isinstance(rhs[d], int):
                b = rhs[d]
                first = b not in wait
                wait.setdefault(b, []).append((a, d, o))
                if first:
                    new = [(a2, 0, i) for a2 in self.by_lhs.get(b, ())]
                if b in self.nullable and blocked != (b, i, i):
                    new.append((a, d + 1, o))
            for item in new:
                if item not in items:
                    items.add(item)
                    todo.append(item)

    def _viable(self, chart: list[set[_Item]], final: bool) -> bool:
        """Some parse of the text is complete, or (not ``final``) still open: an item that
        expects more (its callers wait for it in earlier sets). A completed item alone may be
        one whose completion was blocked."""
        alts, start = self.alts, self.start
        for a, d, o in chart[-1]:
            done = d == len(alts[a][1])
            if (not final and not done) or (done and o == 0 and alts[a][0] == start):
                return True
        return False

    # ------------------------------------------------------------ captures

    def captures(self, text: Sequence[int], offsets: Sequence[int], data: bytes, final: bool) -> list[Capture]:
        """The settled captures of ``text`` (module doc); ``offsets[i]`` is the byte offset
        of symbol ``i`` (one past the end included) and ``data`` the output's bytes."""
        chart, waiting = self.parse(text)
        if not self._viable(chart, final):
            return []
        found = set()
        for end, items in enumerate(chart):
            for a, d, o in items:
                lhs, rhs = self.alts[a]
                if lhs in self.names and d == len(rhs):
                    found.add((lhs, o, end))
        out = []
        settled: set[tuple[int, int]] = set()
        # Latest end first: a rule that cannot begin with itself holds at most one capture per
        # start in a parse, so once one is in every parse the shorter candidates are not.
        for lhs, start, end in sorted(found, key=lambda c: (c[1], c[0], -c[2])):
            if (lhs, start) in settled:
                continue
            blocked_chart, _ = self.parse(text, (lhs, start, end), chart, waiting, end)
            if not self._viable(blocked_chart, final):
                a, b = offsets[start], offsets[end]
                out.append((self.names[lhs], a, b, data[a:b]))
                if lhs not in self.self_left:
                    settled.add((lhs, start))
        return sorted(out, key=lambda c: (c[1], c[2]))


class CapturingMatcher(Matcher):
    """What a matcher of an artifact with captures adds (mixed into its class by
    :func:`capturing_class`): the committed items, kept as a persistent linked list
    ``(previous, item)`` (a token id, or bytes) so that history and forks share it."""

    __slots__ = ()
    _log: Any
    _logs: Any

    def __init__(self, artifact: Any, max_rollback: int = 16):
        super().__init__(artifact, max_rollback)
        self._init_log()

    def _init_log(self) -> None:
        from collections import deque

        self._log = None
        self._logs = deque(maxlen=self.max_rollback)

    def commit_token(self, token_id: int) -> bool:
        log = self._log
        if not super().commit_token(token_id):
            return False
        if self.max_rollback:
            self._logs.append(log)
        if not self._ended:
            self._log = (log, int(token_id))
        return True

    def commit_bytes(self, data: bytes) -> bool:
        log = self._log
        if not super().commit_bytes(data):
            return False
        if self.max_rollback:
            self._logs.append(log)
        self._log = (log, bytes(data))
        return True

    def rollback(self, n: int = 1) -> None:
        super().rollback(n)  # checks n
        for _ in range(int(n)):
            self._log = self._logs.pop()

    def reset(self) -> None:
        super().reset()
        self._init_log()

    def _fork_extra(self, other: Any) -> None:
        super()._fork_extra(other)
        self._log, self._logs = other._log, other._logs.copy()

    def captures(self, *, final: bool | None = None, vocab: Any = None) -> list[Capture]:
        """The captures settled so far: ``(name, start byte, end byte, bytes)`` in order of
        start (module doc for when one is settled).

        Args:
            final: treat the output as complete (only complete parses count); default: once
                EOS was committed.
            vocab: the vocabulary's token bytes (a :class:`~gramc.vocab.Vocab`), needed only
                when the artifact does not store them and its vocabulary does not load by name.

        Raises:
            UnsupportedFeatureError: the grammar names a capture gramc does not report
                (``stop_capture``, or ``[capture]`` with ``stop=``/``suffix=``).
        """
        grammar: CaptureGrammar = self._artifact._capture_grammar()
        if grammar.unsupported:
            name, why = next(iter(grammar.unsupported.items()))
            raise UnsupportedFeatureError(f"capture {name!r}", None, f"capture {name!r}: {why}")
        items = []
        log = self._log
        while log is not None:
            log, item = log
            items.append(item)
        items.reverse()
        tokens: Sequence[bytes] = _token_bytes(self._artifact, vocab) if any(isinstance(x, int) for x in items) else ()
        text: list[int] = []
        offsets = [0]
        chunks = []
        for item in items:
            if isinstance(item, int) and item in grammar.tokens:
                text.append(-1 - item)
                data = tokens[item]
                offsets.append(offsets[-1] + len(data))
            else:
                data = tokens[item] if isinstance(item, int) else item
                text.extend(data)
                offsets.extend(range(offsets[-1] + 1, offsets[-1] + len(data) + 1))
            chunks.append(data)
        return grammar.captures(text, offsets, b"".join(chunks),
                                self._ended if final is None else final)


def _token_bytes(artifact: Any, vocab: Any) -> Sequence[bytes]:
    """The token bytes of ``artifact``'s vocabulary: ``vocab``, the ones the artifact
    stores, or its vocabulary loaded by name (checked by fingerprint)."""
    from gramc.vocab import load_vocab

    info = artifact.vocab
    if vocab is not None:
        vocab = load_vocab(vocab)
        if vocab.fingerprint != info.fingerprint:
            raise VocabularyError(f"vocabulary {vocab.name!r} is not the one the artifact was bound to")
        return vocab.tokens
    stored = getattr(getattr(artifact, "_table", None), "token_bytes", None)
    if stored is None:
        stored = getattr(getattr(getattr(artifact, "_table", None), "tokens", None), "token_bytes", None)
    if stored is not None:
        return stored
    try:
        found = load_vocab(info.name)
    except Exception:
        found = None
    if found is None or found.fingerprint != info.fingerprint:
        raise VocabularyError("captures need the token bytes: pass captures(vocab=...)")
    return found.tokens


_CLASSES: dict[type, type] = {}


def capturing_class(base: type) -> type:
    """``base`` (a matcher class) with :class:`CapturingMatcher` mixed in."""
    cls = _CLASSES.get(base)
    if cls is None:
        cls = _CLASSES[base] = type(f"Capturing{base.__name__}", (CapturingMatcher, base),
                                    {"__slots__": ("_log", "_logs")})
    return cls
