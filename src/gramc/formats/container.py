"""The ``.gmask`` container: a metadata map and named numpy arrays in one checked file.

The container knows nothing about grammars. It stores a metadata dict and a dict of named
numpy arrays, byte-reproducibly, and reads them back from untrusted bytes with total,
bounded validation. The normative description is ``docs/format/gmask-v1.md``; this module
is its reference implementation. A file is::

    prefix (64 bytes, little-endian, uncompressed)
      0  magic    b"GMSK"
      4  guard    b"\\r\\n\\x1a\\n"           (catches text-mode transfers)
      8  u16 major, u16 minor            (FORMAT_VERSION)
     12  u32 reserved = 0
     16  u64 payload_length             (bytes of the zstd frame that follows)
     24  u64 content_length             (bytes of the decompressed document)
     32  32-byte SHA-256 of bytes [0, 32) followed by the payload
    payload: one zstd frame (content size and checksum recorded, no dictionary) of a
      canonical msgpack map {"arrays": {name: {"data": bin, "dtype": str, "shape": [int]}},
                             "meta": {...}}

Every read failure raises :class:`~gramc.errors.ArtifactFormatError` (or its subclass
:class:`~gramc.errors.ArtifactVersionError`) naming what is wrong and where; exceptions of
zstandard, msgpack and numpy never escape.

>>> import numpy as np
>>> blob = pack({"kind": "demo"}, {"ids": np.array([1, 2, 3], dtype=np.int32)})
>>> blob[:4], len(blob) == 64 + int.from_bytes(blob[16:24], "little")
(b'GMSK', True)
>>> meta, arrays = unpack(blob)
>>> meta, arrays["ids"].tolist(), arrays["ids"].flags.writeable
({'kind': 'demo'}, [1, 2, 3], False)
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import secrets
import stat
import struct
from typing import Any, SupportsInt

import msgpack
import numpy as np
import zstandard

from gramc.errors import ArtifactFormatError, ArtifactVersionError
from gramc.formats.limits import DEFAULT_READ_LIMITS, ReadLimits

__all__ = [
    "ALLOWED_DTYPES",
    "FORMAT_VERSION",
    "MAGIC",
    "PREFIX_SIZE",
    "READ_VERSIONS",
    "ReadLimits",
    "check_index_range",
    "pack",
    "read_file",
    "unpack",
    "write_file",
]

MAGIC = b"GMSK"
GUARD = b"\r\n\x1a\n"
#: (major, minor) this module writes.
FORMAT_VERSION: tuple[int, int] = (1, 0)
#: Versions this module reads: the same major, any minor up to the current one.
READ_VERSIONS: tuple[tuple[int, int], ...] = tuple(
    (FORMAT_VERSION[0], minor) for minor in range(FORMAT_VERSION[1] + 1)
)
_PREFIX = struct.Struct("<4s4sHHIQQ32s")
PREFIX_SIZE = _PREFIX.size  # 64
_HASHED_PREFIX = 32  # the digest covers prefix bytes [0, 32) and the payload
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: Fixed so that identical inputs give identical bytes (with the same libzstd).
ZSTD_LEVEL = 9
#: Documents larger than this are compressed as a stream of pieces (the arrays' own bytes)
#: rather than from one contiguous copy: a 300 MB PDA artifact saved in one piece held two
#: more copies of itself. Smaller ones keep the one-shot frame and the bytes they always had.
STREAM_ABOVE_BYTES = 64 << 20
_BIN_MAX = (1 << 32) - 1  # msgpack bin32 holds at most this many bytes

#: numpy dtype strings an array may have, all little-endian (or byte-order free).
ALLOWED_DTYPES: tuple[str, ...] = (
    "|b1",
    "|i1",
    "|u1",
    "<i2",
    "<u2",
    "<i4",
    "<u4",
    "<i8",
    "<u8",
    "<f4",
    "<f8",
)
_NAME_RE = re.compile(r"[A-Za-z0-9_.:/-]{1,255}")
_TOP_KEYS = frozenset({"arrays", "meta"})
_ARRAY_KEYS = frozenset({"data", "dtype", "shape"})
_INT_MIN, _INT_END = -(1 << 63), 1 << 64  # msgpack's integer range, end exclusive
_META_TYPES = "None, bool, int, float, str, bytes, list or dict"


class _Problem(Exception):
    """A validation failure; the caller turns it into its own exception type."""

    def __init__(self, message: str, kind: type[Exception] = ValueError):
        super().__init__(message)
        self.kind = kind


def _short(value: Any, width: int = 60) -> str:
    """``repr(value)``, cut to ``width`` characters so hostile data cannot flood a message."""
    if isinstance(value, (str, bytes, list)) and len(value) > width:
        value = value[:width]  # never repr a huge hostile value in full
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _supported_text() -> str:
    first, last = READ_VERSIONS[0], READ_VERSIONS[-1]
    if first == last:
        return f"{first[0]}.{first[1]}"
    return f"{first[0]}.{first[1]} to {last[0]}.{last[1]}"


# --------------------------------------------------------------------------- metadata


class _Budget:
    """Counts msgpack values (1 per container + 1 per entry) against ``max_values``."""

    def __init__(self, limits: ReadLimits):
        self.limit = limits.max_values
        self.used = 0

    def spend(self, container_len: int) -> None:
        self.used += 1 + container_len
        if self.used > self.limit:
            raise _Problem(f"document has more than max_values={self.limit} msgpack values")


def _check_str(text: str, where: str, limits: ReadLimits) -> None:
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise _Problem(f"{where}: string is not valid Unicode ({exc.reason})") from None
    if size > limits.max_str_bytes:
        raise _Problem(f"{where}: string of {size} bytes exceeds max_str_bytes={limits.max_str_bytes}")


def _check_meta(value: Any, where: str, depth: int, limits: ReadLimits, budget: _Budget | None) -> None:
    """Check one metadata value; ``depth`` is the nesting depth a container here would have."""
    kind = type(value)
    if value is None or kind is bool or kind is bytes:
        return
    if kind is int:
        if not _INT_MIN <= value < _INT_END:
            raise _Problem(f"{where}: integer {_short(value)} is outside msgpack's range [-2**63, 2**64)")
    elif kind is float:
        if not math.isfinite(value):
            raise _Problem(f"{where}: non-finite float {value!r} is not allowed")
    elif kind is str:
        _check_str(value, where, limits)
    elif kind is list or kind is dict:
        _check_container(value, where, depth, limits, budget)
    else:
        hint = " (convert numpy scalars with int()/float())" if isinstance(value, np.generic) else ""
        raise _Problem(f"{where}: {kind.__name__} is not a metadata type ({_META_TYPES}){hint}", TypeError)


def _check_container(
    value: list | dict, where: str, depth: int, limits: ReadLimits, budget: _Budget | None
) -> None:
    if depth > limits.max_meta_depth:
        raise _Problem(f"{where}: nested deeper than max_meta_depth={limits.max_meta_depth}")
    if len(value) > limits.max_container_len:
        raise _Problem(f"{where}: {len(value)} entries exceed max_container_len={limits.max_container_len}")
    if budget is not None:
        budget.spend(len(value))
    if isinstance(value, list):  # exactly list or dict: _check_meta dispatches on type()
        for i, item in enumerate(value):
            _check_meta(item, f"{where}[{i}]", depth + 1, limits, budget)
        return
    for key, item in value.items():
        if type(key) is not str:
            raise _Problem(f"{where}: map key {_short(key)} is not a str", TypeError)
        _check_str(key, f"{where} key {_short(key)}", limits)
        _check_meta(item, f"{where}[{key!r}]", depth + 1, limits, budget)


def _canonical(value: Any) -> Any:
    """A copy of checked metadata with every map's keys in sorted (UTF-8 byte) order."""
    if type(value) is dict:
        return {key: _canonical(value[key]) for key in sorted(value)}
    if type(value) is list:
        return [_canonical(item) for item in value]
    return value


