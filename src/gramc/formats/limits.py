"""Resource limits for reading untrusted ``.gmask`` data.

A reader must never allocate without bound because a file says so. Every quantity a file
can inflate is capped by a field of :class:`ReadLimits`; each default carries the reason it
is big enough for real artifacts and small enough to stop hostile ones. The spec
(``docs/format/gmask-v1.md``, "Read limits") lists the same table.

Sizing reference: a packed allowed-token bitmask for a 250,000-token vocabulary is
``ceil(250000 / 32) * 4 = 31,252`` bytes per automaton state, so 4 GiB holds about 137,000
states' masks, far more than any grammar we have seen compiles to.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

GiB = 1 << 30
MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """Caps a reader enforces before it allocates; exceeding one is an ArtifactFormatError.

    >>> ReadLimits().max_payload_bytes == 4 * 1024**3
    True
    >>> ReadLimits(max_arrays=8).max_arrays
    8
    """

    #: Default 4 GiB + 32 MiB: the largest file that can hold a ``max_payload_bytes``
    #: payload (zstd's worst case grows incompressible data by about 1/256, 16 MiB here).
    max_file_bytes: int = 4 * GiB + 32 * MiB
    #: Default 4 GiB decompressed: ~137k states of 250k-token packed masks (see module doc).
    max_payload_bytes: int = 4 * GiB
    #: Default 65,536: an artifact has a few dozen named arrays; this bounds descriptor count.
    max_arrays: int = 65_536
    #: Default 2**32 per array: an unpacked bool[16k states, 250k tokens] table still fits.
    max_array_elements: int = 1 << 32
    #: Default 32 dimensions: numpy 1.x's own maximum; artifacts use at most 3.
    max_ndim: int = 32
    #: Default 32: metadata is configuration; deeper nesting only comes from hostile input.
    max_meta_depth: int = 32
    #: Default 1,048,576 entries per msgpack array or map: lists of special-token ids are the
    #: largest metadata lists expected; bulk data belongs in arrays.
    max_container_len: int = 1 << 20
    #: Default 4,194,304 msgpack values in the whole document: a 1-byte msgpack value can
    #: become a 30-100-byte Python object, so this caps the objects built before checks run.
    max_values: int = 1 << 22
    #: Default 64 MiB per msgpack str: metadata strings are names, options and versions.
    max_str_bytes: int = 64 * MiB
    #: Default 1,024: decompressed bytes per payload byte. Real artifacts compress 2-25 times
    #: (the golden set); a small file that inflates a thousandfold is a decompression bomb.
    max_compression_ratio: int = 1024
    #: Default 2**24 token ids: real vocabularies have up to a few hundred thousand; a larger
    #: declared size only serves to inflate the per-state rows a reader derives.
    max_vocab_size: int = 1 << 24
    #: Default 1 GiB: tables a reader derives from the file before use (a DFA's packed
    #: token rows: distinct rows x ceil(vocab size / 32) x 4 bytes), counted before
    #: allocating. 1 GiB holds ~34,000 distinct 250k-token rows (~170,000 for GPT-2): a
    #: serving process holds many artifacts, and real ones have a few thousand at most.
    max_derived_bytes: int = 1 * GiB

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value) is not int or value < 0:
                raise ValueError(f"ReadLimits.{f.name} must be a non-negative int, got {value!r}")


DEFAULT_READ_LIMITS = ReadLimits()
