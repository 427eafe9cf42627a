"""Tests of the .gmask container (gramc.formats.container) against docs/format/gmask-v1.md.

Hostile files are built here by an independent encoder that follows the spec's byte table
(``_file``), so that a valid checksum never hides a bug in the payload checks.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import re
import struct
import tracemalloc
from pathlib import Path

import hypothesis.extra.numpy as hnp
import jsonschema
import msgpack
import numpy as np
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gramc.errors import ArtifactFormatError, ArtifactVersionError
from gramc.formats import container
from gramc.formats.container import (
    ALLOWED_DTYPES,
    FORMAT_VERSION,
    READ_VERSIONS,
    ReadLimits,
    check_index_range,
    pack,
    read_file,
    unpack,
    write_file,
)

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "docs" / "format" / "gmask-v1.md"
SCHEMA = ROOT / "docs" / "format" / "gmask-header.v1.schema.json"
DEFAULT = ReadLimits()
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- helpers


_UNSET = object()


def _file(
    body: bytes | None = None,
    *,
    doc: object = _UNSET,
    frame: bytes | None = None,
    version: tuple[int, int] = (1, 0),
    reserved: int = 0,
    content_length: int | None = None,
    payload_length: int | None = None,
) -> bytes:
    """A file per the spec's prefix table, with a correct SHA-256 over whatever it holds."""
    if doc is not _UNSET:
        body = msgpack.packb(_sorted(doc), use_bin_type=True)
    if frame is None:
        frame = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(body)
    head = struct.pack(
        "<4s4sHHIQQ",
        b"GMSK",
        b"\r\n\x1a\n",
        *version,
        reserved,
        len(frame) if payload_length is None else payload_length,
        len(body) if content_length is None else content_length,
    )
    return head + hashlib.sha256(head + frame).digest() + frame


def _sorted(value: object) -> object:
    """Canonical key order, so that a hostile test document fails for its own reason."""
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value, key=repr)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _entry(dtype: object = "<i4", shape: object = (3,), data: object = None) -> dict:
    if data is None:
        data = bytes(int(np.prod(shape)) * np.dtype(dtype).itemsize)
    return {"data": data, "dtype": dtype, "shape": list(shape) if isinstance(shape, tuple) else shape}


def _doc(meta: object = None, arrays: object = None) -> dict:
    return {"arrays": {} if arrays is None else arrays, "meta": {} if meta is None else meta}


def _rejected(data: bytes, match: str | None = None, limits: ReadLimits = DEFAULT) -> ArtifactFormatError:
    with pytest.raises(ArtifactFormatError, match=match) as info:
        unpack(data, limits)
    return info.value


def _spec_hex() -> bytes:
    text = SPEC.read_text(encoding="utf-8")
    block = re.search(r"```hex\n(.*?)```", text, re.DOTALL)
    assert block, "worked example missing from the spec"
    return bytes.fromhex("".join(block.group(1).split()))


EXAMPLE_META = {"kind": "demo"}
EXAMPLE_ARRAYS = {"ids": np.array([7, 8, 9], dtype="<i4")}
EXAMPLE = pack(EXAMPLE_META, EXAMPLE_ARRAYS)

# --------------------------------------------------------------------------- strategies

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.binary(max_size=8)
)
_meta_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
_metas = st.dictionaries(st.text(max_size=6), _meta_values, max_size=5)
_names = st.from_regex(r"[A-Za-z0-9_.:/-]{1,12}", fullmatch=True)
_arrays = st.dictionaries(
    _names,
    hnp.arrays(
        st.sampled_from(ALLOWED_DTYPES).map(np.dtype),
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    ),
    max_size=3,
)


def _same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return list(a) == list(b) and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes() for k in a
    )


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("dtype", ALLOWED_DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3), (0, 4), (2, 0, 3), (1, 1, 1, 2)])
def test_round_trip_every_dtype_and_shape(dtype, shape):
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2, size=shape) if dtype == "|b1" else rng.integers(-100, 100, size=shape)
    arr = np.asarray(values).astype(dtype)
    meta, arrays = unpack(pack({}, {"a": arr}))
    out = arrays["a"]
    assert meta == {}
    assert out.dtype == np.dtype(dtype) and out.shape == shape
    assert np.array_equal(out, arr)


def test_extreme_values_round_trip():
    arrays = {
        "i8": np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max]),
        "u8": np.array([0, np.iinfo(np.uint64).max], dtype=np.uint64),
        "f8": np.array([np.nan, np.inf, -np.inf, -0.0, 5e-324]),
        "f4": np.array([np.nan, np.float32(3.4e38)], dtype=np.float32),
    }
    _, out = unpack(pack({}, arrays))
    for name, arr in arrays.items():
        assert out[name].tobytes() == arr.tobytes()