# --------------------------------------------------------------------------- writing


def _shape_elements(shape: list[int] | tuple[int, ...]) -> tuple[int, int]:
    """(element count, product of the non-zero dimensions); Python ints cannot overflow."""
    count = nonzero = 1
    for dim in shape:
        count *= dim
        nonzero *= dim or 1
    return count, nonzero


def _check_name(name: Any) -> None:
    if type(name) is not str:
        raise _Problem(f"array name {_short(name)} is not a str", TypeError)
    if not _NAME_RE.fullmatch(name):
        raise _Problem(
            f"array name {_short(name)} is invalid: use 1-255 characters from A-Z a-z 0-9 _ . : / -"
        )


def _array_entry(name: str, arr: Any, limits: ReadLimits) -> dict[str, Any]:
    """The document entry of one array: little-endian, C-order bytes plus dtype and shape."""
    _check_name(name)
    where = f"array {name!r}"
    if type(arr) is not np.ndarray:
        raise _Problem(f"{where}: expected a numpy.ndarray, got {type(arr).__name__}", TypeError)
    little = arr.dtype.newbyteorder("<") if arr.dtype.kind in "biuf" else arr.dtype
    if little.str not in ALLOWED_DTYPES:
        raise _Problem(
            f"{where}: dtype {arr.dtype.str!r} is not allowed (allowed: {', '.join(ALLOWED_DTYPES)})"
        )
    if arr.ndim > limits.max_ndim:
        raise _Problem(f"{where}: {arr.ndim} dimensions exceed max_ndim={limits.max_ndim}")
    if _shape_elements(arr.shape)[1] > limits.max_array_elements:
        raise _Problem(f"{where}: {arr.size} elements exceed max_array_elements={limits.max_array_elements}")
    if arr.size * little.itemsize > _BIN_MAX:
        raise _Problem(f"{where}: {arr.size * little.itemsize} bytes exceed msgpack's bin limit {_BIN_MAX}")
    shape = list(arr.shape)
    if little.kind == "b":
        arr = np.not_equal(arr, False)  # canonical 0/1 bytes even for views of other data
    # A byte view of the array, not a copy: pack() streams it into the compressor.
    data = np.ascontiguousarray(arr, dtype=little).reshape(-1).view(np.uint8).data
    return {"data": data, "dtype": little.str, "shape": shape}


