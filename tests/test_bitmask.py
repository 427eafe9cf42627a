"""The sparse form of packed mask rows (gramc.bitmask): rows written sparse and expanded
again are the rows they were, on both expansion paths (few ids scattered one by one, many ids
through a byte per id)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gramc.bitmask import _SCATTER_IDS, SparseRows, expand_sparse_row, n_words, sparse_rows


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5000), st.integers(0, 2**32 - 1), st.lists(st.floats(0, 1), min_size=1, max_size=6),
       st.sampled_from([1, 2, 256]))
def test_sparse_rows_expand_to_the_rows(vocab_size, seed, densities, chunk):
    """Every row back from its sparse form, whether the rows are unpacked one, two or all
    at a time."""
    import gramc.bitmask

    gramc.bitmask._SPARSE_CHUNK, before = chunk, gramc.bitmask._SPARSE_CHUNK
    rng = np.random.default_rng(seed)
    bits = np.array([rng.random(vocab_size) < d for d in densities])
    padded = np.zeros((len(bits), n_words(vocab_size) * 32), dtype=np.uint8)
    padded[:, :vocab_size] = bits
    rows = np.packbits(padded, axis=1, bitorder="little").view(np.uint32)
    try:
        indptr, ids, complement = sparse_rows(rows, vocab_size)
    finally:
        gramc.bitmask._SPARSE_CHUNK = before
    sparse = SparseRows(indptr, ids, complement, vocab_size)
    for i, row in enumerate(rows):
        assert np.array_equal(sparse[i], row)
        assert np.array_equal(expand_sparse_row(ids[indptr[i]:indptr[i + 1]], bool(complement[i]), vocab_size), row)


def test_both_expansion_paths_are_exercised():
    vocab_size = 4 * _SCATTER_IDS + 7
    for n_ids in (_SCATTER_IDS - 1, _SCATTER_IDS + 1, 2 * _SCATTER_IDS):
        ids = np.arange(0, vocab_size, vocab_size // n_ids, dtype=np.int32)[:n_ids]
        for complement in (False, True):
            words = expand_sparse_row(ids, complement, vocab_size)
            allowed = np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)
            expected = np.isin(np.arange(vocab_size), ids) ^ complement
            assert np.array_equal(allowed, expected)
            assert not np.unpackbits(words.view(np.uint8), bitorder="little")[vocab_size:].any()