def test_byte_order_and_layout_are_normalised():
    big = np.arange(12, dtype=">i4").reshape(3, 4)
    fortran = np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4))
    strided = np.arange(40, dtype=np.int16)[::3]
    _, out = unpack(pack({}, {"big": big, "f": fortran, "s": strided}))
    assert out["big"].dtype.str == "<i4" and np.array_equal(out["big"], big)
    assert np.array_equal(out["f"], fortran) and out["f"].flags.c_contiguous
    assert np.array_equal(out["s"], strided)
    assert pack({}, {"x": big}) == pack({}, {"x": big.astype("<i4")})


def test_results_are_read_only_aligned_and_native():
    _, arrays = unpack(pack({}, {"a": np.arange(10, dtype=np.int64), "b": np.ones((2, 2), bool)}))
    for arr in arrays.values():
        assert not arr.flags.writeable and arr.flags.aligned and arr.flags.c_contiguous
        assert arr.dtype.isnative
        with pytest.raises(ValueError):
            arr[...] = 0
        with pytest.raises(ValueError):
            arr.flags.writeable = True


def test_meta_round_trip_keeps_every_type():
    meta = {
        "none": None,
        "bools": [True, False],
        "ints": [0, -1, 2**63 - 1, -(2**63), 2**64 - 1],
        "floats": [0.5, -0.0, 1e308],
        "text": "héllo ✓ \U0001f600",
        "raw": b"\x00\xff",
        "nested": {"b": [{"z": []}, {}], "a": {"deep": [[1]]}},
        "": "empty key",
    }
    out, arrays = unpack(pack(meta, {}))
    assert out == meta and arrays == {}
    assert type(out["raw"]) is bytes and type(out["ints"][0]) is int
    assert list(out) == sorted(meta)  # documents come back in canonical order


@FAST
@given(meta=_metas, arrays=_arrays)
def test_property_round_trip(meta, arrays):
    out_meta, out_arrays = unpack(pack(meta, arrays))
    assert out_meta == meta
    assert _same_arrays(
        out_arrays, {k: v.astype(v.dtype.newbyteorder("<")) for k, v in sorted(arrays.items())}
    )


def test_unpack_accepts_bytearray_and_memoryview():
    assert unpack(bytearray(EXAMPLE))[0] == EXAMPLE_META
    assert unpack(memoryview(EXAMPLE))[0] == EXAMPLE_META
    assert unpack(memoryview(np.frombuffer(EXAMPLE, np.uint8)))[0] == EXAMPLE_META


def test_reader_accepts_other_zstd_parameters():
    body = msgpack.packb(_doc({"k": 1}, {"a": _entry()}), use_bin_type=True)
    for level in (1, 19):
        frame = zstandard.ZstdCompressor(level=level, write_checksum=True).compress(body)
        meta, arrays = unpack(_file(body, frame=frame))
        assert meta == {"k": 1} and arrays["a"].tolist() == [0, 0, 0]


# --------------------------------------------------------------------------- determinism


def test_identical_inputs_give_identical_bytes():
    arrays = {"delta": np.arange(100, dtype=np.int32).reshape(10, 10), "mask": np.ones(64, bool)}
    meta = {"kind": "dfa", "options": {"b": 1, "a": [1, 2]}}
    assert pack(meta, arrays) == pack(meta, arrays)
    reordered_meta = {"options": {"a": [1, 2], "b": 1}, "kind": "dfa"}
    reordered_arrays = {"mask": np.ones(64, bool), "delta": np.arange(100, dtype=np.int32).reshape(10, 10)}
    assert pack(reordered_meta, reordered_arrays) == pack(meta, arrays)


def _pack_peak(meta, arrays) -> int:
    """The peak of Python-allocated memory while ``pack`` runs."""
    tracemalloc.start()
    try:
        pack(meta, arrays)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_large_document_is_streamed_into_one_frame_without_copies(monkeypatch):
    rng = np.random.default_rng(7)
    arrays = {"delta": rng.integers(0, 40, (3000, 70)).astype(np.int32), "flags": rng.random(5000) > 0.5,
              "swapped": rng.integers(0, 2**16, 999).astype(">u2"), "strided": np.arange(600, dtype=np.int64)[::3]}
    meta = {"kind": "pda", "names": ["a", "b"]}
    big = {"big": rng.integers(0, 4, 4 << 20).astype(np.uint8)}  # compresses about 4x
    assert _pack_peak(meta, big) > 4 << 20  # one shot: the document is one contiguous copy
    monkeypatch.setattr(container, "STREAM_ABOVE_BYTES", 1000)
    streamed = pack(meta, arrays)
    assert streamed == pack(meta, arrays)
    got_meta, got = unpack(streamed)
    assert got_meta == meta and set(got) == set(arrays)
    for name, arr in arrays.items():
        np.testing.assert_array_equal(got[name], arr)
    # Streamed, only the frame's chunks and their join are allocated, not the array's bytes.
    assert _pack_peak(meta, big) < 3 << 20


