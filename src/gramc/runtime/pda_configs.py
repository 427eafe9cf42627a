"""Masks of the configurations a compile-time exploration reaches, stored in the artifact.

A configuration (an Earley set's items with their continuations, :meth:`EarleyParser.key`)
met for the first time costs a walk of the vocabulary: 20-400 µs on a large schema, and a
document meets hundreds. A written artifact therefore explores from the start, byte by
byte, shallowest stacks first and then breadth first, the configurations whose continuations
are at most :data:`STORED_CONFIG_DEPTH` returns deep (a JSON schema's own structure:
recursion deeper than that is left to run time), up to :data:`MAX_STORED_CONFIGS`, computes
each one's mask with the engine itself, and stores them; a loaded artifact's engine then
looks a first-seen configuration up before it walks anything (:class:`StoredConfigs`).

A configuration is found by its *encoding*, a canonical sequence of ints that does not
depend on the process's interned ids (docs/format/gmask-v1.md, 11.12): a set is its size
followed by its elements in ascending order, an element ``(node, continuation)`` is the node
followed by the continuation's set, and the top of the stack is ``0``. Stored encodings are
sorted by an 8-byte BLAKE2b digest and compared whole on a digest match, so a collision only
costs a comparison.
"""

from __future__ import annotations

import hashlib
import heapq
import struct
import weakref
from typing import TYPE_CHECKING, Iterator, Sequence, cast

import numpy as np

from gramc.automata.tables import DEAD
from gramc.bitmask import WordRows, word_rows
from gramc.limits import Deadline
from gramc.runtime.earley import TOP, ChartSet, ChartView, EarleyParser

if TYPE_CHECKING:
    from gramc.runtime.pda_tokens import PDATokenTable

#: Configurations an artifact explores and stores at most (the first ones in the order of
#: :func:`_explore`: those a document meets first).
MAX_STORED_CONFIGS = 20_000
#: Distinct masks an artifact stores at most (the exploration stops at the next new one):
#: each is a packed row while the artifact is written, 16 KB at a 128k vocabulary.
MAX_STORED_MASKS = 4096
#: Returns deep a stored configuration's continuations go at most.
STORED_CONFIG_DEPTH = 6
#: The byte the exploration does not step: a backslash (inside a JSON string, an escape:
#: its spellings multiply the configurations of every member name, and a document's tokens
#: seldom end inside one). The configurations after it are still served, by the engine at
#: run time.
UNEXPLORED_BYTE = 0x5C
#: Ints an encoding holds at most (a configuration of more items is left to run time).
MAX_ENCODING = 4096
#: Configurations the exploration may have found (and hold, waiting) per one it may store:
#: a shallow one found late still comes before the deeper ones found earlier.
DISCOVERED_PER_STORED = 2
#: Configurations explored between two checks of the compile's deadline.
DEADLINE_EVERY = 64


class _TooDeep(Exception):
    """A continuation deeper than the depth asked for (or an encoding past its bound)."""


class Encoder:
    """Encodings of one parser's configuration keys, memoised per continuation id for the
    parser's current generation (so bounded by its interned sets)."""

    def __init__(self, parser: EarleyParser, depth: int):
        self.parser, self.depth = parser, depth
        self._gen = -1
        self._conts: dict[int, tuple[tuple[int, ...], int]] = {}  # id -> (encoding, height)

    def encode(self, key: int) -> tuple[int, ...] | None:
        """The encoding of the configuration ``key``, or None where a continuation is deeper
        than :attr:`depth` or the encoding longer than :data:`MAX_ENCODING`."""
        if self._gen != self.parser.generation:
            self._gen, self._conts = self.parser.generation, {}
        try:
            return self._set(self.parser.interned(key), self.depth)
        except _TooDeep:
            return None

    def height(self, key: int) -> int:
        """How many returns deep the continuations of the configuration ``key`` go (one
        :meth:`encode` has accepted)."""
        return max((self._conts[e[1]][1] for e in self.parser.interned(key) if e is not TOP), default=0)

    def _set(self, elems, left: int) -> tuple[int, ...]:
        """A set of ``(node, continuation id)`` pairs (and TOP), its continuations at most
        ``left`` returns deep. Recursion is bounded by the depth asked for."""
        parts = []
        for e in elems:
            if e is TOP:
                parts.append((0,))
                continue
            node, cont = e
            parts.append((node,) + self._cont(cont, left))
        parts.sort()
        out = (len(parts),) + tuple(x for p in parts for x in p)
        if len(out) > MAX_ENCODING:
            raise _TooDeep
        return out

    def _cont(self, cont: int, left: int) -> tuple[int, ...]:
        """A continuation's set, if its height (returns below the top) is at most ``left``."""
        known = self._conts.get(cont)
        if known is None:
            value = self.parser.interned(cont)
            inner = [e[1] for e in value if e is not TOP]
            if inner and left <= 0:
                raise _TooDeep
            enc = self._set(value, left - 1)  # memoises every inner continuation
            known = self._conts[cont] = (enc, 1 + max((self._conts[c][1] for c in inner), default=-1))
        elif known[1] > left:
            raise _TooDeep
        return known[0]


