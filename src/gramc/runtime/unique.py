"""``uniqueItems`` as a runtime side condition: no array item equal to an earlier one.

Uniqueness is not context-free, so the grammar of a schema with ``uniqueItems`` accepts
duplicates and the matcher forbids them. The compiler records a *plan*
(:mod:`gramc.schemas.unique`): a graph of value nodes saying, along the document's JSON
structure, which arrays must have unique items (``u``) and where the nodes of nested values
are (``p``: by position, ``r``: the positions after those, ``k``: by member name, ``a``:
other names; -1 where nothing below must be unique). The JSON output itself says where each
value begins and ends, so a small incremental JSON scanner (:class:`Tracker`) follows the
output and keeps, per open unique array, the canonical values of its completed items
(JSON Schema equality: ``1`` equals ``1.0``, member order does not matter).

A mask is the grammar's mask less:

- the tokens that complete (or settle: the byte after a number or a literal) an item equal
  to an earlier item of its array; only tokens holding a byte that can end an item are
  checked, so masks away from item ends cost one row operation;
- the tokens after which the item being written can only end as a duplicate (a dead end): a
  token is checked when the item's text so far, insignificant whitespace left out, is a
  prefix of an earlier item's, by a breadth-first search of the item's completions through
  the grammar, bounded by :data:`SEARCH_BUDGET` expansions (past it the token is kept).

Both kinds of token are found from per-mode token rows (what a token does read from inside a
string or outside one: leave the string, close k levels, open an array) and an index of the
tokens by compact form, so a mask checks a few tokens, not every token with a quote; and
longest first, since a token that is a prefix of one that passed passes too.

The matcher's state is a pair (the grammar's state, the tracker's), both immutable, so
rollback and fork work as for any matcher.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections import deque
import decimal
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from gramc.bitmask import pack_dense
from gramc.errors import ArtifactFormatError
from gramc.runtime.cache import LRUCache

if TYPE_CHECKING:
    from gramc.vocab import Vocab

#: Grammar states a dead-end search may make before it keeps the token.
SEARCH_BUDGET = 4096
#: Dead-end searches remembered per artifact (and as many grammar states' witness bytes and
#: states after whitespace).
ALIVE_CACHE = 4096
#: (pattern, member name) matches remembered per plan.
MATCH_CACHE = 4096
#: Canonical values of completed items' texts remembered per plan.
CANONICAL_CACHE = 256
#: Bytes that can end an item (a string's quote, a container's bracket, what follows a
#: number or a literal).
SETTLE = b'"]},: \t\n\r'
SETTLE_SET = frozenset(SETTLE)
WS = frozenset(b" \t\n\r")
NUMBER = frozenset(b"0123456789+-.eE")

#: Closing-bracket counts told apart when selecting the tokens that may complete an item (a
#: token with more counts as this many: a superset, so still sound).
CLOSE_LEVELS = 4

#: The bytes of JSON text outside strings (and a string's opening quote).
OUTSIDE_BYTES = frozenset(b'{}[],:"0123456789+-.eEtruefalsn') | WS

#: Lexical states of the tracker.
_NONE, _STR, _ESC, _NUM, _LIT = range(5)


# ---------------------------------------------------------------- the plan


class Plan:
    """The compiled plan, checked (see the module doc for its fields).

    Stored as ``{"root": int, "nodes": [{"u": bool, "p": [int], "r": int, "k": {str: int},
    "a": int}]}``; every node index is checked to be in range (or -1)."""

    __slots__ = ("root", "unique", "prefix", "rest", "keys", "other", "order", "has_order", "raw", "routes",
                 "route_patterns", "patterns", "_matches", "_canonical")

    def __init__(self, raw: Any):
        if not isinstance(raw, dict) or not isinstance(raw.get("nodes"), list) \
                or not set(raw) <= {"root", "nodes", "patterns"}:
            raise ArtifactFormatError("the uniqueItems plan must be a map with a 'nodes' list (and 'patterns')")
        nodes = raw["nodes"]
        n = len(nodes)
        raw_patterns = raw.get("patterns", [])
        if not isinstance(raw_patterns, list):
            raise ArtifactFormatError("uniqueItems plan: 'patterns' must be a list")
        self.patterns = [NamePattern.read(p, i) for i, p in enumerate(raw_patterns)]
        self._matches = LRUCache(MATCH_CACHE)
        self._canonical = LRUCache(CANONICAL_CACHE)

        def index(v: Any, where: str) -> int:
            if not isinstance(v, int) or isinstance(v, bool) or not -1 <= v < n:
                raise ArtifactFormatError(f"uniqueItems plan: {where} must be a node index in [-1, {n}), got {v!r}")
            return v

        self.root = index(raw.get("root"), "root")
        self.unique: list[bool] = []
        self.prefix: list[tuple[int, ...]] = []
        self.rest: list[int] = []
        self.keys: list[dict[str, int]] = []
        self.other: list[int] = []
        self.order: list[Order | None] = []
        self.routes: list[dict[frozenset[int], int] | None] = []
        self.route_patterns: list[list[int]] = []
        for i, node in enumerate(nodes):
            if not isinstance(node, dict) or not {"u", "p", "r", "k", "a"} <= set(node) <= {"u", "p", "r", "k", "a", "o", "m"}:
                raise ArtifactFormatError(f"uniqueItems plan: node {i} must have exactly the fields u, p, r, k, a "
                                          "(and o where an object's members are checked, m where names are "
                                          "routed by pattern)")
            self.order.append(Order.read(node["o"], i) if "o" in node else None)
            self.routes.append(self._read_routes(node["m"], i, index) if "m" in node else None)
            self.route_patterns.append(sorted({p for r in self.routes[-1] or () for p in r}))
            if not isinstance(node["u"], bool) or not isinstance(node["p"], list) or not isinstance(node["k"], dict):
                raise ArtifactFormatError(f"uniqueItems plan: node {i} has a field of the wrong type")
            self.unique.append(node["u"])
            self.prefix.append(tuple(index(v, f"node {i} p") for v in node["p"]))
            self.rest.append(index(node["r"], f"node {i} r"))
            if not all(isinstance(k, str) for k in node["k"]):
                raise ArtifactFormatError(f"uniqueItems plan: node {i} has a member name that is not a string")
            self.keys.append({k: index(v, f"node {i} k") for k, v in node["k"].items()})
            self.other.append(index(node["a"], f"node {i} a"))
        self.has_order = any(o is not None for o in self.order)
        self.raw = raw

    def _read_routes(self, raw: Any, i: int, index: Any) -> dict[frozenset[int], int]:
        """A node's ``m``: ``[[pattern indices, node], ...]``, each region once, not empty."""
        if not isinstance(raw, list):
            raise ArtifactFormatError(f"uniqueItems plan: node {i} m must be a list of [patterns, node]")
        out: dict[frozenset[int], int] = {}
        for route in raw:
            if (not isinstance(route, list) or len(route) != 2 or not isinstance(route[0], list) or not route[0]
                    or not all(isinstance(p, int) and not isinstance(p, bool) and 0 <= p < len(self.patterns)
                               for p in route[0])):
                raise ArtifactFormatError(f"uniqueItems plan: node {i} m: each route must be [pattern indices in "
                                          f"[0, {len(self.patterns)}), node]")
            region = frozenset(route[0])
            if region in out or len(region) != len(route[0]):
                raise ArtifactFormatError(f"uniqueItems plan: node {i} m: a region is listed twice")
            out[region] = index(route[1], f"node {i} m")
        return out

    def item(self, node: int, i: int) -> int:
        if node < 0:
            return -1
        p = self.prefix[node]
        return p[i] if i < len(p) else self.rest[node]

    def member(self, node: int, key: str) -> int:
        if node < 0:
            return -1
        keys = self.keys[node]
        if key in keys:
            return keys[key]
        routes = self.routes[node]
        if routes is None:
            return self.other[node]
        region = frozenset(i for i in self.route_patterns[node] if self.matches(i, key))
        return routes.get(region, -1) if region else self.other[node]

    def canonical(self, text: bytes) -> Any:
        """:func:`canonical` of an item's compact text, remembered (the candidates of one mask
        often complete the same item; bounded by :data:`CANONICAL_CACHE`)."""
        value = self._canonical.get(text)
        if value is None:
            value = self._canonical.put(text, canonical(text))
        return value

    def matches(self, pattern: int, name: str) -> bool:
        """Does member name ``name`` match pattern ``pattern`` (remembered, bounded)?"""
        key = (pattern, name)
        hit = self._matches.get(key)
        if hit is None:
            hit = self._matches.put(key, self.patterns[pattern].matches(name))
        return bool(hit)