@FAST
@given(meta=_metas, arrays=_arrays, seed=st.integers(0, 2**32 - 1))
def test_property_insertion_order_does_not_matter(meta, arrays, seed):
    rng = np.random.default_rng(seed)

    def shuffled(value):
        if type(value) is dict:
            keys = list(value)
            rng.shuffle(keys)
            return {k: shuffled(value[k]) for k in keys}
        if type(value) is list:
            return [shuffled(v) for v in value]
        return value

    names = list(arrays)
    rng.shuffle(names)
    assert pack(shuffled(meta), {n: arrays[n] for n in names}) == pack(meta, arrays)


def test_bool_bytes_are_canonical():
    odd = np.array([0, 2, 1, 255], dtype=np.uint8).view(bool)
    assert pack({}, {"m": odd}) == pack({}, {"m": np.array([False, True, True, True])})


def test_spec_worked_example_is_current():
    """The hex in docs/format/gmask-v1.md decodes, and the writer still produces it exactly.

    If only the second assertion fails after a zstandard upgrade, the library's output
    changed: regenerate the example and the golden artifacts together.
    """
    example = _spec_hex()
    meta, arrays = unpack(example)
    assert meta == EXAMPLE_META and _same_arrays(arrays, EXAMPLE_ARRAYS)
    assert example == EXAMPLE


def test_spec_prefix_table_matches_code():
    assert container.PREFIX_SIZE == 64
    assert EXAMPLE[:4] == b"GMSK" and EXAMPLE[4:8] == b"\r\n\x1a\n"
    assert struct.unpack_from("<HHI", EXAMPLE, 8) == (*FORMAT_VERSION, 0)
    payload_length, content_length = struct.unpack_from("<QQ", EXAMPLE, 16)
    assert payload_length == len(EXAMPLE) - 64
    body = zstandard.ZstdDecompressor().decompress(EXAMPLE[64:])
    assert content_length == len(body)
    assert EXAMPLE[32:64] == hashlib.sha256(EXAMPLE[:32] + EXAMPLE[64:]).digest()


def test_versions():
    assert FORMAT_VERSION == (1, 0)
    assert READ_VERSIONS == ((1, 0),)
    assert all(major == FORMAT_VERSION[0] and minor <= FORMAT_VERSION[1] for major, minor in READ_VERSIONS)


# --------------------------------------------------------------------------- pack refuses


class _Color(enum.IntEnum):
    RED = 1


@pytest.mark.parametrize(
    "meta, arrays",
    [
        ([], {}),
        ({}, []),
        ({"t": (1, 2)}, {}),
        ({"s": {1, 2}}, {}),
        ({"n": np.int64(3)}, {}),
        ({"e": _Color.RED}, {}),
        ({"o": object()}, {}),
        ({"c": 1j}, {}),
        ({1: "int key"}, {}),
        ({"x": {b"k": 1}}, {}),
        ({"ba": bytearray(b"x")}, {}),
        ({}, {"a": [1, 2, 3]}),
        ({}, {"a": np.ma.masked_array([1, 2])}),
        ({}, {b"a": np.zeros(2)}),
    ],
)
def test_pack_type_errors(meta, arrays):
    with pytest.raises(TypeError):
        pack(meta, arrays)


@pytest.mark.parametrize(
    "meta, arrays, match",
    [
        ({"f": float("nan")}, {}, "non-finite"),
        ({"f": [float("inf")]}, {}, r"meta\['f'\]\[0\]: non-finite"),
        ({"i": 2**64}, {}, "range"),
        ({"i": -(2**63) - 1}, {}, "range"),
        ({"s": "\ud800"}, {}, "Unicode"),
        ({"\udfff": 1}, {}, "Unicode"),
        ({}, {"": np.zeros(1)}, "name"),
        ({}, {"a b": np.zeros(1)}, "name"),
        ({}, {"é": np.zeros(1)}, "name"),
        ({}, {"x" * 256: np.zeros(1)}, "name"),
        ({}, {"a": np.zeros(1, np.float16)}, "dtype"),
        ({}, {"a": np.zeros(1, np.complex128)}, "dtype"),
        ({}, {"a": np.array(["x"])}, "dtype"),
        ({}, {"a": np.array([None])}, "dtype"),
        ({}, {"a": np.zeros(1, "datetime64[s]")}, "dtype"),
        ({}, {"a": np.zeros(1, [("x", "<i4")])}, "dtype"),
        ({}, {"a": np.zeros((1,) * 33)}, "max_ndim"),
    ],
)
def test_pack_value_errors(meta, arrays, match):
    with pytest.raises(ValueError, match=match):
        pack(meta, arrays)


