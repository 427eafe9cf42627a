"""The sparse form of packed mask rows (gramc.bitmask): rows written by their words and
expanded again are the rows they were, each listed word differing from its row's fill; and
rows by token ids (as artifact layouts 5 to 9 stored them) convert to the very same arrays."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gramc.bitmask import WordRows, expand_word_row, n_words, word_rows, word_rows_of_ids


def _random_rows(vocab_size: int, seed: int, densities: list[float]) -> np.ndarray:
    """Packed rows of the given densities (a density of 0 or 1: an empty or a full row)."""
    rng = np.random.default_rng(seed)
    padded = np.zeros((len(densities), n_words(vocab_size) * 32), dtype=np.uint8)
    for i, d in enumerate(densities):
        padded[i, :vocab_size] = rng.random(vocab_size) < d
    return np.packbits(padded, axis=1, bitorder="little").view(np.uint32).reshape(len(densities), n_words(vocab_size))


def _by_ids(rows: np.ndarray, vocab_size: int):
    """The rows as layouts 5 to 9 stored them: each row's set ids or, where more than half
    are set, the ids it leaves out (written here from the bits, independently of gramc)."""
    bits = np.zeros((len(rows), vocab_size), dtype=bool)
    for i, row in enumerate(rows):
        bits[i] = [(int(row[t // 32]) >> (t % 32)) & 1 for t in range(vocab_size)]
    complement = bits.sum(axis=1) > vocab_size // 2
    lists = [np.flatnonzero(b ^ c) for b, c in zip(bits, complement)]
    indptr = np.concatenate([[0], np.cumsum([len(x) for x in lists])]).astype(np.int64)
    ids = np.concatenate(lists).astype(np.int32) if lists else np.zeros(0, np.int32)
    return indptr, ids, complement


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.integers(0, 2**32 - 1),
       st.lists(st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0])), min_size=0, max_size=6),
       st.sampled_from([1, 2, 256]))
def test_word_rows_expand_to_the_rows_and_equal_the_ids_form_converted(vocab_size, seed, densities, chunk):
    """Every row back from its words (one at a time and as a WordRows table), whether the
    rows are compared one, two or all at a time; and the ids form of the same rows converts
    to the very same arrays (so a layout-9 file's rows convert to what a writer of layout
    10 writes)."""
    import gramc.bitmask

    rows = _random_rows(vocab_size, seed, densities)
    gramc.bitmask._WORD_CHUNK, before = chunk, gramc.bitmask._WORD_CHUNK
    try:
        indptr, word, value, complement = form = word_rows(rows, vocab_size)
    finally:
        gramc.bitmask._WORD_CHUNK = before
    for mine, converted in zip(form, word_rows_of_ids(*_by_ids(rows, vocab_size), vocab_size)):
        assert mine.dtype == converted.dtype and np.array_equal(mine, converted)
    table = WordRows(*form, vocab_size)
    assert np.array_equal(table[np.arange(len(rows))], rows)
    for i, row in enumerate(rows):
        a, b = indptr[i], indptr[i + 1]
        assert np.all(np.diff(word[a:b]) > 0)
        assert np.all(value[a:b] != (0xFFFFFFFF if complement[i] else 0))
        assert np.array_equal(expand_word_row(word[a:b].astype(np.intp), value[a:b], bool(complement[i]), vocab_size), row)
        assert table[i] is table[i] and not table[i].flags.writeable  # expanded once, read-only