class NamePattern:
    """A ``patternProperties`` regex as the DFA of the JSON string literals (as
    ``json.dumps`` writes them) whose value it matches, stored as ``{"c": byte classes
    (256), "d": next states [S][C], "f": accepting states, "s": start}`` (state 0 is dead)."""

    __slots__ = ("byte_class", "delta", "accept", "start")

    def __init__(self, byte_class: list[int], delta: list[list[int]], accept: frozenset[int], start: int):
        self.byte_class, self.delta, self.accept, self.start = byte_class, delta, accept, start

    @classmethod
    def read(cls, raw: Any, i: int) -> "NamePattern":
        def ints(v: Any) -> bool:
            return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)

        where = f"uniqueItems plan: pattern {i}"
        if not isinstance(raw, dict) or set(raw) != {"c", "d", "f", "s"}:
            raise ArtifactFormatError(f"{where} must have exactly the fields c, d, f, s")
        c, d, f, s = raw["c"], raw["d"], raw["f"], raw["s"]
        if not (ints(c) and len(c) == 256 and isinstance(d, list) and d and all(ints(row) for row in d) and ints(f)
                and isinstance(s, int) and not isinstance(s, bool)):
            raise ArtifactFormatError(f"{where} has a field of the wrong type")
        n_states, n_classes = len(d), len(d[0])
        if (not all(0 <= x < n_classes for x in c) or any(len(row) != n_classes for row in d)
                or not all(0 <= x < n_states for row in d for x in row) or not all(0 <= x < n_states for x in f)
                or not 0 <= s < n_states):
            raise ArtifactFormatError(f"{where}: a byte class, state or start out of range")
        return cls(c, d, frozenset(f), s)

    def matches(self, name: str) -> bool:
        state = self.start
        for b in json.dumps(name).encode():
            state = self.delta[state][self.byte_class[b]]
            if state == 0:
                return False
        return state in self.accept


class Order:
    """The members side condition of an object whose declared members may come in any order
    (stored as ``"o": [names, required]``): each name of ``names`` at most once, and ``}``
    only once every name of ``required`` (a subset of ``names``) was written."""

    __slots__ = ("names", "required", "plain")

    def __init__(self, names: frozenset[str], required: frozenset[str]):
        self.names, self.required = names, required
        #: every name is written raw only (printable ASCII, no quote or backslash): a key's
        #: text so far can then be compared with the names' texts byte by byte.
        self.plain = all(n.isascii() and n.isprintable() and '"' not in n and "\\" not in n for n in names)

    @classmethod
    def read(cls, raw: Any, i: int) -> "Order":
        if (not isinstance(raw, list) or len(raw) != 2 or not all(isinstance(x, list) for x in raw)
                or not all(isinstance(n, str) for x in raw for n in x)):
            raise ArtifactFormatError(f"uniqueItems plan: node {i} o must be [names, required], lists of strings")
        names, required = frozenset(raw[0]), frozenset(raw[1])
        if not required <= names:
            raise ArtifactFormatError(f"uniqueItems plan: node {i} o: a required name is not among the names")
        return cls(names, required)