def test_pack_refuses_what_default_reader_refuses():
    deep: list = []
    for _ in range(40):
        deep = [deep]
    with pytest.raises(ValueError, match="max_meta_depth"):
        pack({"d": deep}, {})
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="max_meta_depth"):
        pack({"c": cyclic}, {})
    shared: list = [0, 0]
    for _ in range(30):  # a DAG that would expand to 2**30 values
        shared = [shared, shared]
    with pytest.raises(ValueError, match="max_values"):
        pack({"s": shared}, {})


# --------------------------------------------------------------------------- damage properties


def test_every_truncation_of_the_example_is_rejected():
    for cut in range(len(EXAMPLE)):
        _rejected(EXAMPLE[:cut])


def test_every_single_byte_corruption_of_the_example_is_rejected():
    data = bytearray(EXAMPLE)
    for position in range(len(data)):
        original = data[position]
        for flip in range(1, 256):
            data[position] = original ^ flip
            with pytest.raises(ArtifactFormatError):
                unpack(data)
        data[position] = original


def test_digest_field_damage_is_named():
    data = bytearray(EXAMPLE)
    data[40] ^= 0x01
    _rejected(bytes(data), "checksum mismatch")


@FAST
@given(meta=_metas, arrays=_arrays, data=st.data())
def test_property_truncation_is_rejected(meta, arrays, data):
    blob = pack(meta, arrays)
    cut = data.draw(st.integers(0, len(blob) - 1))
    _rejected(blob[:cut])


@FAST
@given(meta=_metas, arrays=_arrays, data=st.data())
def test_property_single_byte_corruption_is_rejected(meta, arrays, data):
    blob = bytearray(pack(meta, arrays))
    position = data.draw(st.integers(0, len(blob) - 1))
    blob[position] ^= data.draw(st.integers(1, 255))
    _rejected(bytes(blob))


@FAST
@given(st.binary(max_size=300))
def test_property_random_bytes_are_rejected(data):
    _rejected(data)


@FAST
@given(st.binary(max_size=200))
def test_property_random_bytes_after_a_valid_start_are_rejected(tail):
    _rejected(EXAMPLE[:12] + tail)


@FAST
@given(st.binary(max_size=300))
def test_property_arbitrary_payload_with_valid_hash_never_escapes(body):
    """Any decompressed document bytes: a result or ArtifactFormatError, nothing else."""
    try:
        unpack(_file(body))
    except ArtifactFormatError:
        pass


@FAST
@given(
    st.recursive(
        _scalars,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(["arrays", "meta", "data", "dtype", "shape", "x"]) | st.text(max_size=3),
                inner,
                max_size=4,
            )
        ),
        max_leaves=16,
    )
)
def test_property_arbitrary_msgpack_document_never_escapes(document):
    try:
        unpack(_file(doc=document))
    except ArtifactFormatError:
        pass


@FAST
@given(meta=_metas, arrays=_arrays, data=st.data())
def test_property_corrupted_document_with_valid_hash_never_escapes(meta, arrays, data):
    """Flip a byte of the *decompressed* document, recompress and rehash."""
    blob = pack(meta, arrays)
    body = bytearray(zstandard.ZstdDecompressor().decompress(blob[64:]))
    position = data.draw(st.integers(0, len(body) - 1))
    body[position] ^= data.draw(st.integers(1, 255))
    try:
        unpack(_file(bytes(body)))
    except ArtifactFormatError:
        pass


# --------------------------------------------------------------------------- prefix checks


def test_prefix_messages():
    assert "not a .gmask file" in str(_rejected(b"PK\x03\x04" + bytes(100)))
    assert "not a .gmask file" in str(_rejected(b"GX"))
    assert "shorter than the 64-byte prefix" in str(_rejected(EXAMPLE[:63]))
    assert "text mode" in str(_rejected(EXAMPLE[:4] + b"\n\x1a\n" + EXAMPLE[8:]))
    _rejected(EXAMPLE[:-1], r"truncated: prefix says 80 payload bytes, file has 79")
    _rejected(EXAMPLE + b"\0", r"trailing data: prefix says 80 payload bytes, file has 81")


def test_reserved_field_must_be_zero():
    _rejected(_file(doc=_doc(), reserved=1), "reserved")


@pytest.mark.parametrize("version", [(2, 0), (1, 1), (0, 9), (65535, 65535)])
def test_unsupported_versions(version):
    data = _file(doc=_doc(), version=version)
    with pytest.raises(ArtifactVersionError) as info:
        unpack(data)
    assert info.value.found == version
    assert info.value.supported == "1.0"
    assert isinstance(info.value, ArtifactFormatError)


def test_version_is_checked_before_anything_after_byte_12():
    future = b"GMSK\r\n\x1a\n" + struct.pack("<HH", 2, 0) + b"a different layout entirely"
    with pytest.raises(ArtifactVersionError) as info:
        unpack(future)
    assert info.value.found == (2, 0)