def _packed(encoding: tuple[int, ...]) -> bytes:
    """An encoding's ints as little-endian int32s."""
    return struct.pack(f"<{len(encoding)}i", *encoding)


def _digest_of(packed: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(packed, digest_size=8).digest(), "little")


def digest(encoding: tuple[int, ...]) -> int:
    """The 8-byte BLAKE2b digest of an encoding's little-endian int32s, as an unsigned int."""
    return _digest_of(_packed(encoding))


class StoredConfigs:
    """The stored masks by configuration: ``digest`` ascending, each entry's ``encoding``
    (``enc[enc_indptr[i]:enc_indptr[i + 1]]``) and its ``row`` of the distinct masks, kept
    as their words (``row_indptr``, ``row_word``, ``row_value``, ``row_complement``:
    :func:`gramc.bitmask.word_rows`), so that a lookup's row costs a few µs to expand."""

    def __init__(self, arrays: dict[str, np.ndarray], depth: int, vocab_size: int):
        self.digest = arrays["configs.digest"]
        self.enc_indptr, self.enc = arrays["configs.enc_indptr"], arrays["configs.enc"]
        self.row = arrays["configs.row"]
        self.row_indptr, self.row_word = arrays["configs.row_indptr"], arrays["configs.row_word"]
        self.row_value = arrays["configs.row_value"]
        self.row_complement = arrays["configs.row_complement"]
        self.depth, self.vocab_size = depth, vocab_size
        self._rows = WordRows(self.row_indptr, self.row_word, self.row_value, self.row_complement, vocab_size)
        # Rows expanded, by row: alive while a cache of the engine holds them.
        self._expanded: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()

    def __len__(self) -> int:
        return len(self.digest)

    def arrays(self) -> dict[str, np.ndarray]:
        """The ``configs.*`` arrays of the artifact file."""
        return {"configs.digest": self.digest, "configs.enc_indptr": self.enc_indptr, "configs.enc": self.enc,
                "configs.row": self.row, "configs.row_indptr": self.row_indptr, "configs.row_word": self.row_word,
                "configs.row_value": self.row_value, "configs.row_complement": self.row_complement}

    def lookup(self, encoding: tuple[int, ...]) -> np.ndarray | None:
        """The stored packed mask of the configuration ``encoding`` (read-only), or None."""
        packed = _packed(encoding)
        digests, d = self.digest, _digest_of(packed)
        i = int(digests.searchsorted(np.uint64(d)))
        while i < len(digests) and int(digests[i]) == d:
            a, b = int(self.enc_indptr[i]), int(self.enc_indptr[i + 1])
            if self.enc[a:b].astype("<i4", copy=False).tobytes() == packed:
                return self._row(int(self.row[i]))
            i += 1
        return None

    def _row(self, r: int) -> np.ndarray:
        row = self._expanded.get(r)
        if row is None:
            row = self._expanded[r] = self._rows.expand(r)
        return row

    @classmethod
    def explore(cls, table: PDATokenTable, max_configs: int = MAX_STORED_CONFIGS,
                depth: int = STORED_CONFIG_DEPTH, deadline: Deadline | None = None) -> StoredConfigs:
        """The masks of the configurations reachable from the start (in the order of
        :func:`_explore`) whose continuations are at most ``depth`` deep, up to ``max_configs`` of them and
        :data:`MAX_STORED_MASKS` distinct masks, computed by ``table`` (so they are its
        masks). Deterministic: the same grammar and vocabulary give the same arrays."""
        encoder = Encoder(table.parser, depth)
        encodings: list[tuple[int, ...]] = []
        row_of: list[int] = []
        rows: dict[bytes, int] = {}
        for k, (encoding, words) in enumerate(_explore(table, encoder, max_configs)):
            if deadline is not None and k % DEADLINE_EVERY == 0:
                deadline.check()
            data = words.tobytes()
            if data not in rows and len(rows) >= MAX_STORED_MASKS:
                break  # where the walk is, not when: the same grammar stores the same masks
            encodings.append(encoding)
            row_of.append(rows.setdefault(data, len(rows)))
        digests = [digest(e) for e in encodings]
        # By digest, then (ties) by encoding: the order does not depend on the walk's.
        order = sorted(range(len(encodings)), key=lambda i: (digests[i], encodings[i]))
        packed = np.frombuffer(b"".join(rows), dtype=np.uint32).reshape(len(rows), -1) if rows \
            else np.zeros((0, 1), np.uint32)
        row_indptr, row_word, row_value, complement = word_rows(packed, table.vocab_size)
        arrays: dict[str, np.ndarray] = {
            "configs.digest": np.array([digests[i] for i in order], dtype=np.uint64),
            "configs.enc_indptr": np.concatenate([[0], np.cumsum([len(encodings[i]) for i in order])]).astype(np.int64),
            "configs.enc": np.array([x for i in order for x in encodings[i]], dtype=np.int32),
            "configs.row": np.array([row_of[i] for i in order], dtype=np.int32),
            "configs.row_indptr": row_indptr, "configs.row_word": row_word, "configs.row_value": row_value,
            "configs.row_complement": complement,
        }
        return cls(arrays, depth, table.vocab_size)