# ---------------------------------------------------------------- canonical values


def canonical(text: bytes) -> Any:
    """The JSON value of ``text`` in a form whose equality is JSON Schema's (numbers by value,
    ``true`` not ``1``, objects as sets of members)."""
    return _canon(json.loads(text, parse_float=Decimal, parse_int=Decimal))


def _canon(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return ("b", v)
    if isinstance(v, Decimal):
        return ("n", _number(v))
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, list):
        return ("a", tuple(_canon(x) for x in v))
    return ("o", frozenset((k, _canon(x)) for k, x in v.items()))


def _number(d: Decimal) -> Any:
    try:
        if d.is_zero():
            return "0"
        return str(d.normalize(_WIDE))
    except InvalidOperation:  # pragma: no cover - a finite JSON number always normalises
        return str(d)


_WIDE = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


#: Where :func:`compact` begins reading: outside a string, inside one, after a backslash in one.
#: (:data:`NEXT`: outside, past the whitespace and commas that come before the next item.)
OUTSIDE, INSIDE, ESCAPED, NEXT = range(4)
_WS_RE = re.compile(rb"[ \t\n\r]")
_WS_BYTES = b" \t\n\r"


def compact(text: bytes, start: int = OUTSIDE) -> bytes:
    """``text`` without the whitespace outside strings (a partial text included), read from
    ``start`` (one of :data:`OUTSIDE`, :data:`INSIDE`, :data:`ESCAPED`)."""
    if _WS_RE.search(text) is None:
        return text
    if b'"' not in text:  # never leaves (or enters) a string: what it is read as decides
        return text if start != OUTSIDE else text.translate(None, _WS_BYTES)
    out = bytearray()
    in_str, esc = start != OUTSIDE, start == ESCAPED
    for b in text:
        if in_str:
            out.append(b)
            if esc:
                esc = False
            elif b == 0x5C:
                esc = True
            elif b == 0x22:
                in_str = False
        elif b not in WS:
            out.append(b)
            in_str = b == 0x22
    return bytes(out)


# ---------------------------------------------------------------- the tracker


class Frame:
    """An open array or object (immutable)."""

    __slots__ = ("node", "array", "count", "seen", "raws", "start", "key", "key_next")

    def __init__(self, node: int, array: bool, count: int = 0, seen: frozenset = frozenset(),
                 raws: tuple = (), start: int = -1, key: str | None = None, key_next: bool = True):
        self.node, self.array, self.count, self.seen, self.raws = node, array, count, seen, raws
        self.start, self.key, self.key_next = start, key, key_next

    def but(self, **changes: Any) -> "Frame":
        f = Frame(self.node, self.array, self.count, self.seen, self.raws, self.start, self.key, self.key_next)
        for k, v in changes.items():
            setattr(f, k, v)
        return f


class Text:
    """The output so far as a persistent chain of chunks (shared by forks and histories)."""

    __slots__ = ("parent", "data", "end")

    def __init__(self, parent: "Text | None", data: bytes):
        self.parent, self.data = parent, data
        self.end: int = (parent.end if parent else 0) + len(data)

    def slice(self, a: int, b: int) -> bytes:
        parts = []
        t: Text | None = self
        while t is not None and t.end > a:
            lo = t.end - len(t.data)
            if lo < b:
                parts.append(t.data[max(a - lo, 0): b - lo])
            t = t.parent
        return b"".join(reversed(parts))