def test_lengths_are_checked_before_the_hash():
    data = bytearray(EXAMPLE)
    data[16:24] = struct.pack("<Q", 10**12)
    _rejected(bytes(data), "truncated: prefix says 1000000000000 payload bytes")


def test_file_limit_applies_to_in_memory_data():
    _rejected(EXAMPLE, "max_file_bytes=100", ReadLimits(max_file_bytes=100))


# --------------------------------------------------------------------------- hostile payloads


def _zeros_frame(size: int, **kwargs) -> bytes:
    return zstandard.ZstdCompressor(level=1, write_checksum=True, **kwargs).compress(bytes(size))


def _frame_header(frame: bytes) -> tuple[int, int, int]:
    """(descriptor offset, content-size field offset, content-size field length) of a frame."""
    fhd = frame[4]
    single_segment = (fhd >> 5) & 1
    did_len = (0, 1, 2, 4)[fhd & 3]
    fcs_len = (single_segment, 2, 4, 8)[fhd >> 6]
    return 4, 5 + (1 - single_segment) + did_len, fcs_len


def test_bomb_header_small_frame_large():
    frame = _zeros_frame(64 << 20)
    _rejected(
        _file(b"", frame=frame, content_length=100), "declares 67108864 decompressed bytes, prefix says 100"
    )


def test_bomb_header_over_limit_is_refused_before_decompressing():
    frame = _zeros_frame(1000)
    _rejected(_file(b"", frame=frame, content_length=5 << 30), "over max_payload_bytes")
    frame = _zeros_frame(8 << 20)
    _rejected(
        _file(b"", frame=frame, content_length=8 << 20),
        "over max_payload_bytes=1048576",
        ReadLimits(max_payload_bytes=1 << 20),
    )


def test_bomb_frame_lies_about_its_content_size():
    frame = bytearray(_zeros_frame(64 << 20))
    _, offset, length = _frame_header(frame)
    assert length == 4
    frame[offset : offset + 4] = struct.pack("<I", 1000)
    tracemalloc.start()
    try:
        _rejected(_file(b"", frame=bytes(frame), content_length=1000), "corrupt zstd payload")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # never allocated the 64 MiB the frame really holds


def test_frame_without_content_size():
    body = msgpack.packb(_doc(), use_bin_type=True)
    frame = zstandard.ZstdCompressor(write_checksum=True, write_content_size=False).compress(body)
    _rejected(_file(body, frame=frame), "does not record its decompressed size")


def test_frame_without_checksum():
    body = msgpack.packb(_doc(), use_bin_type=True)
    frame = zstandard.ZstdCompressor(write_checksum=False).compress(body)
    _rejected(_file(body, frame=frame), "no content checksum")


def test_frame_with_dictionary_id():
    body = msgpack.packb(_doc(), use_bin_type=True)
    frame = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(body))
    descriptor, offset, _ = _frame_header(frame)
    frame[descriptor] |= 0x01  # Dictionary_ID_flag = 1: a one-byte id precedes the content size
    frame[offset:offset] = b"\x07"
    _rejected(_file(body, frame=bytes(frame)), "dictionary 7")


@pytest.mark.parametrize("extra", [b"\0", b"\x28\xb5\x2f\xfd", "second frame"])
def test_data_after_the_frame(extra):
    body = msgpack.packb(_doc(), use_bin_type=True)
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(body)
    extra = frame if extra == "second frame" else extra
    _rejected(_file(body, frame=frame + extra), "corrupt zstd payload")


def test_payload_that_is_not_a_zstd_frame():
    body = msgpack.packb(_doc(), use_bin_type=True)
    skippable = b"\x50\x2a\x4d\x18" + struct.pack("<I", 2) + b"hi"
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(body)
    _rejected(_file(body, frame=skippable + frame), "not a zstd frame")
    _rejected(_file(body, frame=body), "not a zstd frame")


def test_frame_checksum_mismatch():
    body = msgpack.packb(_doc(), use_bin_type=True)
    frame = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(body))
    frame[-1] ^= 0xFF
    _rejected(_file(body, frame=bytes(frame)), "corrupt zstd payload")


_KEY_META = msgpack.packb("meta")
_KEY_ARRAYS = msgpack.packb("arrays")


def _raw_doc(meta_value: bytes) -> bytes:
    """A document whose meta map is given as raw msgpack bytes."""
    return b"\x82" + _KEY_ARRAYS + b"\x80" + _KEY_META + meta_value