def _document(meta: Any, arrays: Any, limits: ReadLimits) -> dict[str, Any]:
    if type(meta) is not dict:
        raise _Problem(f"meta must be a dict, got {type(meta).__name__}", TypeError)
    if type(arrays) is not dict:
        raise _Problem(f"arrays must be a dict, got {type(arrays).__name__}", TypeError)
    budget = _Budget(limits)
    budget.spend(2)  # the top-level map
    _check_meta(meta, "meta", 1, limits, budget)
    if len(arrays) > limits.max_arrays:
        raise _Problem(f"{len(arrays)} arrays exceed max_arrays={limits.max_arrays}")
    for name in arrays:
        _check_name(name)
    budget.spend(len(arrays))
    entries = {}
    for name in sorted(arrays):
        entries[name] = _array_entry(name, arrays[name], limits)
        budget.spend(3)
        budget.spend(len(entries[name]["shape"]))
    return {"arrays": entries, "meta": _canonical(meta)}


def _bin_header(n: int) -> bytes:
    """The msgpack header of a ``bin`` of ``n`` bytes, in the smallest form (as packb writes it)."""
    if n < 1 << 8:
        return struct.pack(">BB", 0xC4, n)
    if n < 1 << 16:
        return struct.pack(">BH", 0xC5, n)
    return struct.pack(">BI", 0xC6, n)


