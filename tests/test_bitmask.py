"""The sparse forms of packed mask rows (gramc.bitmask): rows written sparse (by token ids,
or by words) and expanded again are the rows they were, on both id expansion paths (few ids
scattered one by one, many ids through a byte per id), and the two forms convert exactly."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gramc.bitmask import (_SCATTER_IDS, SparseRows, expand_sparse_row, expand_word_row, n_words, sparse_rows, word_rows,
                           word_rows_of_ids)


def _random_rows(vocab_size: int, seed: int, densities: list[float]) -> np.ndarray:
    """Packed rows of the given densities (a density of 0 or 1: an empty or a full row)."""
    rng = np.random.default_rng(seed)
    padded = np.zeros((len(densities), n_words(vocab_size) * 32), dtype=np.uint8)
    for i, d in enumerate(densities):
        padded[i, :vocab_size] = rng.random(vocab_size) < d
    return np.packbits(padded, axis=1, bitorder="little").view(np.uint32).reshape(len(densities), n_words(vocab_size))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5000), st.integers(0, 2**32 - 1), st.lists(st.floats(0, 1), min_size=1, max_size=6),
       st.sampled_from([1, 2, 256]))
def test_sparse_rows_expand_to_the_rows(vocab_size, seed, densities, chunk):
    """Every row back from its sparse form, whether the rows are unpacked one, two or all
    at a time."""
    import gramc.bitmask

    gramc.bitmask._SPARSE_CHUNK, before = chunk, gramc.bitmask._SPARSE_CHUNK
    rows = _random_rows(vocab_size, seed, densities)
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


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5000), st.integers(0, 2**32 - 1),
       st.lists(st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0])), min_size=0, max_size=6),
       st.sampled_from([1, 2, 256]))
def test_word_rows_expand_to_the_rows_and_equal_the_ids_form_converted(vocab_size, seed, densities, chunk):
    """Every row back from its words, each listed word differing from the row's fill; and
    the ids form of the same rows converts to the very same arrays (so a layout-9 file's
    masks convert to what a writer of layout 10 writes)."""
    import gramc.bitmask

    rows = _random_rows(vocab_size, seed, densities)
    gramc.bitmask._SPARSE_CHUNK, before = chunk, gramc.bitmask._SPARSE_CHUNK
    try:
        indptr, word, value, complement = form = word_rows(rows, vocab_size)
        ids_form = sparse_rows(rows, vocab_size)
    finally:
        gramc.bitmask._SPARSE_CHUNK = before
    for mine, converted in zip(form, word_rows_of_ids(*ids_form, vocab_size)):
        assert mine.dtype == converted.dtype and np.array_equal(mine, converted)
    for i, row in enumerate(rows):
        a, b = indptr[i], indptr[i + 1]
        assert np.all(np.diff(word[a:b]) > 0)
        assert np.all(value[a:b] != (0xFFFFFFFF if complement[i] else 0))
        assert np.array_equal(expand_word_row(word[a:b].astype(np.intp), value[a:b], bool(complement[i]), vocab_size), row)