@pytest.mark.parametrize(
    "body, match",
    [
        (msgpack.packb(_doc({"x": msgpack.ExtType(5, b"a")}), use_bin_type=True), "ext|max_ext_len"),
        (_raw_doc(b"\x81\xa1x\xc7\x00\x05"), "ext type 5"),  # ext 8 of length 0
        (msgpack.packb(_doc({"t": msgpack.Timestamp(0)}), use_bin_type=True), "max_ext_len"),
        (_raw_doc(b"\x81\xa1x" + b"\x91" * 100_000 + b"\xc0"), "msgpack"),
        (_raw_doc(b"\x81\xa1x\xa2\xff\xfe"), "UnicodeDecodeError"),
        (_raw_doc(b"\x81\x01\x02"), "map key"),
        (_raw_doc(b"\x81\xc4\x01k\x01"), "map key b'k' is not a str"),
        (_raw_doc(b"\x82\xa1b\x01\xa1a\x02"), "out of order at 'a'"),
        (_raw_doc(b"\x82\xa1a\x01\xa1a\x02"), "duplicate map key 'a'"),
        (msgpack.packb({"meta": {}, "arrays": {}}), "out of order at 'arrays'"),
        (msgpack.packb(_doc(), use_bin_type=True) + b"\xc0", "ExtraData"),
        (_raw_doc(b"\xdf\xff\xff\xff\xff"), "max_map_len"),
        (_raw_doc(b"\x81\xa1x\xdd\xff\xff\xff\xff"), "max_array_len"),
        (_raw_doc(b"\x81\xa1x\xc6\xff\xff\xff\xff"), "msgpack"),
        (b"", "msgpack"),
    ],
)
def test_hostile_msgpack(body, match):
    # The decoder's own limits, past the compression-ratio check some of these trip first.
    err = _rejected(_file(body), match, ReadLimits(max_compression_ratio=1 << 30))
    assert err.__cause__ is None and err.__suppress_context__


def test_decompression_bomb_is_refused_before_decompressing():
    """A small file whose prefix promises a thousandfold more bytes is refused from the
    prefix alone: here 35 KB that would decompress to 32 MiB of one repeated byte."""
    body = _raw_doc(b"\x81\xa1x\xc6" + struct.pack(">I", 32 << 20) + b"\0" * (32 << 20))
    data = _file(body)
    assert len(data) < 40_000
    _rejected(data, r"from a \d+-byte payload, over max_compression_ratio=1024")
    _rejected(data, "max_compression_ratio=10", ReadLimits(max_compression_ratio=10))


def test_meta_depth_bomb_within_msgpack_limits():
    deep: object = 1
    for _ in range(40):
        deep = [deep]
    _rejected(_file(doc=_doc({"d": deep})), "max_meta_depth=32")
    _rejected(_file(doc=_doc({"d": deep})), "max_meta_depth=3", ReadLimits(max_meta_depth=3))


@pytest.mark.parametrize(
    "meta, match",
    [
        ([], "meta is a list"),
        ({"f": float("nan")}, "non-finite"),
        ({"f": [float("-inf")]}, "non-finite"),
    ],
)
def test_hostile_meta_values(meta, match):
    _rejected(_file(doc=_doc(meta)), match)


def test_read_limits_on_the_document():
    many_lists = _doc({"l": [[] for _ in range(1000)]})
    _rejected(_file(doc=many_lists), "max_values=500", ReadLimits(max_values=500))
    _rejected(_file(doc=_doc({"l": list(range(100))})), "max_array_len", ReadLimits(max_container_len=10))
    _rejected(_file(doc=_doc({"s": "x" * 100})), "max_str_len", ReadLimits(max_str_bytes=10))
    arrays = {f"a{i}": _entry() for i in range(5)}
    _rejected(_file(doc=_doc(arrays=arrays)), "max_arrays=4", ReadLimits(max_arrays=4))
    _rejected(
        _file(doc=_doc(arrays={"a": _entry(shape=(10, 10))})),
        "max_array_elements=99",
        ReadLimits(max_array_elements=99),
    )
    _rejected(_file(doc=_doc(arrays={"a": _entry(shape=(1,) * 5)})), "max_ndim=4", ReadLimits(max_ndim=4))


@pytest.mark.parametrize(
    "document, match",
    [
        ([], "payload document is a list"),
        ({"arrays": {}, "meta": {}, "zzz": 1}, "unknown key 'zzz'"),
        ({"arrays": {}}, "missing key 'meta'"),
        ({"meta": {}}, "missing key 'arrays'"),
        ({"arrays": [], "meta": {}}, "arrays is a list"),
        (_doc(arrays={"a": [1]}), "entry is a list"),
        (_doc(arrays={"a": {**_entry(), "offset": 0}}), "array 'a': unknown key 'offset'"),
        (_doc(arrays={"a": {"dtype": "<i4", "shape": [0]}}), "array 'a': missing key 'data'"),
        (_doc(arrays={"": _entry()}), "name '' is invalid"),
        (_doc(arrays={"a b": _entry()}), "name 'a b' is invalid"),
        (_doc(arrays={"a": _entry(data="000000000000")}), "data is a str, expected msgpack bin"),
        (
            _doc(arrays={"delta": _entry(shape=(3, 4), data=bytes(40))}),
            r"array 'delta': shape \[3, 4\] of <i4 needs 48 bytes, has 40",
        ),
        (_doc(arrays={"a": _entry(data=bytes(13))}), "needs 12 bytes, has 13"),
        (_doc(arrays={"a": _entry("|b1", (3,), b"\x00\x02\x01")}), r"bool byte 2 at position 1"),
    ],
)
def test_hostile_structure(document, match):
    _rejected(_file(doc=document), match)