def _msgpack_pieces(document: dict[str, Any]) -> list[bytes | memoryview]:
    """``msgpack.packb(document)`` as a list of pieces whose concatenation is those bytes,
    the arrays' data as views: a large artifact is compressed without two more copies of
    its arrays (the bytes of each, then the whole document) alive beside it."""
    packer = msgpack.Packer(use_bin_type=True, use_single_float=False, strict_types=True)
    entries = document["arrays"]
    pieces: list[bytes | memoryview] = [packer.pack_map_header(2), packer.pack("arrays"),
                                        packer.pack_map_header(len(entries))]
    for name, entry in entries.items():
        data = entry["data"]
        pieces += [packer.pack(name) + packer.pack_map_header(3) + packer.pack("data") + _bin_header(len(data)),
                   data,
                   packer.pack("dtype") + packer.pack(entry["dtype"]) + packer.pack("shape") + packer.pack(entry["shape"])]
    pieces += [packer.pack("meta"), packer.pack(document["meta"])]
    return pieces


def pack(meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """Encode metadata and named arrays as the bytes of a ``.gmask`` file.

    The output is a function of the values only: map keys are sorted, nothing depends on
    the clock or on dict insertion order, and the zstd level is fixed (byte identity
    across machines holds for the same libzstd version). ``pack`` refuses anything the
    default :class:`ReadLimits` reader would refuse.

    Args:
        meta: a dict with str keys whose values are exactly None, bool, int (within
            [-2**63, 2**64)), finite float, str, bytes, list or dict with str keys, nested
            at most ``max_meta_depth`` containers deep. Subclasses (tuple, IntEnum, numpy
            scalars) are refused rather than silently converted, so that
            ``unpack(pack(m, a))[0] == m`` always holds.
        arrays: a dict mapping names (1-255 chars of ``A-Z a-z 0-9 _ . : / -``) to
            ``numpy.ndarray`` (not subclasses) of dtype bool, (u)int8/16/32/64, float32
            or float64, in any byte order and memory layout; they are stored
            little-endian and C-contiguous.

    Returns:
        The complete file contents.

    Raises:
        TypeError: a value of a type the format cannot hold.
        ValueError: a value the format cannot hold (bad name, dtype, non-finite float,
            integer out of range, a default read limit exceeded).

    >>> import numpy as np
    >>> pack({"b": 1, "a": 2}, {}) == pack({"a": 2, "b": 1}, {})
    True
    >>> pack({"x": (1, 2)}, {})
    Traceback (most recent call last):
    ...
    TypeError: meta['x']: tuple is not a metadata type (None, bool, int, float, str, bytes, list or dict)
    """
    limits = DEFAULT_READ_LIMITS
    try:
        document = _document(meta, arrays, limits)
    except _Problem as problem:
        raise problem.kind(str(problem)) from None
    pieces = _msgpack_pieces(document)
    body_size = sum(len(piece) for piece in pieces)
    if body_size > limits.max_payload_bytes:
        raise ValueError(
            f"document of {body_size} bytes exceeds max_payload_bytes={limits.max_payload_bytes}"
        )
    compressor = zstandard.ZstdCompressor(
        level=ZSTD_LEVEL, write_checksum=True, write_content_size=True, write_dict_id=False, threads=0
    )
    if body_size <= STREAM_ABOVE_BYTES:
        frame = compressor.compress(b"".join(pieces))
    else:  # the same frame format; zstd fed piece by piece cuts its blocks elsewhere
        stream = compressor.compressobj(size=body_size)
        frame = b"".join([*(stream.compress(piece) for piece in pieces), stream.flush()])
    if body_size > limits.max_compression_ratio * len(frame):
        raise ValueError(
            f"document of {body_size} bytes compresses to {len(frame)}, over "
            f"max_compression_ratio={limits.max_compression_ratio}: readers would refuse it"
        )
    head = struct.pack("<4s4sHHIQQ", MAGIC, GUARD, *FORMAT_VERSION, 0, len(frame), body_size)
    digest = hashlib.sha256(head)
    digest.update(frame)
    return head + digest.digest() + frame


def write_file(path: str | os.PathLike[str], meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write :func:`pack`'s output to ``path`` atomically.

    The bytes go to a fresh temporary file in the same directory, are flushed to disk and
    then renamed over ``path`` (``os.replace``), so a reader sees the old file or the new
    one, never a partial write. Validation happens before the file system is touched.

    Raises:
        TypeError, ValueError: as :func:`pack`.
        OSError: the directory is not writable, the disk is full, ...
    """
    data = pack(meta, arrays)
    target = os.path.abspath(os.fspath(path))
    directory, base = os.path.split(target)
    temp = os.path.join(directory, f".{base}.{secrets.token_hex(8)}.gmask.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: str) -> None:
    """Make the rename durable where the platform allows it (POSIX); best effort."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# --------------------------------------------------------------------------- reading


def _parse_prefix(view: memoryview, limits: ReadLimits) -> tuple[int, int]:
    """Check the fixed prefix; return (payload_length, content_length)."""
    size = len(view)
    start = bytes(view[:4])
    if start != MAGIC[: len(start)]:
        raise ArtifactFormatError(f"not a .gmask file: starts with {start!r}, expected magic {MAGIC!r}")
    if size < 12:
        raise ArtifactFormatError(f"truncated: {size} bytes, shorter than the {PREFIX_SIZE}-byte prefix")
    guard, major, minor = struct.unpack_from("<4sHH", view, 4)
    if guard != GUARD:
        raise ArtifactFormatError(
            f"damaged prefix: bytes 4-7 are {guard!r}, expected {GUARD!r} (transferred in text mode?)"
        )
    if (major, minor) not in READ_VERSIONS:
        raise ArtifactVersionError((major, minor), _supported_text())
    if size < PREFIX_SIZE:
        raise ArtifactFormatError(f"truncated: {size} bytes, shorter than the {PREFIX_SIZE}-byte prefix")
    *_, reserved, payload_length, content_length, _ = _PREFIX.unpack(view[:PREFIX_SIZE])
    if reserved != 0:
        raise ArtifactFormatError(f"damaged prefix: reserved field (bytes 12-15) is {reserved}, must be 0")
    if size > limits.max_file_bytes:
        raise ArtifactFormatError(f"file of {size} bytes exceeds max_file_bytes={limits.max_file_bytes}")
    actual = size - PREFIX_SIZE
    if payload_length > actual:
        raise ArtifactFormatError(f"truncated: prefix says {payload_length} payload bytes, file has {actual}")
    if payload_length < actual:
        raise ArtifactFormatError(
            f"trailing data: prefix says {payload_length} payload bytes, file has {actual}"
        )
    if content_length > limits.max_payload_bytes:
        raise ArtifactFormatError(
            f"prefix says {content_length} decompressed bytes, "
            f"over max_payload_bytes={limits.max_payload_bytes}"
        )
    if content_length > limits.max_compression_ratio * payload_length:
        raise ArtifactFormatError(
            f"prefix says {content_length} decompressed bytes from a {payload_length}-byte payload, "
            f"over max_compression_ratio={limits.max_compression_ratio}"
        )
    return payload_length, content_length


def _check_digest(view: memoryview) -> None:
    digest = hashlib.sha256(view[:_HASHED_PREFIX])
    digest.update(view[PREFIX_SIZE:])
    stored = bytes(view[_HASHED_PREFIX:PREFIX_SIZE])
    if digest.digest() != stored:
        raise ArtifactFormatError(
            f"checksum mismatch: prefix records SHA-256 {stored.hex()[:16]}..., "
            f"the file hashes to {digest.hexdigest()[:16]}... (corrupted or altered)"
        )


def _decompress(payload: memoryview, content_length: int) -> bytes:
    """Decompress the single zstd frame, allocating only the size the prefix promised."""
    if bytes(payload[:4]) != _ZSTD_MAGIC:
        raise ArtifactFormatError(f"payload is not a zstd frame: starts with {bytes(payload[:4])!r}")
    try:
        params = zstandard.get_frame_parameters(payload)
    except zstandard.ZstdError as exc:
        raise ArtifactFormatError(f"bad zstd frame header: {exc}") from None
    if params.content_size in (zstandard.CONTENTSIZE_UNKNOWN, zstandard.CONTENTSIZE_ERROR):
        raise ArtifactFormatError("zstd frame does not record its decompressed size")
    if params.content_size != content_length:
        raise ArtifactFormatError(
            f"zstd frame declares {params.content_size} decompressed bytes, prefix says {content_length}"
        )
    if params.dict_id != 0:
        raise ArtifactFormatError(f"zstd frame needs dictionary {params.dict_id}; .gmask uses none")
    if not params.has_checksum:
        raise ArtifactFormatError("zstd frame has no content checksum")
    try:
        body = zstandard.ZstdDecompressor().decompress(payload, allow_extra_data=False)
    except zstandard.ZstdError as exc:
        raise ArtifactFormatError(f"corrupt zstd payload: {exc}") from None
    if len(body) != content_length:
        raise ArtifactFormatError(
            f"zstd payload decompressed to {len(body)} bytes, prefix says {content_length}"
        )
    return body


def _decode_msgpack(body: bytes, limits: ReadLimits) -> Any:
    """msgpack-decode with every size bounded, no ext types, str-only keys in sorted order."""
    budget = _Budget(limits)

    def on_list(items: list) -> list:
        budget.spend(len(items))
        return items

    def on_map(pairs: list[tuple[Any, Any]]) -> dict:
        budget.spend(len(pairs))
        previous = None
        for key, _ in pairs:
            if type(key) is not str:
                raise _Problem(f"map key {_short(key)} is not a str")
            if previous is not None and not previous < key:
                reason = "duplicate map key" if previous == key else "map keys out of order at"
                raise _Problem(f"{reason} {_short(key)} (keys must be unique and sorted)")
            previous = key
        return dict(pairs)

    def on_ext(code: int, data: bytes) -> Any:
        raise _Problem(f"msgpack ext type {code} is not allowed")

    try:
        return msgpack.unpackb(
            body,
            raw=False,
            strict_map_key=True,
            use_list=True,
            timestamp=0,
            list_hook=on_list,
            object_pairs_hook=on_map,
            ext_hook=on_ext,
            max_str_len=limits.max_str_bytes,
            max_bin_len=min(limits.max_payload_bytes, _BIN_MAX),
            max_array_len=limits.max_container_len,
            max_map_len=limits.max_container_len,
            max_ext_len=0,
        )
    except _Problem as problem:
        raise ArtifactFormatError(f"payload document: {problem}") from None
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - hostile bytes meet a third-party parser: wrap all
        message = (str(exc) or (exc.__doc__ or "").strip())[:120]
        raise ArtifactFormatError(
            f"payload is not a valid msgpack document: {type(exc).__name__}: {message}"
        ) from None


def _check_keys(mapping: dict, expected: frozenset[str], where: str) -> None:
    unknown = sorted(set(mapping) - expected)
    if unknown:
        raise ArtifactFormatError(f"{where}: unknown key {_short(unknown[0])} (expected {sorted(expected)})")
    missing = sorted(expected - set(mapping))
    if missing:
        raise ArtifactFormatError(f"{where}: missing key {missing[0]!r}")


def _check_dtype(dtype: Any, where: str) -> np.dtype:
    if type(dtype) is not str:
        raise ArtifactFormatError(f"{where}: dtype {_short(dtype)} is not a str")
    if dtype not in ALLOWED_DTYPES:
        if dtype[:1] == ">":
            raise ArtifactFormatError(
                f"{where}: big-endian dtype {dtype!r} not allowed; arrays are little-endian"
            )
        raise ArtifactFormatError(
            f"{where}: dtype {_short(dtype)} not in the allow-list {list(ALLOWED_DTYPES)}"
        )
    return np.dtype(dtype)


def _check_shape(shape: Any, where: str, limits: ReadLimits) -> int:
    """Check a shape list; return its element count."""
    if type(shape) is not list:
        raise ArtifactFormatError(f"{where}: shape {_short(shape)} is not a list")
    if len(shape) > limits.max_ndim:
        raise ArtifactFormatError(f"{where}: {len(shape)} dimensions exceed max_ndim={limits.max_ndim}")
    for dim in shape:
        if type(dim) is not int or dim < 0:
            raise ArtifactFormatError(
                f"{where}: shape {_short(shape)} has {_short(dim)}, not a non-negative int"
            )
    count, nonzero = _shape_elements(shape)
    if nonzero > limits.max_array_elements:
        raise ArtifactFormatError(
            f"{where}: shape {_short(shape)} has {nonzero} elements, "
            f"over max_array_elements={limits.max_array_elements}"
        )
    return count


def _decode_array(name: str, entry: Any, limits: ReadLimits) -> np.ndarray:
    try:
        _check_name(name)
    except _Problem as problem:
        raise ArtifactFormatError(str(problem)) from None
    where = f"array {name!r}"
    if type(entry) is not dict:
        raise ArtifactFormatError(f"{where}: entry is a {type(entry).__name__}, expected a map")
    _check_keys(entry, _ARRAY_KEYS, where)
    dtype = _check_dtype(entry["dtype"], where)
    count = _check_shape(entry["shape"], where, limits)
    data = entry["data"]
    if type(data) is not bytes:
        raise ArtifactFormatError(f"{where}: data is a {type(data).__name__}, expected msgpack bin")
    if len(data) != count * dtype.itemsize:
        raise ArtifactFormatError(
            f"{where}: shape {entry['shape']} of {dtype.str} needs {count * dtype.itemsize} bytes, has {len(data)}"
        )
    arr = np.frombuffer(data, dtype=dtype).reshape(entry["shape"])
    if dtype.kind == "b" and count:
        _check_bool_bytes(where, arr)
    return arr


def _check_bool_bytes(where: str, arr: np.ndarray) -> None:
    raw = arr.view(np.uint8)
    if raw.max() > 1:
        flat = int(np.argmax(raw.reshape(-1) > 1))
        position = np.unravel_index(flat, arr.shape)
        raise ArtifactFormatError(
            f"{where}: bool byte {int(raw.reshape(-1)[flat])} at position {_position(position)} (must be 0 or 1)"
        )


def _check_document(document: Any, limits: ReadLimits) -> tuple[dict, dict[str, np.ndarray]]:
    if type(document) is not dict:
        raise ArtifactFormatError(f"payload document is a {type(document).__name__}, expected a map")
    _check_keys(document, _TOP_KEYS, "payload document")
    meta, entries = document["meta"], document["arrays"]
    if type(meta) is not dict:
        raise ArtifactFormatError(f"meta is a {type(meta).__name__}, expected a map")
    try:
        _check_meta(meta, "meta", 1, limits, None)
    except _Problem as problem:
        raise ArtifactFormatError(str(problem)) from None
    if type(entries) is not dict:
        raise ArtifactFormatError(f"arrays is a {type(entries).__name__}, expected a map")
    if len(entries) > limits.max_arrays:
        raise ArtifactFormatError(f"{len(entries)} arrays exceed max_arrays={limits.max_arrays}")
    return meta, {name: _decode_array(name, entry, limits) for name, entry in entries.items()}


def unpack(
    data: bytes | bytearray | memoryview, limits: ReadLimits = DEFAULT_READ_LIMITS
) -> tuple[dict, dict[str, np.ndarray]]:
    """Decode and fully validate the bytes of a ``.gmask`` file.

    Checks run cheapest first, and each bounds the next one's allocation: magic, guard,
    version, prefix length, reserved field, lengths against the actual data and the
    limits, SHA-256, zstd frame header (declared size equals the prefix's), bounded
    decompression, bounded msgpack decoding, then the document's structure, dtypes,
    shapes and data lengths. Array *contents* (index ranges) are the artifact layer's
    job; see :func:`check_index_range`.

    Args:
        data: the file contents (any C-contiguous bytes-like object).
        limits: resource caps; the defaults fit large real artifacts.

    Returns:
        ``(meta, arrays)``: the metadata dict and a dict of read-only arrays (views of
        the decoded msgpack bin values, native byte order on little-endian hosts), both in
        sorted name order.

    Raises:
        ArtifactVersionError: the file's format version is not in :data:`READ_VERSIONS`.
        ArtifactFormatError: anything else wrong with the data; the message says what.
        TypeError: ``data`` is not bytes-like.

    >>> unpack(b"GMSK")
    Traceback (most recent call last):
    ...
    gramc.errors.ArtifactFormatError: truncated: 4 bytes, shorter than the 64-byte prefix
    """
    view = memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    _, content_length = _parse_prefix(view, limits)
    _check_digest(view)
    body = _decompress(view[PREFIX_SIZE:], content_length)
    document = _decode_msgpack(body, limits)
    del body  # the arrays view msgpack's bin objects, not this buffer
    return _check_document(document, limits)


def read_file(
    path: str | os.PathLike[str], limits: ReadLimits = DEFAULT_READ_LIMITS
) -> tuple[dict, dict[str, np.ndarray]]:
    """Read and validate a ``.gmask`` file (see :func:`unpack`).

    The file's size is checked against ``limits.max_file_bytes`` before any byte is read,
    and only regular files are read. Error messages start with the path.

    Raises:
        ArtifactFormatError, ArtifactVersionError: as :func:`unpack`, or the file is too
            large or not a regular file.
        OSError: the file cannot be opened or read.
    """
    name = os.fspath(path)
    with open(name, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ArtifactFormatError(f"{name}: not a regular file")
        if info.st_size > limits.max_file_bytes:
            raise ArtifactFormatError(
                f"{name}: file of {info.st_size} bytes exceeds max_file_bytes={limits.max_file_bytes}"
            )
        data = handle.read(info.st_size)
    try:
        return unpack(data, limits)
    except ArtifactFormatError as exc:
        exc.args = (f"{name}: {exc}",)
        raise


# --------------------------------------------------------------------------- contents


def _position(index: tuple[SupportsInt, ...]) -> str:
    return str(int(index[0])) if len(index) == 1 else str(tuple(int(i) for i in index))


_CHUNK = 1 << 22


def check_index_range(name: str, arr: np.ndarray, lo: int, hi: int) -> None:
    """Raise unless every value ``v`` of the integer array satisfies ``lo <= v < hi``.

    For the artifact layer, which knows what range each array's values index into. Runs in
    chunks without allocating a full-size mask; the message names the array, the first bad
    position (C order) and its value.

    Raises:
        ArtifactFormatError: a value is out of range.
        TypeError: ``arr`` is not an integer numpy array.

    >>> import numpy as np
    >>> check_index_range("next", np.array([0, 3, 1]), 0, 4)
    >>> check_index_range("next", np.array([[0, 3], [4, 1]]), 0, 4)
    Traceback (most recent call last):
    ...
    gramc.errors.ArtifactFormatError: array 'next': value 4 at position (1, 0) is outside [0, 4)
    """
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "iu":
        raise TypeError(f"check_index_range needs an integer numpy array, got {_short(arr)}")
    info = np.iinfo(arr.dtype)
    flat = arr.reshape(-1)
    # Thresholds that lie outside the dtype's range are either vacuous (None) or always
    # violated; the rest are cast to the dtype, so no comparison ever promotes or overflows.
    low = None if lo <= info.min else lo
    high = None if hi > info.max else hi
    for start in range(0, flat.size, _CHUNK):
        chunk = flat[start : start + _CHUNK]
        too_low = low is not None and (low > info.max or int(chunk.min()) < low)
        too_high = high is not None and (high <= info.min or int(chunk.max()) >= high)
        if too_low or too_high:
            offset = start + _first_outside(chunk, low, high, info)
            position = np.unravel_index(offset, arr.shape)
            raise ArtifactFormatError(
                f"array {name!r}: value {int(flat[offset])} at position {_position(position)} "
                f"is outside [{lo}, {hi})"
            )


def _first_outside(chunk: np.ndarray, low: int | None, high: int | None, info: np.iinfo) -> int:
    bad = np.zeros(chunk.shape, dtype=bool)
    if low is not None:
        bad |= True if low > info.max else chunk < chunk.dtype.type(low)
    if high is not None:
        bad |= True if high <= info.min else chunk >= chunk.dtype.type(high)
    return int(np.argmax(bad))