class Tracker:
    """Where the output is in the JSON structure, and the items of its open unique arrays.

    ``feed`` returns the state after more bytes, or None when they complete an item equal to
    an earlier one of a unique array. The grammar, not the tracker, decides what is valid
    JSON: the tracker only follows it."""

    __slots__ = ("plan", "frames", "lex", "lex_start", "text", "n_unique", "top_done", "n_order", "_items",
                 "_prev")

    def __init__(self, plan: Plan, frames: tuple[Frame, ...] = (), lex: int = _NONE, lex_start: int = -1,
                 text: Text | None = None, n_unique: int = 0, top_done: bool = False, n_order: int = 0,
                 prev: "Tracker | None" = None):
        self.plan, self.frames, self.lex, self.lex_start = plan, frames, lex, lex_start
        self.text, self.n_unique, self.top_done, self.n_order = text, n_unique, top_done, n_order
        #: per frame, the compact text of the unique array's item being written (made on
        #: first use, from ``_prev``'s where it has them: see :meth:`items_written`)
        self._items: tuple[bytes | None, ...] | None = None
        self._prev = prev

    @property
    def pos(self) -> int:
        return self.text.end if self.text else 0

    def feed(self, data: bytes) -> "Tracker | None":
        if not data:
            return self
        if self.n_unique == 0 and not self.frames and self.top_done:
            return self
        plan = self.plan
        frames = list(self.frames)
        lex, lex_start, n_unique, n_order = self.lex, self.lex_start, self.n_unique, self.n_order
        text = Text(self.text, data)
        base = text.end - len(data)
        prior = self._items  # the compact texts of the items being written, where made
        prior_mode = self.read_mode()

        def child_node() -> int:
            if not frames:
                return plan.root
            f = frames[-1]
            if f.array:
                return plan.item(f.node, f.count - 1)
            return plan.member(f.node, f.key or "")

        def begin(pos: int) -> None:
            """A value begins at ``pos`` (in an array: a new item)."""
            if frames and frames[-1].array:
                f = frames[-1]
                frames[-1] = f.but(count=f.count + 1, start=pos)

        def end(pos: int) -> bool:
            """The value that began last in the top frame ended at ``pos``: False on a
            duplicate."""
            if not frames:
                return True
            f = frames[-1]
            if not f.array or f.node < 0 or not plan.unique[f.node]:
                if f.array:
                    frames[-1] = f.but(start=-1)
                return True
            depth = len(frames) - 1
            before = prior[depth] if prior is not None and f.start < base and depth < len(prior) else None
            if before is not None:  # begun before these bytes: its text so far is made
                raw = before + compact(data[: pos - base], prior_mode)
            else:
                raw = compact(text.slice(f.start, pos))
            value = plan.canonical(raw)
            if value in f.seen:
                return False
            frames[-1] = f.but(seen=f.seen | {value}, raws=f.raws + (raw,), start=-1)
            return True

        i = 0
        n = len(data)
        while i < n:
            b = data[i]
            pos = base + i
            if lex == _STR:
                if b == 0x5C:
                    lex = _ESC
                elif b == 0x22:
                    lex = _NONE
                    f = frames[-1] if frames else None
                    if f is not None and not f.array and f.key_next:
                        key = _member_name(text.slice(lex_start, pos + 1))
                        order = plan.order[f.node] if f.node >= 0 else None
                        if order is not None and key in order.names:  # a declared name: once
                            if key in f.seen:
                                return None
                            frames[-1] = f.but(key=key, key_next=False, seen=f.seen | {key})
                        else:
                            frames[-1] = f.but(key=key, key_next=False)
                    elif not end(pos + 1):
                        return None
                i += 1
                continue
            if lex == _ESC:
                lex = _STR
                i += 1
                continue
            if lex == _NUM:
                if b in NUMBER:
                    i += 1
                    continue
                lex = _NONE
                if not end(pos):
                    return None
            elif lex == _LIT:
                if 0x61 <= b <= 0x7A:
                    i += 1
                    continue
                lex = _NONE
                if not end(pos):
                    return None
            # structural position
            if b in WS or b == 0x3A:
                pass
            elif b == 0x2C:
                if frames and not frames[-1].array:
                    frames[-1] = frames[-1].but(key_next=True, key=None)
            elif b == 0x22:
                lex, lex_start = _STR, pos
                if not (frames and not frames[-1].array and frames[-1].key_next):
                    begin(pos)
            elif b == 0x7B or b == 0x5B:
                begin(pos)
                node = child_node() if frames or not self.top_done else -1
                array = b == 0x5B
                if array and node >= 0 and plan.unique[node]:
                    n_unique += 1
                if not array and node >= 0 and plan.order[node] is not None:
                    n_order += 1
                frames.append(Frame(node, array))
            elif b == 0x7D or b == 0x5D:
                if not frames:  # not JSON: the grammar is not a schema's
                    return self._untracked(text)
                f = frames.pop()
                if f.array and f.node >= 0 and plan.unique[f.node]:
                    n_unique -= 1
                order = None if f.array or f.node < 0 else plan.order[f.node]
                if order is not None:  # every required name written?
                    if not order.required <= f.seen:
                        return None
                    n_order -= 1
                if not end(pos + 1):
                    return None
            elif b in NUMBER:
                begin(pos)
                lex, lex_start = _NUM, pos
            elif 0x61 <= b <= 0x7A:
                begin(pos)
                lex, lex_start = _LIT, pos
            i += 1
        done = self.top_done or (not frames and lex == _NONE)
        # the new tracker's items go on from this one's where they were made (so no chain of
        # trackers is ever held)
        prev = self if self._items is not None else None
        return Tracker(plan, tuple(frames), lex, lex_start, text, n_unique, done, n_order, prev)

    def _untracked(self, text: Text) -> "Tracker":
        return Tracker(self.plan, (), _NONE, -1, text, 0, True)

    def read_mode(self) -> int:
        """Where the next byte is read (:data:`INSIDE`, :data:`ESCAPED` or :data:`OUTSIDE` a
        string), as :func:`compact` and the token rows take it."""
        return INSIDE if self.lex == _STR else ESCAPED if self.lex == _ESC else OUTSIDE

    def item_goals(self) -> list[tuple[int, int]]:
        """Per open unique array with earlier items: its depth and its count of completed
        items (what :meth:`settled` compares with later)."""
        return [(d, len(self.frames[d].raws)) for d, _ in self.open_items()]

    def items_written(self) -> tuple[bytes | None, ...]:
        """Per frame: in a unique array, the compact text of the item being written (None
        elsewhere, or where no item has begun since the last ended). Kept once made; made
        from the tracker fed last's where that one has them (an item begun before the last
        bytes goes on with their compact form), else from the text."""
        if self._items is not None:
            return self._items
        prev, self._prev = self._prev, None  # (held until now: see feed)
        pos = self.pos
        earlier = prev._items if prev is not None else None
        base = prev.pos if prev is not None else -1
        tail: bytes | None = None
        unique = self.plan.unique
        out: list[bytes | None] = []
        for d, f in enumerate(self.frames):
            if not (f.array and f.node >= 0 and unique[f.node] and f.start >= 0 and self.text):
                out.append(None)
                continue
            # begun before the last bytes: the same frame and item as the earlier tracker's
            before = earlier[d] if earlier is not None and f.start < base and d < len(earlier) else None
            if before is None:
                out.append(compact(self.text.slice(f.start, pos)))
                continue
            if tail is None:
                assert prev is not None
                mode = prev.read_mode()
                tail = compact(self.text.slice(base, pos), mode)
            out.append(before + tail)
        self._items = tuple(out)
        return self._items

    def open_items(self) -> list[tuple[int, bytes | None]]:
        """Per open unique array with earlier items (innermost first): its depth and the
        compact text of the item being written (None: no item begun since the last ended)."""
        items, unique = self.items_written(), self.plan.unique
        return [(d, items[d]) for d in range(len(self.frames) - 1, -1, -1)
                if (f := self.frames[d]).raws and f.array and f.node >= 0 and unique[f.node]]

    def key(self) -> tuple:
        """What the tracker's future depends on (for memoising searches)."""
        items = self.items_written()
        frames = tuple((f.node, f.array, f.count, f.seen, f.key, f.key_next, items[d])
                       for d, f in enumerate(self.frames))
        lexeme = self.text.slice(self.lex_start, self.pos) if self.lex != _NONE and self.text else None
        return (self.lex, lexeme, self.top_done, frames)

    def unique_depth(self) -> int:
        """How many frames lie above the innermost open unique array (-1: none is open)."""
        if not self.n_unique:
            return -1
        unique = self.plan.unique
        for d in range(len(self.frames) - 1, -1, -1):
            f = self.frames[d]
            if f.array and f.node >= 0 and unique[f.node]:
                return len(self.frames) - 1 - d
        return -1  # pragma: no cover - n_unique counts the open ones

    def order_depth(self) -> int:
        """How many frames lie above the innermost object with a members condition (-1:
        none is open)."""
        if not self.n_order:
            return -1
        order = self.plan.order
        for d in range(len(self.frames) - 1, -1, -1):
            f = self.frames[d]
            if not f.array and f.node >= 0 and order[f.node] is not None:
                return len(self.frames) - 1 - d
        return -1  # pragma: no cover - n_order counts the open ones

    def in_key(self) -> bool:
        """Is the output inside a member name of its innermost frame (an object)?"""
        return (self.lex == _STR or self.lex == _ESC) and bool(self.frames) and not self.frames[-1].array \
            and self.frames[-1].key_next

    def key_text(self) -> bytes:
        """The text of the member name being written, after its opening quote."""
        return self.text.slice(self.lex_start + 1, self.pos) if self.text else b""

    def order_risky(self) -> bool:
        """Could the member being begun in the innermost object (one with a members
        condition) only end as a name already written? Where a name is being written, when
        its text so far begins a written name's text (any written name, where the names have
        escaped spellings); after a comma, when every declared name was written (only
        undeclared ones are left, if the schema allows any)."""
        if not self.frames or self.frames[-1].array:
            return False
        f = self.frames[-1]
        order = self.plan.order[f.node] if f.node >= 0 else None
        if order is None or not f.key_next:
            return False
        if self.in_key():
            if not order.plain:
                return bool(f.seen)
            partial = self.key_text()
            return any(name.encode().startswith(partial) for name in f.seen)
        return self.lex == _NONE and order.names <= f.seen

    def settled(self, depth: int, n_raws: int) -> bool:
        """Has the array at ``depth`` (``n_raws`` items completed then) completed one since,
        or closed?"""
        if len(self.frames) <= depth:
            return True
        f = self.frames[depth]
        return len(f.raws) > n_raws