@pytest.mark.parametrize(
    "dtype",
    [
        "O",
        "|O",
        "<U4",
        ">i4",
        ">f8",
        "=i4",
        "<f2",
        "|V8",
        "<c16",
        "<M8[s]",
        "int32",
        "i4",
        "",
        "<i4 ",
        "|b1\x00",
        4,
        None,
        ["<i4"],
    ],
)
def test_hostile_dtypes(dtype):
    err = _rejected(_file(doc=_doc(arrays={"a": _entry("<i4", (1,), bytes(4)) | {"dtype": dtype}})), "dtype")
    if isinstance(dtype, str) and dtype.startswith(">"):
        assert "big-endian" in str(err)


@pytest.mark.parametrize(
    "shape, match",
    [
        ([-1], "non-negative"),
        ([2**40, 2**40], "max_array_elements"),
        ([2**62, 2**62, 0], "max_array_elements"),
        ([2**64 - 1], "max_array_elements"),
        ("3", "not a list"),
        (3, "not a list"),
        ([True], "non-negative int"),
        ([1.0], "non-negative int"),
        ([None], "non-negative int"),
        ([1] * 33, "max_ndim"),
    ],
)
def test_hostile_shapes(shape, match):
    _rejected(_file(doc=_doc(arrays={"a": {"data": b"", "dtype": "<i4", "shape": shape}})), match)


def test_empty_and_zero_d_arrays_from_foreign_writers():
    doc = _doc(arrays={"e": _entry("<f8", (0, 2**20), b""), "s": _entry("<u2", (), b"\x01\x02")})
    _, arrays = unpack(_file(doc=doc))
    assert arrays["e"].shape == (0, 2**20) and arrays["s"].shape == () and int(arrays["s"]) == 0x0201


# --------------------------------------------------------------------------- files


def test_write_and_read_file(tmp_path):
    path = tmp_path / "x.gmask"
    write_file(path, EXAMPLE_META, EXAMPLE_ARRAYS)
    assert path.read_bytes() == EXAMPLE
    meta, arrays = read_file(path)
    assert meta == EXAMPLE_META and _same_arrays(arrays, EXAMPLE_ARRAYS)
    assert read_file(str(path))[0] == EXAMPLE_META
    write_file(str(path), {"kind": "second"}, {})  # replaces atomically
    assert read_file(path)[0] == {"kind": "second"}
    assert sorted(os.listdir(tmp_path)) == ["x.gmask"]


def test_write_file_validates_before_touching_the_disk(tmp_path):
    path = tmp_path / "x.gmask"
    path.write_bytes(EXAMPLE)
    with pytest.raises(TypeError):
        write_file(path, {"bad": object()}, {})
    assert path.read_bytes() == EXAMPLE and os.listdir(tmp_path) == ["x.gmask"]


def test_write_file_cleans_up_when_the_rename_fails(tmp_path):
    target = tmp_path / "dir.gmask"
    target.mkdir()
    (target / "occupant").write_text("x")
    with pytest.raises(OSError):
        write_file(target, {}, {})
    assert sorted(os.listdir(tmp_path)) == ["dir.gmask"]


def test_read_file_errors_name_the_path(tmp_path):
    path = tmp_path / "bad.gmask"
    path.write_bytes(EXAMPLE[:-3])
    with pytest.raises(ArtifactFormatError, match=r"bad\.gmask: truncated"):
        read_file(path)
    future = tmp_path / "future.gmask"
    future.write_bytes(_file(doc=_doc(), version=(3, 1)))
    with pytest.raises(
        ArtifactVersionError, match=r"future\.gmask: unsupported .gmask format version 3\.1"
    ) as info:
        read_file(future)
    assert info.value.found == (3, 1)