def _explore(table: PDATokenTable, encoder: Encoder, max_configs: int) -> Iterator[tuple[tuple[int, ...], np.ndarray]]:
    """``(encoding, mask)`` of each configuration reached, shallowest stacks first (then
    breadth first): from each, one byte of every group of byte classes that lead to the same
    items (but :data:`UNEXPLORED_BYTE`), and every special token. A multi-byte character is
    stepped whole: the configurations inside one are passed through, not stored (a document's
    tokens seldom end there, and in every string they would take the budget)."""
    parser = table.parser
    first: dict[int, int] = {}  # per byte class, the byte stepped for it at a character's start
    inside: dict[int, int] = {}  # ... and inside a character (a continuation byte)
    for b, c in enumerate(table.table.byte_class.tolist()):
        if b != UNEXPLORED_BYTE:
            first.setdefault(c, b)
        if 0x80 <= b < 0xC0:
            inside.setdefault(c, b)
    nxt = parser.byte_next
    specials = table.table.token_ids.tolist()
    seen: set[tuple[int, ...]] = set()
    queue: list[tuple[int, int, tuple[int, ...], ChartView]] = []  # (height, order, encoding, chart)

    def visit(chart: ChartView) -> None:
        key = parser.key(cast(Sequence[ChartSet], chart))  # a view reads as the sequence of its sets
        encoding = None if key is None else encoder.encode(key)
        if encoding is not None and encoding not in seen and len(seen) < DISCOVERED_PER_STORED * max_configs:
            seen.add(encoding)
            heapq.heappush(queue, (encoder.height(cast(int, key)), len(seen), encoding, chart))

    def steps(chart: ChartView, member: dict[int, int]) -> Iterator[tuple[int, ChartView]]:
        """(byte, chart after it) for one byte of each group of ``member``'s classes that
        lead to the same items."""
        last = chart[-1]
        groups: dict[tuple, int] = {}
        for c in sorted(parser.live_bytes(last)):
            if c in member:
                seeds = tuple(sorted((t, j) for n, j in last.items if (t := nxt[n][c]) != DEAD))
                groups.setdefault(seeds, c)
        for c in groups.values():
            s = parser.scan_byte(chart, member[c])
            if s is not None:
                yield member[c], chart.extended(s)

    visit(table.initial())
    for _ in range(max_configs):
        if not queue:
            return
        _, _, encoding, chart = heapq.heappop(queue)
        yield encoding, table.words(chart)
        # (chart, continuation bytes still to read in the character begun)
        todo = [(after, _utf8_length(b) - 1) for b, after in steps(chart, first)][::-1]
        while todo:  # in order, each character whole before the next
            after, left = todo.pop()
            if left <= 0:
                visit(after)
            else:
                todo.extend([(later, left - 1) for _, later in steps(after, inside)][::-1])
        for t in specials:
            s = parser.scan_token(cast(Sequence[ChartSet], chart), t)
            if s is not None:
                visit(chart.extended(s))


def _utf8_length(lead: int) -> int:
    """The bytes of the UTF-8 character that byte ``lead`` begins (1 for any byte that does
    not begin a multi-byte one)."""
    return 2 if 0xC2 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF5 else 1