# ---------------------------------------------------------------- masks


class VocabRows:
    """What masks need of a vocabulary, whatever the plan: per-mode token rows, tokens by
    bytes and by compact form. Made once per vocabulary (:func:`vocab_rows`)."""

    def __init__(self, tokens: Sequence[bytes], special: frozenset[int]):
        self.tokens = tokens
        self.special = special
        size = len(tokens)
        self.size = size
        lengths = np.fromiter((len(d) for d in tokens), dtype=np.int64, count=size)
        owner = np.repeat(np.arange(size), lengths)
        has = np.zeros((256, size), dtype=bool)
        has[np.frombuffer(b"".join(tokens), dtype=np.uint8), owner] = True
        has[:, sorted(special)] = False
        settle = has[list(SETTLE)].any(axis=0)
        flat = np.frombuffer(b"".join(tokens), dtype=np.uint8)
        at = np.arange(len(flat))

        def first(byte_set: bytes) -> np.ndarray:  # per token: where its first byte of the set is
            where = np.isin(flat, np.frombuffer(byte_set, dtype=np.uint8))
            out = np.full(size, len(flat), dtype=np.int64)
            np.minimum.at(out, owner[where], at[where])
            return out

        settles = np.isin(flat, np.frombuffer(SETTLE, dtype=np.uint8))
        last_settle = np.full(size, -1, dtype=np.int64)
        np.maximum.at(last_settle, owner[settles], at[settles])
        self.quote, self.settle = pack_dense(np.stack([has[0x22], settle]))
        #: per form mode, the tokens whose compact form may differ from their bytes and may be
        #: looked up: outside strings, a form is JSON's structural text, so a token without a
        #: quote and with another byte never has one
        ws = has[list(WS)].any(axis=0)
        structural = has[0x22] | ~has[sorted(set(range(256)) - OUTSIDE_BYTES)].any(axis=0)
        self.reform = {OUTSIDE: np.flatnonzero(ws & structural), INSIDE: np.flatnonzero(ws & has[0x22]),
                       ESCAPED: np.flatnonzero(ws & has[0x22]), NEXT: np.flatnonzero((ws | has[0x2C]) & structural)}
        closes = np.zeros(size, dtype=np.int64)
        np.add.at(closes, owner, (flat == 0x5D) | (flat == 0x7D))
        closes[sorted(special)] = 0
        #: per lexical mode the tokens read structurally, by :func:`token_events`
        self.events = {mode: _event_rows(tokens, special, has, mode) for mode in (OUTSIDE, INSIDE, ESCAPED)}
        # members conditions: what can end a name, begin one (a comma) or close an object;
        # the same after closing an inner value; what can open an object
        member = has[0x22] | has[0x2C] | has[0x7D]
        quotes = np.fromiter((d.count(b'"') for d in tokens), dtype=np.int64, count=size)
        quotes[sorted(special)] = 0
        # from between items: what can write a whole item (a string, a closed container, a
        # number or a literal followed by a byte that settles it)
        whole = (quotes >= 2) | (closes >= 1) | (first(bytes(NUMBER) + bytes(range(0x61, 0x7B))) < last_settle)
        whole[sorted(special)] = False
        self.whole = pack_dense(whole[None, :])[0]
        # inside a string value: what closes it and then begins or ends a member
        value_end = has[0x22] & (has[0x2C] | has[0x7D] | (quotes > 1))
        # outside strings, past a name: what ends the member (or writes a whole string and more)
        after_name = has[0x2C] | has[0x7D] | (quotes > 1) | has[0x7B]
        self.member, self.deep_member, self.brace, self.value_end, self.after_name = pack_dense(
            np.stack([member, member & (has[0x5D] | has[0x7D]), has[0x7B], value_end, after_name]))
        self.every = pack_dense(~np.isin(np.arange(size), sorted(special))[None, :])[0]
        order = sorted((data, t) for t, data in enumerate(tokens) if t not in special and data)
        self.sorted = [d for d, _ in order]
        self.sorted_ids = [t for _, t in order]
        self.max_len = max((len(d) for d in self.sorted), default=0)
        self._index: dict[int, dict[bytes, list[int]]] = {}

    def form_tokens(self, form: bytes, mode: int) -> list[int]:
        """The tokens whose compact form read from ``mode`` is ``form`` (:data:`NEXT`: read
        outside a string without the whitespace and commas they begin with, as a token that
        begins the next item reads)."""
        out = self.prefix_tokens(form, exact=True) if form else []
        other = self._index.get(mode)
        if other is None:  # the tokens whose form differs from their bytes, made on first use
            other = {}
            for t in self.reform[mode].tolist():
                data = self.tokens[t]
                f = compact(data.lstrip(b" \t\n\r,"), OUTSIDE) if mode == NEXT else compact(data, mode)
                if f != data:
                    other.setdefault(f, []).append(t)
            self._index[mode] = other  # whole (the rows are shared by every artifact's matchers)
        return out + other.get(form, [])

    def prefix_tokens(self, rem: bytes, exact: bool = False) -> list[int]:
        """The tokens that are non-empty prefixes of ``rem`` (``exact``: equal to it)."""
        out = []
        for n in range(len(rem) if exact else 1, min(len(rem), self.max_len) + 1):
            key = rem[:n]
            i = bisect_left(self.sorted, key)
            while i < len(self.sorted) and self.sorted[i] == key:
                out.append(self.sorted_ids[i])
                i += 1
        return out