def test_read_file_refuses_a_too_large_file_before_reading(tmp_path, monkeypatch):
    path = tmp_path / "huge.gmask"
    with open(path, "wb") as handle:  # sparse: costs no disk space and no time
        handle.write(EXAMPLE[:64])
        handle.truncate(ReadLimits().max_file_bytes + 1)

    def no_unpack(*args, **kwargs):
        raise AssertionError("read the file")

    monkeypatch.setattr(container, "unpack", no_unpack)
    with pytest.raises(ArtifactFormatError, match="exceeds max_file_bytes"):
        read_file(path)
    with pytest.raises(ArtifactFormatError, match="exceeds max_file_bytes=100"):
        read_file(tmp_path / "huge.gmask", ReadLimits(max_file_bytes=100))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_read_file_refuses_non_regular_files(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # hold it open so that opening to read cannot block
    try:
        with pytest.raises(ArtifactFormatError, match="not a regular file"):
            read_file(fifo)
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        read_file(tmp_path)  # a directory cannot even be opened


# --------------------------------------------------------------------------- index ranges


def test_check_index_range_accepts_valid_values():
    check_index_range("t", np.array([0, 5, 9], np.int32), 0, 10)
    check_index_range("t", np.array([], np.int64), 0, 0)
    check_index_range("t", np.array(3, np.uint8), -1, 4)
    check_index_range("t", np.array([2**64 - 1], np.uint64), 0, 2**64)
    check_index_range("t", np.array([-128, 127], np.int8), -(2**70), 2**70)


@pytest.mark.parametrize(
    "arr, lo, hi, message",
    [
        (
            np.array([0, 10, 11], np.int32),
            0,
            10,
            re.escape("array 't': value 10 at position 1 is outside [0, 10)"),
        ),
        (np.array([[0, 1], [-1, 2]], np.int64), 0, 3, r"value -1 at position \(1, 0\)"),
        (np.array([2**63], np.uint64), 0, 2**63, "value 9223372036854775808 at position 0"),
        (np.array([5], np.uint8), 1000, 2000, "value 5 at position 0"),
        (np.array([5], np.int8), -2000, -1000, "value 5 at position 0"),
        (np.array(7, np.int16), 0, 7, r"value 7 at position \(\)"),
        (np.array([1, 2], np.int32), 0, 0, "value 1 at position 0"),
    ],
)
def test_check_index_range_names_first_bad_value(arr, lo, hi, message):
    with pytest.raises(ArtifactFormatError, match=message):
        check_index_range("t", arr, lo, hi)


def test_check_index_range_scans_in_chunks(monkeypatch):
    monkeypatch.setattr(container, "_CHUNK", 7)
    arr = np.zeros(100, np.int32)
    arr[53] = -4
    with pytest.raises(ArtifactFormatError, match="value -4 at position 53"):
        check_index_range("t", arr, 0, 1)


def test_check_index_range_needs_integers():
    with pytest.raises(TypeError):
        check_index_range("t", np.zeros(3), 0, 1)
    with pytest.raises(TypeError):
        check_index_range("t", [1, 2], 0, 3)


# --------------------------------------------------------------------------- limits, schema, spec


def test_read_limits_are_validated_and_frozen():
    with pytest.raises(ValueError, match="max_arrays"):
        ReadLimits(max_arrays=-1)
    with pytest.raises(ValueError):
        ReadLimits(max_values=1.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ReadLimits().max_arrays = 3
    assert ReadLimits().max_payload_bytes == 4 << 30


def test_spec_documents_every_read_limit():
    text = SPEC.read_text(encoding="utf-8")
    for field in dataclasses.fields(ReadLimits):
        assert f"`{field.name}`" in text, field.name
    assert "## 11. Artifact sections" in text


def _schema_validator():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema, jsonschema.Draft202012Validator(schema)


def _document_of(blob: bytes) -> object:
    return msgpack.unpackb(zstandard.ZstdDecompressor().decompress(blob[64:]), raw=False)


def test_schema_accepts_documents_the_writer_produces():
    schema, validator = _schema_validator()
    assert schema["$defs"]["array"]["properties"]["dtype"]["enum"] == list(ALLOWED_DTYPES)
    meta = {"a": [None, True, -(2**63), 2**64 - 1, 1.5, "s", b"raw", {"k": []}]}
    arrays = {dt.replace("<", "le").replace("|", "bo"): np.zeros((2, 1), dt) for dt in ALLOWED_DTYPES}
    validator.validate(_document_of(pack(meta, arrays)))
    validator.validate(_document_of(EXAMPLE))


@pytest.mark.parametrize(
    "document",
    [
        {"arrays": {}},
        _doc() | {"x": 1},
        _doc(arrays={"a": _entry() | {"dtype": ">i4"}}),
        _doc(arrays={"a": _entry() | {"shape": [-1]}}),
        _doc(arrays={"a": _entry() | {"data": "text"}}),
        _doc(arrays={"a": _entry() | {"extra": 1}}),
        _doc(arrays={"a b": _entry()}),
        {"arrays": {}, "meta": []},
    ],
)
def test_schema_rejects_bad_documents(document):
    _, validator = _schema_validator()
    assert not validator.is_valid(document)


def test_module_doctests():
    import doctest

    from gramc.formats import limits

    for module in (container, limits):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0
