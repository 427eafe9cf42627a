"""A bounded cache: a dictionary that drops its least recently used entry past a bound.

Every cache the runtime fills while it serves masks is one of these (or is reset wholesale
past its bound), sized by :class:`gramc.limits.RuntimeLimits`, so a long-running process
keeps bounded memory. Lookups and inserts are O(1) (an ``OrderedDict``); evictions are
counted for :meth:`LRUCache.stats`, which tests and the soak benchmark read.

A :class:`RowPool` lets those caches share equal rows; it holds none itself.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any, Callable, Hashable

import numpy as np

_MISSING = object()


class LRUCache:
    """At most ``max_entries`` entries; the least recently used is evicted first (and handed
    to ``on_evict``, for caches whose owner must forget it too)."""

    __slots__ = ("_data", "max_entries", "evictions", "_on_evict")

    def __init__(self, max_entries: int, on_evict: Callable[[Any, Any], None] | None = None):
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self._data: OrderedDict = OrderedDict()
        self.max_entries = max_entries
        self.evictions = 0
        self._on_evict = on_evict

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value of ``key`` (now the most recently used), or ``default``."""
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            return default
        self._data.move_to_end(key)
        return value

    def put(self, key: Hashable, value: Any) -> Any:
        """Store ``value`` under ``key`` and return it, evicting past the bound."""
        data = self._data
        data[key] = value
        data.move_to_end(key)
        if len(data) > self.max_entries:
            self._trim()
        return value

    def resize(self, max_entries: int) -> None:
        """A new bound (entries past it are evicted now)."""
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self._trim()

    def _trim(self) -> None:
        data, on_evict = self._data, self._on_evict
        while len(data) > self.max_entries:
            key, value = data.popitem(last=False)
            self.evictions += 1
            if on_evict is not None:
                on_evict(key, value)

    def clear(self) -> None:
        """Forget every entry (not counted as evictions)."""
        self._data.clear()

    def values(self):
        return self._data.values()

    def __iter__(self):
        return iter(self._data)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def stats(self) -> dict[str, int]:
        """Entries now, the bound, and evictions so far."""
        return {"entries": len(self._data), "max_entries": self.max_entries, "evictions": self.evictions}


class RowPool:
    """Equal read-only rows share one array.

    Many configurations of a grammar have the same mask (every place a boolean may start,
    say), and a mask is copied out of its row at every step: rows that are one array stay in
    the processor's cache, where one array per configuration (16 KB each for a 128k
    vocabulary) would not. Rows are found by a hash of their bytes and compared whole, so a
    collision only loses the sharing. The pool refers to its rows weakly: a row lives as long
    as a bounded cache holds it, and the pool never keeps one alive.
    """

    __slots__ = ("_rows", "_by_id")

    def __init__(self) -> None:
        self._rows: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()
        self._by_id: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()

    def shared(self, row: np.ndarray) -> np.ndarray:
        """The pool's array equal to ``row`` (``row`` itself, now pooled, if none is)."""
        if self._by_id.get(id(row)) is row:
            return row  # pooled already (a stored row handed out again): no hashing
        h = hash(row.tobytes())
        old = self._rows.get(h)
        if old is not None and old.dtype == row.dtype and np.array_equal(old, row):
            return old
        self._rows[h] = self._by_id[id(row)] = row
        return row

    def __len__(self) -> int:
        return len(self._rows)