#: Vocabularies whose rows are kept (the most recently used), as many as tries.
MAX_VOCAB_ROWS = 8
_VOCAB_ROWS = LRUCache(MAX_VOCAB_ROWS)


def vocab_rows(vocab: "Vocab") -> VocabRows:
    """The :class:`VocabRows` of ``vocab``, made once per fingerprint in this process (while
    among the :data:`MAX_VOCAB_ROWS` most recently used): every artifact bound to one
    vocabulary shares them."""
    rows = _VOCAB_ROWS.get(vocab.fingerprint)
    if rows is None:
        rows = _VOCAB_ROWS.put(vocab.fingerprint, VocabRows(vocab.tokens, frozenset(vocab.special_ids)))
    return rows


class UniqueCheck:
    """A plan checked against a vocabulary's :class:`VocabRows`; remembers its dead-end
    searches (by the grammar's state, so per artifact)."""

    def __init__(self, plan: Plan, rows: VocabRows):
        self.plan = plan
        self.rows = rows
        self.tokens = rows.tokens
        self.special = rows.special
        self._alive = LRUCache(ALIVE_CACHE)
        self._witness = LRUCache(ALIVE_CACHE)  # grammar state key -> bytes that showed one alive
        self._blank = LRUCache(ALIVE_CACHE)  # grammar state key -> every whitespace run leads to one key

    def initial(self) -> Tracker:
        return Tracker(self.plan)

    def filter(self, words: np.ndarray, tracker: Tracker, base_state: Any, engine: "Engine") -> np.ndarray:
        """``words`` (the grammar's packed row) less the tokens that complete a duplicate item
        or lead only to one."""
        if tracker.top_done and not tracker.frames:
            return words
        sel = self._item_ends(tracker)
        more: list[int] = []
        if self.plan.has_order:
            order_sel, more = self._order_select(tracker)
            sel = sel | order_sel
        hits = words & sel
        cand = _ids(hits)
        if more:
            cand = sorted(set(cand).union(t for t in more if _bit(words, t)))
        cand_set = set(cand).union(t for t in self._prefix_candidates(tracker) if _bit(words, t))
        tokens = self.tokens
        drop = []
        blank = [t for t in cand_set if not tokens[t].strip(_WS_BYTES)] if tracker.lex not in (_STR, _ESC) else []
        if len(blank) > 1:  # whitespace outside strings: one verdict where the grammar allows it
            after = self._blank_after(base_state, engine)
            if after is not None:
                cand_set.difference_update(blank)
                nxt = tracker.feed(b" ")
                if nxt is None or (_risky(nxt) and not self.alive(after, nxt, engine)):
                    drop += blank
        covered: set[bytes] = set()  # every prefix of a token that passed
        # no duplicate completed and no dead end after; longest first: a token that is a prefix
        # of one that passed passes too (the longer one's bytes go through its state)
        for t in sorted(cand_set, key=lambda t: (-len(tokens[t]), t)):
            data = tokens[t]
            if data in covered:
                continue
            nxt = tracker.feed(data)
            if nxt is None or (_risky(nxt) and not self._token_alive(base_state, t, nxt, engine)):
                drop.append(t)
            else:
                covered.update(data[:i] for i in range(1, len(data) + 1))
        if not drop:
            return words
        out = words.copy()
        for t in drop:
            out[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)
        out.flags.writeable = False
        return out

    def _item_ends(self, tracker: Tracker) -> np.ndarray:
        """The tokens that may complete an item of an open unique array (a packed row): with
        the innermost one k frames down, those with k closing brackets (and a quote, inside a
        string); in it, what ends the item being written (a quote in a string, a settling byte
        after a number or a literal) or writes a whole one; always those that open an array
        and may complete an item of it."""
        k = tracker.unique_depth()
        lex = tracker.lex
        ev = self.rows.events[tracker.read_mode()]
        if k < 0:
            return ev.opens
        if k == 0:
            sel = ev.leaves if lex == _STR or lex == _ESC else self.rows.whole if lex == _NONE else self.rows.settle
        else:
            sel = ev.closing[min(k, CLOSE_LEVELS) - 1]
        return sel | ev.opens

    def _order_select(self, tracker: Tracker) -> tuple[np.ndarray, list[int]]:
        """The tokens to check for the members conditions: a packed row, and token ids.
        Inside a member name of such an object: the tokens that end the name, and those
        after which the name's text begins a name already written (every token, where the
        names have escaped spellings); inside a string value of it: the tokens that end the
        string and then write a quote, a comma or a closing brace; elsewhere past a name:
        the tokens with a comma, a closing brace, an opening one or two quotes; where a name
        may begin: the tokens with a quote, a comma or a closing brace; when inner values
        are open, those with a closing bracket or brace too; outside one: the tokens that
        open an object."""
        d = tracker.order_depth()
        if d < 0:
            return self.rows.brace, []
        if d > 0:
            return self.rows.deep_member | self.rows.brace, []
        if not tracker.in_key():
            if tracker.lex == _STR or tracker.lex == _ESC:  # a string value: only what ends it and goes on
                return self.rows.value_end, []
            if not tracker.frames[-1].key_next:  # a value begins or ends: what can end the member
                return self.rows.after_name, []
            return self.rows.member | self.rows.brace, []
        f = tracker.frames[-1]
        order = self.plan.order[f.node]
        assert order is not None
        if not order.plain:
            return self.rows.every, []
        partial = tracker.key_text()
        more: list[int] = []
        for name in f.seen:
            raw = name.encode()
            if raw.startswith(partial) and len(raw) > len(partial):
                more += self.rows.prefix_tokens(raw[len(partial):])
        return self.rows.quote, more

    def _token_alive(self, base_state: Any, t: int, tracker: Tracker, engine: "Engine") -> bool:
        nxt = engine.step_token(base_state, t)
        return nxt is None or self.alive(nxt, tracker, engine)

    def _blank_after(self, state: Any, engine: "Engine") -> Any | None:
        """:meth:`_blank_state`, its verdict remembered by the grammar state's key (not the
        state: a parser's state holds its whole chart)."""
        key = engine.key(state)
        if key is None:
            return self._blank_state(state, engine)
        one = self._blank.get(key)
        if one is None:
            after = self._blank_state(state, engine)
            self._blank.put(key, after is not None)
            return after
        return engine.step(state, b" ") if one else None

    @staticmethod
    def _blank_state(state: Any, engine: "Engine") -> Any | None:
        """The grammar state (one of them) that every whitespace run readable from ``state``
        reaches, or None if two runs may reach states with different futures (or the grammar
        reads no whitespace there). The state after a space is the one: every whitespace byte
        read from ``state`` or from it must lead to a state of the same key (by induction, every
        longer run does too)."""
        after = engine.step(state, b" ")
        if after is None:
            return None
        key = engine.key(after)
        if key is None:
            return None
        for b in _WS_BYTES:
            for src in (state, after):
                nxt = engine.step(src, bytes((b,)))
                if nxt is not None and engine.key(nxt) != key:
                    return None
        return after

    # ------------------------------------------------------------ dead ends

    def _prefix_candidates(self, tracker: Tracker) -> set[int]:
        """The tokens after which an item being written would still be a prefix of an
        earlier item's text (by compact form), where a dead end may begin."""
        items = tracker.open_items()
        cands: set[int] = set()
        if not items:
            return cands
        mode = tracker.read_mode()
        for depth, partial in items:
            form_mode, base = (NEXT, b"") if partial is None else (mode, partial)
            for r in tracker.frames[depth].raws:
                if r.startswith(base):
                    rem = r[len(base):]
                    for n in range(min(len(rem), self.rows.max_len) + 1):
                        cands.update(self.rows.form_tokens(rem[:n], form_mode))
        return cands

    def alive(self, base_state: Any, tracker: Tracker, engine: "Engine") -> bool:
        """Can every item being written in a unique array still end as a new value?
        Where the grammar's state has a key: first by the bytes that showed it last time
        from a state of that key (the grammar reads them again; only the tracker's verdict
        is checked), then remembered by both states, then by :meth:`_search`."""
        state_key = engine.key(base_state)
        if state_key is None:
            return self._search(base_state, tracker, engine)[0]
        witness = self._witness.get(state_key)
        if witness is not None and self._shows_alive(tracker, witness):
            return True
        key = (state_key, tracker.key())
        hit = self._alive.get(key)
        if hit is None:
            hit, witness = self._search(base_state, tracker, engine)
            self._alive.put(key, hit)
            if witness is not None:
                self._witness.put(state_key, witness)
        return bool(hit)

    @staticmethod
    def _shows_alive(tracker: Tracker, path: bytes) -> bool:
        """Do the bytes ``path`` take ``tracker`` where :meth:`_search` would stop (True)?"""
        goals = tracker.item_goals()
        nt = tracker.feed(path)
        return nt is not None and _search_ends(nt, goals)

    def _search(self, base_state: Any, tracker: Tracker, engine: "Engine") -> tuple[bool, bytes | None]:
        """Breadth-first over the grammar's bytes, until each item being written in a unique
        array is complete and new, or its text is no longer a prefix of an earlier item's
        (see the module doc); True past :data:`SEARCH_BUDGET` states. With the verdict, the
        bytes that showed it alive (None: none needed, or the budget ran out)."""
        goals = tracker.item_goals()
        if not goals and not tracker.order_risky():
            return True, None
        todo = deque([(base_state, tracker, b"")])
        seen: set = set()  # (grammar state, tracker) keys met: whitespace variants meet again
        budget = SEARCH_BUDGET
        while todo:
            state, tr, path = todo.popleft()
            live = engine.live_bytes(state)
            for b in [b for b in live if b not in WS] + [b for b in live if b in WS]:  # whitespace changes no value
                budget -= 1
                if budget < 0:
                    return True, None
                byte = bytes((b,))
                nt = tr.feed(byte)
                if nt is None:
                    continue
                # the grammar reads b here (a live byte): the tracker alone can end the search
                if _search_ends(nt, goals):
                    return True, path + byte
                nb = engine.step(state, byte)
                if nb is None:
                    continue
                k = engine.key(nb)
                if k is not None:
                    k = (k, nt.key())
                    if k in seen:
                        continue
                    seen.add(k)
                todo.append((nb, nt, path + byte))
        return False, None


