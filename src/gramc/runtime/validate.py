"""Checks of what an untrusted ``.gmask`` file holds, shared by the artifact readers.

The container layer has already checked the framing, the hash, dtypes and shapes of each
array. The readers (:mod:`gramc.runtime.reader` for the header, one module per artifact kind
for its payload) check every array against its meaning with these: shapes agree with each
other, every index is in range, nothing unexpected is present. Any failure is an
:class:`~gramc.errors.ArtifactFormatError` naming the section and the problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

import numpy as np

from gramc.errors import ArtifactFormatError

#: An array spec: name -> (dtype, number of dimensions).
ArraySpec = Mapping[str, tuple[Any, int]]


def fail(msg: str) -> NoReturn:
    """Refuse the file: an ArtifactFormatError saying what is wrong, and where."""
    raise ArtifactFormatError(msg)


def get_field(meta: dict, key: str, kind: type | tuple[type, ...], where: str = "metadata") -> Any:
    """``meta[key]``, which must be a ``kind`` (an int is never a bool)."""
    value = meta.get(key) if isinstance(meta, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        fail(f"{where}: {key!r} is missing or not a {getattr(kind, '__name__', kind)}")
    return value


def require(cond: bool, msg: str) -> None:
    """:func:`fail` with ``msg`` unless ``cond`` holds."""
    if not cond:
        fail(msg)


def check_arrays(arrays: dict, spec: ArraySpec) -> None:
    """Every array of ``spec`` present, with its dtype and number of dimensions."""
    for name, (dtype, ndim) in spec.items():
        arr = arrays.get(name)
        if arr is None:
            fail(f"missing array {name!r}")
        require(arr.dtype == dtype and arr.ndim == ndim,
                f"array {name!r}: expected {np.dtype(dtype).name} with {ndim} dimension(s), "
                f"got {arr.dtype.name} with shape {list(arr.shape)}")


def in_range(name: str, arr: np.ndarray, lo: int, hi: int) -> None:
    """Every value of ``arr`` in ``[lo, hi)``, or an error naming the first bad one."""
    if arr.size:
        bad = np.flatnonzero((arr < lo) | (arr >= hi))
        if len(bad):
            i = int(bad[0])
            fail(f"array {name!r}: value {int(arr.reshape(-1)[i])} at flat index {i} "
                 f"is outside [{lo}, {hi})")


def no_extra(arrays: dict, *specs: ArraySpec) -> None:
    """No array beyond those the specs name."""
    expected = set().union(*specs)
    extra = sorted(set(arrays) - expected)
    require(not extra, f"unexpected arrays {extra}")


#: Below this many nodes a reachability frontier is followed in Python, node by node: a
#: numpy round costs tens of microseconds however small its frontier, and a chain (a hostile
#: file's, or a long counted repetition's) has one node per round.
NARROW_FRONTIER = 64


def grouped(keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """``(order, indptr)``: positions of ``keys`` sorted by key, and where each key's run
    of ``order`` starts (CSR), for :func:`members`."""
    order = np.argsort(keys, kind="stable")
    return order, np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=n_keys))])


def members(order: np.ndarray, indptr: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The positions whose key is one of ``keys`` (one run per key, concatenated): the
    frontier step of the linear-time reachability checks."""
    counts = indptr[keys + 1] - indptr[keys]
    owner = np.repeat(np.arange(len(keys)), counts)
    first = np.cumsum(counts) - counts
    return order[indptr[keys][owner] + np.arange(int(counts.sum())) - first[owner]]