def _search_ends(tracker: Tracker, goals: list[tuple[int, int]]) -> bool:
    """Where a dead-end search stops: each item it watched (``goals``) ended, or none is a
    prefix of an earlier item any more; and no member name can only end as a repeated one."""
    return (all(tracker.settled(*g) for g in goals) or not _unique_risky(tracker)) and not tracker.order_risky()


class Events:
    """Packed rows of the tokens that, read from one lexical mode with nothing else known,
    leave the string they begin in (``leaves``), open an array and then write a byte that
    may settle an item of it (``opens``), or close at least k levels below where they
    begin (``closing[k - 1]``, k = 1 .. :data:`CLOSE_LEVELS`)."""

    __slots__ = ("leaves", "opens", "closing")

    def __init__(self, leaves: np.ndarray, opens: np.ndarray, closing: np.ndarray):
        self.leaves, self.opens, self.closing = leaves, opens, closing


def token_events(data: bytes, mode: int) -> tuple[bool, bool, int]:
    """What ``data`` does read from ``mode`` (see :class:`Events`): (leaves its string, opens an
    array then writes a settling byte, levels closed below its start)."""
    in_str, esc = mode != OUTSIDE, mode == ESCAPED
    leaves = opened = opens = False
    depth = low = 0
    for b in data:
        if in_str:
            if esc:
                esc = False
            elif b == 0x5C:
                esc = True
            elif b == 0x22:
                in_str, leaves = False, True
            continue
        if opened and b in SETTLE_SET:
            opens = True
        if b == 0x22:
            in_str = True
        elif b == 0x5B or b == 0x7B:
            depth += 1
            opened = opened or b == 0x5B
        elif b == 0x5D or b == 0x7D:
            depth -= 1
            low = min(low, depth)
    return leaves, opens, -low


def _event_rows(tokens: Sequence[bytes], special: frozenset[int], has: np.ndarray, mode: int) -> Events:
    """:class:`Events` of ``mode``, read token by token where a token has a byte that can
    make one (a quote; outside a string, a bracket)."""
    size = len(tokens)
    rows = np.zeros((2 + CLOSE_LEVELS, size), dtype=bool)
    may = has[0x22] if mode != OUTSIDE else has[0x22] | has[0x5B] | has[0x5D] | has[0x7D]
    for t in np.flatnonzero(may).tolist():
        leaves, opens, closed = token_events(tokens[t], mode)
        rows[0, t], rows[1, t] = leaves, opens
        rows[2: 2 + min(closed, CLOSE_LEVELS), t] = True
    packed = pack_dense(rows)
    return Events(packed[0], packed[1], packed[2:])


def _risky(tracker: Tracker) -> bool:
    """Could what is being written end only as a duplicate item or a repeated name?"""
    return _unique_risky(tracker) or tracker.order_risky()


def _unique_risky(tracker: Tracker) -> bool:
    """Could an item being written in ``tracker`` end only as a duplicate? (Only where its
    text is a prefix of an earlier item's, or no item has begun since the last ended.)"""
    for depth, partial in tracker.open_items():
        if partial is None or any(r.startswith(partial) for r in tracker.frames[depth].raws):
            return True
    return False


_PLAIN_LITERAL = re.compile(rb'"[^"\\\x00-\x1f]*"')


def _member_name(literal: bytes) -> str:
    """The member name a JSON string literal (quotes included) spells (without ``json.loads``
    where it has no escape or control character: most names)."""
    if _PLAIN_LITERAL.fullmatch(literal):
        try:
            return literal[1:-1].decode()
        except UnicodeDecodeError:
            pass  # json.loads says what it makes of the bytes
    return json.loads(literal)


def _ids(row: np.ndarray) -> list[int]:
    """The token ids set in a packed row, in order (found word by word: rows here are sparse)."""
    out = []
    for i in (row != 0).nonzero()[0].tolist():  # (a bool array's nonzero: a third of a uint32 one's)
        v, base = int(row[i]), i << 5
        while v:
            low = v & -v
            out.append(base + low.bit_length() - 1)
            v ^= low
    return out


def _bit(row: np.ndarray, t: int) -> bool:
    return bool((int(row[t >> 5]) >> (t & 31)) & 1)


class Engine:
    """What the dead-end search needs of the grammar's own matcher: a byte step, a token
    step (the matcher's own, often faster than its bytes one by one), the bytes a state can
    read next, and a hashable key of a state (None: not memoised)."""

    def __init__(self, step: Any, step_token: Any, live_bytes: Any, key: Any):
        self.step = step
        self.step_token = step_token
        self.live_bytes = live_bytes
        self.key = key


__all__ = ["Plan", "Tracker", "UniqueCheck", "VocabRows", "vocab_rows", "canonical", "compact", "SEARCH_BUDGET"]
