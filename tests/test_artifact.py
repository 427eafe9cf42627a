"""Artifacts: round trips, determinism, vocabulary checks, hostile contents, the cache."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gramc
from gramc.errors import ArtifactFormatError, ArtifactVersionError, VocabularyError
from gramc.formats import container
from gramc.formats.limits import ReadLimits

VOCAB = gramc.Vocab.from_list(
    [b"1", b"2", b"12", b"-", b"a", b"1-", b"<eos>"], special_ids=[6], eos_ids=[6], name="tiny"
)
PATTERN = r"[12]+(-[12]+)*"


@pytest.fixture(scope="module")
def art():
    return gramc.compile(PATTERN, vocab=VOCAB)


def test_round_trip_gives_identical_behaviour(art, tmp_path):
    path = tmp_path / "x.gmask"
    art.save(path)
    back = gramc.load(path, vocab=VOCAB)
    assert back.to_bytes() == art.to_bytes() == path.read_bytes()
    a, b = art.matcher(), back.matcher()
    for t in [2, 3, 0, 6]:
        assert np.array_equal(a.mask(), b.mask())
        assert a.commit_token(t) == b.commit_token(t)


def test_load_given_a_files_contents_points_to_from_bytes(art, tmp_path):
    data = art.to_bytes()
    for wrong in (data, bytearray(data), memoryview(data)):
        with pytest.raises(TypeError, match="from_bytes"):
            gramc.load(wrong)
    path = tmp_path / "a.gmask"
    path.write_bytes(data)
    assert gramc.load(os.fsencode(path)).to_bytes() == data  # a path as bytes is still a path


def test_same_source_same_bytes_across_processes(art):
    code = (
        "import gramc,sys;v=gramc.Vocab.from_list([b'1',b'2',b'12',b'-',b'a',b'1-',b'<eos>'],"
        "special_ids=[6],eos_ids=[6],name='tiny');"
        f"sys.stdout.buffer.write(gramc.compile({PATTERN!r},vocab=v).to_bytes())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout
    assert out == art.to_bytes()


def test_vocabulary_mismatch_is_refused(art):
    other = gramc.Vocab.from_list([b"1", b"2", b"12", b"-", b"b", b"1-", b"<eos>"], special_ids=[6], eos_ids=[6])
    with pytest.raises(VocabularyError, match="vocabulary mismatch"):
        gramc.from_bytes(art.to_bytes(), vocab=other)


def test_unbound_artifact_binds_at_load():
    unbound = gramc.compile(PATTERN)
    assert not unbound.is_bound
    back = gramc.from_bytes(unbound.to_bytes(), vocab=VOCAB)
    assert back.to_bytes() == gramc.compile(PATTERN, vocab=VOCAB).to_bytes()


def _tamper(art, **changes):
    meta, arrays = art.to_arrays()
    arrays = {k: np.array(v) for k, v in arrays.items()}
    for fn in changes.values():
        fn(meta, arrays)
    return container.pack(meta, arrays)


def _set(name, index, value):
    def fn(meta, arrays):
        arrays[name].reshape(-1)[index] = value
    return fn


@pytest.mark.parametrize(
    "change, message",
    [
        (_set("dfa.delta", 5, 999), "dfa.delta"),
        (_set("dfa.delta", 0, 1), "dead state"),
        (_set("dfa.byte_class", 49, 77), "dfa.byte_class"),
        (_set("tokens.ids", 0, 10**6), "tokens.ids"),
        (_set("tokens.next", 0, 0), "tokens.next"),
        (_set("tokens.forced", 1, 3), "tokens.forced"),
        (_set("tokens.indptr", 1, 10**6), "tokens.indptr"),
        (lambda m, a: a.__setitem__("tokens.ids", a["tokens.ids"][::-1].copy()), "ascending"),
        (lambda m, a: a.__setitem__("dfa.accept", np.zeros(len(a["dfa.accept"]), bool)), "cannot reach"),
        (lambda m, a: a.__setitem__("dfa.delta", a["dfa.delta"].astype(np.int64)), "int32"),
        (lambda m, a: a.pop("tokens.next"), "missing array"),
        (lambda m, a: a.__setitem__("extra", np.zeros(1, np.int32)), "unexpected arrays"),
        (lambda m, a: m["dfa"].__setitem__("start", 10**5), "start"),
        (lambda m, a: m.__setitem__("kind", "pda2"), "unknown artifact kind"),
        (lambda m, a: m["vocab"].__setitem__("eos_ids", [10**6]), "eos_ids"),
        # a declared size that only inflates what the reader derives (it passed 6 GB)
        (lambda m, a: m["vocab"].__setitem__("size", 2**31 - 1), "max_vocab_size=16777216"),
    ],
)
def test_hostile_contents_are_rejected_with_a_clear_message(art, change, message):
    data = _tamper(art, x=change)
    with pytest.raises(ArtifactFormatError, match=message):
        gramc.from_bytes(data)


def test_derived_tables_are_counted_against_the_limit_before_allocating():
    art = gramc.compile("[12]{6}-", vocab=VOCAB)  # the states before the last two digits share a row
    data = art.to_bytes()
    rows = art.token_table.csr()
    accept = art.dfa.accept
    distinct = {(tuple(rows[1][rows[0][q]:rows[0][q + 1]]), bool(accept[q])) for q in range(art.dfa.n_states)}
    assert len(distinct) < art.dfa.n_states  # states sharing a row make the test say something
    need = len(distinct) * ((VOCAB.size + 31) // 32) * 4
    with pytest.raises(ArtifactFormatError, match=f"{len(distinct)} distinct token rows of {VOCAB.size}-token rows need {need} bytes"):
        gramc.from_bytes(data, limits=ReadLimits(max_derived_bytes=need - 1))
    assert gramc.from_bytes(data, limits=ReadLimits(max_derived_bytes=need)).to_bytes() == data


def test_newer_artifact_layout_is_a_version_error(art):
    from gramc.runtime.reader import SUPPORTED_ARTIFACT_VERSIONS

    newer = max(SUPPORTED_ARTIFACT_VERSIONS) + 1
    data = _tamper(art, x=lambda m, a: m.__setitem__("artifact_version", newer))
    with pytest.raises(ArtifactVersionError):
        gramc.from_bytes(data)


def test_layout_5_is_only_for_artifacts_that_read_token_bytes(art):
    with pytest.raises(ArtifactFormatError, match="layout 5 has no 'dfa' kind without a uniqueItems plan"):
        gramc.from_bytes(_tamper(art, x=lambda m, a: m.__setitem__("artifact_version", 5)))


@pytest.mark.parametrize("layout", [3, 8, 9, 10])
def test_layouts_3_and_8_to_10_are_only_for_pda_artifacts(art, layout):
    with pytest.raises(ArtifactFormatError, match=f"layout {layout} has no 'dfa' kind"):
        gramc.from_bytes(_tamper(art, x=lambda m, a: m.__setitem__("artifact_version", layout)))


def _as_layout_9(meta, arrays):
    """A bound PDA artifact's arrays as layout 9 wrote them: node rows and configuration
    masks by their token ids."""
    from hostile_cases import rows_by_ids

    for section in ("nodes", "configs"):
        form = [arrays.pop(f"{section}.row_{k}") for k in ("indptr", "word", "value", "complement")]
        arrays[f"{section}.row_indptr"], arrays[f"{section}.row_ids"], arrays[f"{section}.row_complement"] = \
            rows_by_ids(*form, meta["vocab"]["size"])
    meta["artifact_version"] = 9


def _as_layout_8(meta, arrays):
    """A bound PDA artifact's arrays as layout 8 wrote them: no stored configuration masks."""
    _as_layout_9(meta, arrays)
    for name in [n for n in arrays if n.startswith("configs.")]:
        del arrays[name]
    del meta["pda"]["config_depth"]
    meta["artifact_version"] = 8


def _as_layout_5(meta, arrays):
    """A bound PDA artifact's arrays as layouts 5-7 wrote them: a call column per rule."""
    from hostile_cases import dense_calls

    _as_layout_8(meta, arrays)
    calls = [arrays.pop(f"pda.call_{k}") for k in ("indptr", "rule", "return")]
    arrays["pda.delta"] = dense_calls(arrays["pda.delta"], *calls, len(arrays["pda.rule_start"]))
    meta["artifact_version"] = 5


def _as_layout_3(meta, arrays):
    """A bound PDA artifact's arrays as layout 3 wrote them: the distinct node rows packed,
    the vocabulary's token bytes, a call column per rule."""
    from hostile_cases import packed_rows_of_ids

    from gramc.runtime.vocab_bytes import vocab_arrays

    _as_layout_5(meta, arrays)

    arrays["nodes.rows"] = packed_rows_of_ids(arrays.pop("nodes.row_indptr"), arrays.pop("nodes.row_ids"),
                                              arrays.pop("nodes.row_complement"), meta["vocab"]["size"])
    del arrays["pda.finish_rank"]
    arrays.update({k: np.array(v) for k, v in vocab_arrays(PDA_VOCAB).items()})
    meta["artifact_version"] = 3


def _as_layout_1(meta, arrays):
    """A PDA artifact's arrays as layout 1 wrote them: one accepted row per node."""
    _as_layout_3(meta, arrays)
    meta["artifact_version"] = 1
    arrays["nodes.accepted"] = arrays.pop("nodes.rows")[arrays.pop("nodes.row_of")]


@pytest.mark.parametrize("old_layout", [_as_layout_1, _as_layout_3, _as_layout_5, _as_layout_8, _as_layout_9])
def test_older_pda_layouts_are_still_read(pda_art, old_layout):
    """Files written before node rows were stored once each (layout 1), before the
    vocabulary was bound by fingerprint only (layout 3), before calls were sparse (layouts
    1-7), before configuration masks were stored (layouts 1-8) or stored by their words
    (layout 9) read to the same artifact (written again as layout 10), with or without the
    decoder's vocabulary (the token bytes of layouts 1 and 3 are checked against the
    fingerprint); layout 10 stores fewer rows than nodes (most nodes share theirs)."""
    meta, arrays = pda_art.to_arrays()
    assert meta["artifact_version"] == 10 and len(arrays["nodes.row_complement"]) < len(arrays["nodes.row_of"])
    assert len(arrays["configs.digest"]) > 1 and meta["pda"]["config_depth"] == 6
    assert len(arrays["pda.call_rule"]) and arrays["pda.delta"].shape[1] == pda_art.pda.n_byte_classes + len(pda_art.pda.token_ids)
    assert not any(name.startswith("vocab.") for name in arrays)
    assert len(arrays["configs.row_word"]) and arrays["configs.row_complement"].any()
    for vocab in (PDA_VOCAB,) if old_layout in (_as_layout_5, _as_layout_8, _as_layout_9) else (PDA_VOCAB, None):
        old = gramc.from_bytes(_tamper(pda_art, x=old_layout), vocab=vocab)
        assert old.to_bytes() == pda_art.to_bytes()
        a, b = old.matcher(), pda_art.matcher()
        for piece in [b"(", b"(", b"()", b")", b")"]:
            assert np.array_equal(a.mask(), b.mask()), piece
            assert a.commit_bytes(piece) and b.commit_bytes(piece)


def test_layout_1_node_rows_in_a_layout_3_file_are_refused(pda_art):
    def both(meta, arrays):
        _as_layout_1(meta, arrays)
        meta["artifact_version"] = 3
    with pytest.raises(ArtifactFormatError, match="nodes.accepted"):
        gramc.from_bytes(_tamper(pda_art, x=both))


def test_a_pda_artifact_awaits_a_vocabulary_it_does_not_know(pda_art):
    """Layout 5 binds the vocabulary by fingerprint only: loaded without it (and with no
    vocabulary of that fingerprint known in the process), the artifact describes itself but
    refuses to match, naming what to pass; bound to it, it serves the same masks; bound to
    another vocabulary, it is refused."""
    data = pda_art.to_bytes()
    waiting = gramc.from_bytes(data)
    assert waiting.awaits_vocab and not waiting.is_bound and waiting.vocab.name == "p"
    assert waiting.describe()["kind"] == "pda"
    with pytest.raises(VocabularyError, match=r"binds the vocabulary 'p' .* by fingerprint.*vocab=\.\.\."):
        waiting.matcher()
    with pytest.raises(VocabularyError, match="vocabulary mismatch"):
        waiting.bind(VOCAB)
    with pytest.raises(VocabularyError, match="vocabulary mismatch"):
        gramc.from_bytes(data, vocab=VOCAB)
    bound = waiting.bind(PDA_VOCAB)
    assert bound.is_bound and not bound.awaits_vocab and bound.to_bytes() == data
    a, b = bound.matcher(), pda_art.matcher()
    for piece in [b"(", b"()", b")"]:
        assert np.array_equal(a.mask(), b.mask()) and a.commit_bytes(piece) and b.commit_bytes(piece)


def test_a_bundled_vocabulary_is_found_by_name_and_fingerprint():
    """An artifact bound to a bundled vocabulary loads ready to match without ``vocab=``; a
    header that names it with another fingerprint awaits its vocabulary instead."""
    gpt2 = gramc.load_vocab("gpt2")
    art = gramc.compile(PARENS, format="gbnf", vocab=gpt2)
    back = gramc.from_bytes(art.to_bytes())
    assert back.is_bound and back.token_table.vocab is gpt2
    assert np.array_equal(back.matcher().mask(), art.matcher().mask())
    other = _tamper(art, x=lambda m, a: m["vocab"].__setitem__("fingerprint", "0" * 64))
    assert gramc.from_bytes(other).awaits_vocab


def test_verify_detects_rows_that_disagree_with_the_vocabulary(art):
    # Structurally valid, semantically wrong: drop an allowed token from the start row.
    def drop(meta, arrays):
        ind = arrays["tokens.indptr"]
        start = meta["dfa"]["start"]
        lo = ind[start]
        arrays["tokens.ids"] = np.delete(arrays["tokens.ids"], lo)
        arrays["tokens.next"] = np.delete(arrays["tokens.next"], lo)
        arrays["tokens.indptr"] = np.where(np.arange(len(ind)) > start, ind - 1, ind)
        arrays["tokens.forced"] = np.full_like(arrays["tokens.forced"], -1)

    data = _tamper(art, x=drop)
    gramc.from_bytes(data)  # passes the structural checks
    with pytest.raises(ArtifactFormatError, match="does not match the vocabulary"):
        gramc.from_bytes(data, vocab=VOCAB, verify=True)


def test_cache_dir_reuses_artifacts(tmp_path):
    a = gramc.compile(PATTERN, vocab=VOCAB, cache_dir=tmp_path)
    files = list(tmp_path.rglob("*.gmask"))
    assert len(files) == 1
    b = gramc.compile(PATTERN, vocab=VOCAB, cache_dir=tmp_path)
    assert a.to_bytes() == b.to_bytes() == files[0].read_bytes()
    gramc.compile(PATTERN + "x", vocab=VOCAB, cache_dir=tmp_path)
    assert len(list(tmp_path.rglob("*.gmask"))) == 2


def test_spec_documents_every_artifact_array_and_key(art):
    from pathlib import Path

    spec = (Path(__file__).resolve().parents[1] / "docs" / "format" / "gmask-v1.md").read_text()
    meta, arrays = art.to_arrays()
    for name in arrays:
        assert f"`{name}`" in spec, name
    for key in meta:
        assert f"`{key}`" in spec, key


# ---------------------------------------------------------------- PDA artifacts

PARENS = 'root ::= "" | "(" root ")" root'
# ``))`` closes the current group and the caller's: only the stack can tell (an uncertain token).
PDA_VOCAB = gramc.Vocab.from_list([b"(", b")", b"()", b"x", b"<eos>", b"))"], special_ids=[4], eos_ids=[4],
                                  name="p")


@pytest.fixture(scope="module")
def pda_art():
    return gramc.compile(PARENS, format="gbnf", vocab=PDA_VOCAB)


def test_pda_round_trip_and_spec_coverage(pda_art):
    from pathlib import Path

    data = pda_art.to_bytes()
    back = gramc.from_bytes(data, vocab=PDA_VOCAB, verify=True)
    assert back.kind == "pda" and back.to_bytes() == data
    spec = (Path(__file__).resolve().parents[1] / "docs" / "format" / "gmask-v1.md").read_text()
    meta, arrays = pda_art.to_arrays()
    for name in list(arrays) + list(meta["pda"]):
        assert f"`{name}`" in spec, name


def _in_layout_3(change):
    def fn(meta, arrays):
        _as_layout_3(meta, arrays)
        change(meta, arrays)
    return fn


def _a_row_word_twice(section):
    """The first row of ``section`` that lists a word lists it twice."""
    def change(meta, arrays):
        word, value, indptr = (arrays[f"{section}.row_{k}"] for k in ("word", "value", "indptr"))
        r = int(np.flatnonzero(np.diff(indptr))[0])
        at = int(indptr[r])
        arrays[f"{section}.row_word"] = np.insert(word, at, word[at])
        arrays[f"{section}.row_value"] = np.insert(value, at, value[at])
        arrays[f"{section}.row_indptr"] = indptr + (np.arange(len(indptr)) > r)
    return change


def _empty_complement_rows(section):
    """Every row of ``section`` a complement, all but the last listing no word (so their
    fill sets the bits past the vocabulary size)."""
    def change(meta, arrays):
        n = len(arrays[f"{section}.row_complement"])
        arrays[f"{section}.row_complement"] = np.ones(n, bool)
        for k in ("word", "value"):
            arrays[f"{section}.row_{k}"] = arrays[f"{section}.row_{k}"][:1]
        arrays[f"{section}.row_indptr"] = np.array([0] * n + [1], np.int64)
    return change


def _in_layout_9(change):
    def both(meta, arrays):
        _as_layout_9(meta, arrays)
        change(meta, arrays)
    return both



@pytest.mark.parametrize(
    "change, message",
    [
        (_in_layout_3(_set("vocab.bytes", 0, ord("["))), "fingerprint"),
        (_set("pda.delta", 5, 10**4), "pda.delta"),
        (_set("pda.node_rule", 1, 7), "pda.node_rule"),
        (lambda m, a: a.__setitem__("pda.accept", np.zeros_like(a["pda.accept"])), "cannot finish"),
        (_set("nodes.unc_ids", 0, 10**6) , "nodes.unc_ids"),
        (lambda m, a: a.__setitem__("nodes.row_of", a["nodes.row_of"][:1].copy()), "nodes.row_of"),
        (_set("nodes.row_of", 0, 10**4), "nodes.row_of"),
        (_in_layout_3(lambda m, a: a.__setitem__("vocab.lengths", a["vocab.lengths"][:-1].copy())), "vocab.lengths"),
        (lambda m, a: m["pda"].__setitem__("rule_names", []), "rule_names"),
        # a padding bit would allow an id past the vocabulary
        (_in_layout_3(lambda m, a: a["nodes.rows"].__setitem__((0, -1), 1 << 31)), "padding bits"),
        # layout 5's sparse rows: ids in range, ascending, pointers that fit
        (_in_layout_9(_set("nodes.row_ids", 0, len(PDA_VOCAB.tokens))), "nodes.row_ids"),
        (_in_layout_9(lambda m, a: a.__setitem__("nodes.row_ids", a["nodes.row_ids"][::-1].copy())), "ascending"),
        (_set("nodes.row_word", 0, 1), "nodes.row_word"),
        (_set("nodes.row_value", 0, 0xFFFFFFFF), "nodes.row_value sets bits past the vocabulary size"),
        (_a_row_word_twice("nodes"), "nodes.row_word must be strictly ascending"),
        (_empty_complement_rows("nodes"), "must list its last word"),
        (lambda m, a: a.__setitem__("nodes.row_indptr", a["nodes.row_indptr"][:-1].copy()), "nodes.row_indptr"),
        (_set("nodes.row_indptr", -1, 10**4), "nodes.row_indptr"),
        (lambda m, a: a.__setitem__("vocab.bytes", np.zeros(3, np.uint8)), "unexpected arrays"),
        (lambda m, a: m.__setitem__("vocab", None), r"unexpected arrays \['configs\."),  # unbound: no stored masks
        (lambda m, a: (_as_layout_5(m, a), m.__setitem__("vocab", None)), "layout of a bound artifact"),
        # layout 8's sparse calls: rules in range and ascending per node, returns live, pointers that fit
        (_set("pda.call_rule", 0, 99), "pda.call_rule"),
        (_set("pda.call_return", 0, 0), "pda.call_return"),
        (_set("pda.call_indptr", -1, 10**4), "pda.call_indptr"),
        (lambda m, a: a.__setitem__("pda.call_return", a["pda.call_return"][:-1].copy()), "differ in length|call_indptr"),
        (lambda m, a: a.pop("pda.call_rule"), "pda.call_rule"),
        # a proof that does not show how every node finishes, or has the wrong shape
        (lambda m, a: a.__setitem__("pda.finish_rank", np.zeros_like(a["pda.finish_rank"])), "finish_rank shows no way"),
        (lambda m, a: a.__setitem__("pda.finish_rank", a["pda.finish_rank"][:-1].copy()), "pda.finish_rank"),
        (lambda m, a: a.pop("pda.finish_rank"), "pda.finish_rank"),
        # stored configuration masks: digests in order, pointers and rows that fit, no bit past V
        (lambda m, a: a.__setitem__("configs.digest", a["configs.digest"][::-1].copy()), "configs.digest must be ascending"),
        (lambda m, a: a.__setitem__("configs.row", a["configs.row"][:-1].copy()), "configs.row must have one entry"),
        (_set("configs.row", 0, 10**4), "configs.row"),
        (_set("configs.enc_indptr", -1, 10**6), "configs.enc_indptr"),
        (_set("configs.row_word", 0, 1), "configs.row_word"),
        (_set("configs.row_value", 0, 0xFFFFFFFF), "configs.row_value sets bits past the vocabulary size"),
        (lambda m, a: a.__setitem__("configs.row_value", a["configs.row_value"][:-1].copy()), "configs.row_value must"),
        (_a_row_word_twice("configs"), "configs.row_word must be strictly ascending"),
        (_empty_complement_rows("configs"), "must list its last word"),
        (_in_layout_9(_set("configs.row_ids", 0, len(PDA_VOCAB.tokens))), "configs.row_ids"),
        (lambda m, a: a.__setitem__("configs.row_indptr", a["configs.row_indptr"][:-1].copy()), "configs.row_indptr"),
        (lambda m, a: m["pda"].pop("config_depth"), "config_depth"),
        (lambda m, a: m["pda"].__setitem__("config_depth", -1), "config_depth"),
        (lambda m, a: a.pop("configs.enc"), "configs.enc"),
        (lambda m, a: m.__setitem__("artifact_version", 8), r"unexpected arrays \['configs\."),
    ],
)
def test_hostile_pda_contents_are_rejected(pda_art, change, message):
    meta, arrays = pda_art.to_arrays()
    assert len(arrays["nodes.unc_ids"]), "the fixture must have uncertain tokens to corrupt"
    with pytest.raises(ArtifactFormatError, match=message):
        gramc.from_bytes(_tamper(pda_art, x=change), vocab=PDA_VOCAB)


def test_a_header_that_disagrees_with_its_fingerprint_vocabulary_is_refused(pda_art):
    """The rows are checked against the header's size and EOS ids: a vocabulary of the
    recorded fingerprint must have the same, or the file is refused."""
    for key, value in (("eos_ids", [0]), ("size", len(PDA_VOCAB.tokens) + 32)):
        data = _tamper(pda_art, x=lambda m, a: m["vocab"].__setitem__(key, value))
        with pytest.raises(ArtifactFormatError, match="the vocabulary with its fingerprint"):
            gramc.from_bytes(data, vocab=PDA_VOCAB)


# ---------------------------------------------------------------- the Artifact interface


def test_every_artifact_kind_is_a_gramc_artifact(art, pda_art):
    """compile, load and bind give instances of gramc.Artifact whatever the kind, bound or
    not, and each kind is the class its ``kind`` names."""
    from gramc.runtime.dfa_artifact import DFAArtifact
    from gramc.runtime.pda_artifact import PDAArtifact

    from gramc.runtime.counted import CountedArtifact

    kinds = {"dfa": DFAArtifact, "pda": PDAArtifact, "counted": CountedArtifact}
    counted = gramc.compile("(ab){1,3000}", vocab=VOCAB)
    assert counted.kind == "counted" and isinstance(counted, gramc.Artifact)
    assert type(gramc.from_bytes(counted.to_bytes())) is CountedArtifact
    unbound = [gramc.compile(PATTERN), gramc.compile(PARENS, format="gbnf")]
    made = [art, pda_art, *unbound, *(u.bind(VOCAB if u.kind == "dfa" else PDA_VOCAB) for u in unbound),
            gramc.from_bytes(art.to_bytes()), gramc.from_bytes(pda_art.to_bytes()),
            *(gramc.from_bytes(u.to_bytes()) for u in unbound)]
    assert [a.kind for a in made].count("pda") == len(made) // 2
    for a in made:
        assert isinstance(a, gramc.Artifact) and type(a) is kinds[a.kind], a


def test_artifact_kinds_share_one_interface():
    """gramc.Artifact is abstract; every kind implements all of it and adds no public method
    of its own (its only extra public names are its dataclass fields: the automaton)."""
    import dataclasses

    from gramc.runtime.counted import CountedArtifact
    from gramc.runtime.dfa_artifact import DFAArtifact
    from gramc.runtime.pda_artifact import PDAArtifact

    with pytest.raises(TypeError, match="abstract"):
        gramc.Artifact()
    assert {"bound", "to_arrays", "describe", "_matcher_class"} <= gramc.Artifact.__abstractmethods__

    def public(cls):
        return {n for n in dir(cls) if not n.startswith("_")}

    for kind in (DFAArtifact, CountedArtifact, PDAArtifact):
        assert issubclass(kind, gramc.Artifact) and not kind.__abstractmethods__, kind
        fields = {f.name for f in dataclasses.fields(kind)}
        assert public(kind) - fields - {"kind"} == public(gramc.Artifact), kind


def _productive_by_fixed_point(delta, accept, node_rule, rule_start, call_base):
    """The productivity check as first written (a fixed point per rule): the oracle."""
    rule_ok = np.zeros(len(rule_start), dtype=bool)
    while True:
        cols_ok = np.concatenate([np.ones(call_base, dtype=bool), rule_ok])
        reach = accept.copy()
        while True:
            grown = reach | ((delta != 0) & reach[delta] & cols_ok).any(axis=1)
            if np.array_equal(grown, reach):
                break
            reach = grown
        if np.array_equal(reach[rule_start], rule_ok):
            return reach
        rule_ok = reach[rule_start]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_linear_productivity_check_agrees_with_the_fixed_point(data):
    """Random rule tables: the propagation refuses exactly the tables with a node that the
    fixed point finds cannot finish its rule."""
    from gramc.runtime.pda_finish import Edges, finish_ranks, unfinished, unjustified

    n_rules = data.draw(st.integers(1, 4))
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=n_rules, max_size=n_rules))
    node_rule = np.array([-1] + [r for r, k in enumerate(sizes) for _ in range(k)], dtype=np.int32)
    rule_start = np.array([1 + sum(sizes[:r]) for r in range(n_rules)], dtype=np.int32)
    n, call_base = len(node_rule), 2
    delta = np.zeros((n, call_base + n_rules), dtype=np.int32)
    for q in range(1, n):
        same = np.flatnonzero(node_rule == node_rule[q])
        for c in range(delta.shape[1]):
            if data.draw(st.integers(0, 3)) == 0:
                delta[q, c] = data.draw(st.sampled_from(same.tolist()))
    accept = np.array([False] + data.draw(st.lists(st.booleans(), min_size=n - 1, max_size=n - 1)))
    expected = _productive_by_fixed_point(delta, accept, node_rule, rule_start, call_base)[1:].all()
    edges = Edges(_table(delta, call_base, accept, node_rule, rule_start))
    ranks = finish_ranks(edges, accept, node_rule, rule_start)
    assert (unfinished(ranks) is None) == expected
    if expected:  # the ranks found are a proof the check accepts
        assert unjustified(edges, accept, rule_start, ranks) is None
    # Any ranks the check accepts prove that every node finishes (it is sound, whoever wrote them).
    forged = np.array(data.draw(st.lists(st.integers(-3, 12), min_size=n, max_size=n)), dtype=np.int32)
    if unjustified(edges, accept, rule_start, forged) is None:
        assert expected


def test_a_long_chain_of_rules_loads():
    """2,000 rules, each calling the next: a re-signed artifact of that shape took 82 s to
    load (a fixed point per rule); now each edge is looked at twice, and the ranks found
    check in one pass."""
    from gramc.runtime.pda_finish import Edges, finish_ranks, unfinished, unjustified

    def _check_productive(delta, accept, node_rule, rule_start, call_base):
        edges = Edges(_table(delta, call_base, accept, node_rule, rule_start))
        ranks = finish_ranks(edges, accept, node_rule, rule_start)
        if unfinished(ranks) is not None:
            raise ArtifactFormatError("pda: a node cannot finish its rule")
        assert unjustified(edges, accept, rule_start, ranks) is None

    k = 2_000
    node_rule = np.array([-1] + [r for r in range(k) for _ in range(2)], dtype=np.int32)
    rule_start = np.arange(1, 2 * k, 2, dtype=np.int32)
    delta = np.zeros((2 * k + 1, 1 + k), dtype=np.int32)
    for r in range(k - 1):
        delta[rule_start[r], 1 + r + 1] = rule_start[r] + 1  # call rule r+1, then the end node
    delta[rule_start[-1], 0] = rule_start[-1] + 1  # the last rule reads one byte
    accept = np.zeros(2 * k + 1, dtype=bool)
    accept[rule_start + 1] = True
    _check_productive(delta, accept, node_rule, rule_start, 1)
    accept[-1] = False  # the last rule can no longer finish, so no rule can
    with pytest.raises(ArtifactFormatError, match="cannot finish its rule"):
        _check_productive(delta, accept, node_rule, rule_start, 1)


@pytest.mark.parametrize("trap", [False, True])
def test_a_long_chain_of_dfa_states_is_checked_state_by_state_once(trap):
    """The co-reachability check of a chain of 2**17 states: it took a numpy round per state
    (2**19 states: 47 s); narrow frontiers are now followed one state at a time."""
    from gramc.runtime.dfa_reader import check_coreachable

    n = 1 << 17
    delta = np.zeros((n, 2), dtype=np.int32)
    delta[1:-1, 1] = np.arange(2, n, dtype=np.int32)
    accept = np.zeros(n, dtype=bool)
    accept[-2 if trap else -1] = True  # with a trap, the last state cannot reach acceptance
    if trap:
        with pytest.raises(ArtifactFormatError, match=f"state {n - 1} cannot reach an accepting state"):
            check_coreachable(delta, accept)
    else:
        check_coreachable(delta, accept)
        delta[n // 2, 1] = 0  # cut the chain: the first half can no longer finish
        with pytest.raises(ArtifactFormatError, match="state 1 cannot reach an accepting state"):
            check_coreachable(delta, accept)



def _table(delta, n_reads, accept, node_rule, rule_start):
    """A PDA table from a dense one with a call column per rule after ``n_reads`` columns."""
    from gramc.automata.pda_table import PDATable
    from gramc.runtime.pda_reader import _split_calls

    reads, calls = _split_calls(delta, n_reads)
    return PDATable(delta=reads, byte_class=np.zeros(256, np.uint8), token_ids=np.zeros(0, np.int32),
                    accept=accept, node_rule=node_rule, rule_start=rule_start, start_rule=0,
                    rule_names=tuple(f"r{r}" for r in range(len(rule_start))), **calls)


@pytest.mark.parametrize("seed", range(40))
def test_the_productivity_check_agrees_with_a_fixed_point_on_wide_tables(seed):
    """As above, on tables of up to 400 nodes, whose frontiers are wide enough for the
    check's numpy rounds before it goes on in Python; the ranks found are a proof the
    edge-by-edge check accepts."""
    from gramc.runtime.pda_finish import Edges, finish_ranks, unfinished, unjustified

    rng = np.random.default_rng(seed)
    n_rules = int(rng.integers(1, 6))
    n_nodes = int(rng.integers(n_rules + 1, 400))
    n_bytes = 3
    node_rule = np.concatenate([[-1], np.sort(rng.integers(0, n_rules, n_nodes - 1))]).astype(np.int32)
    node_rule[1 : n_rules + 1] = np.arange(n_rules)  # every rule has a node
    node_rule[1:] = np.sort(node_rule[1:])
    rule_start = np.array([int(np.flatnonzero(node_rule == r)[0]) for r in range(n_rules)], np.int32)
    delta = np.zeros((n_nodes, n_bytes + n_rules), np.int32)
    for n in range(1, n_nodes):
        same = np.flatnonzero(node_rule == node_rule[n])
        for col in range(n_bytes + n_rules):
            if rng.random() < (0.35 if col < n_bytes else 0.08):
                delta[n, col] = rng.choice(same)
    accept = np.zeros(n_nodes, bool)
    accept[1:] = rng.random(n_nodes - 1) < rng.choice([0.02, 0.2, 0.6])
    if seed % 2:  # repaired into a productive table: each stuck node gets one way out
        while not (ok := _productive_by_fixed_point(delta, accept, node_rule, rule_start, n_bytes))[1:].all():
            n = int(rng.choice(np.flatnonzero(~ok[1:]) + 1))
            out = np.flatnonzero(ok & (node_rule == node_rule[n]))
            if len(out):
                delta[n, rng.integers(0, n_bytes)] = rng.choice(out)
            else:
                accept[n] = True
    stuck = np.flatnonzero(~_productive_by_fixed_point(delta, accept, node_rule, rule_start, n_bytes)[1:]) + 1
    edges = Edges(_table(delta, n_bytes, accept, node_rule, rule_start))
    ranks = finish_ranks(edges, accept, node_rule, rule_start)
    if len(stuck):  # the first node that cannot finish is named
        assert unfinished(ranks) == stuck[0]
    else:
        assert unfinished(ranks) is None and unjustified(edges, accept, rule_start, ranks) is None
        worst = int(np.argmax(ranks))
        if not accept[worst]:  # a rank no edge justifies is found
            lowered = ranks.copy()
            lowered[worst] = 0
            assert unjustified(edges, accept, rule_start, lowered) is not None


@pytest.mark.parametrize("source, fmt", [(PATTERN, "regex"), ('root ::= "(" root ")" | "x"', "gbnf"),
                                         ('{"type": "object", "properties": {"a": {"type": "integer"}}}',
                                          "json_schema")])
def test_a_compiles_meta_reads_as_the_dict_it_is_saved_as(source, fmt, tmp_path):
    """A compile's meta writes its IR text out on first use; every way of reading it (an
    item, get, membership, iteration, copies, JSON, pickle) and the saved file see the same
    dict, with the IR text of the grammar."""
    import json
    import pickle

    from gramc.compiler.pipeline import compile_source, ir_text

    expected_ir = ir_text(compile_source(source, fmt).grammar)
    for read in (lambda m: m["ir"], lambda m: m.get("ir"), lambda m: dict(m)["ir"], lambda m: {**m}["ir"],
                 lambda m: json.loads(json.dumps(m))["ir"], lambda m: pickle.loads(pickle.dumps(m))["ir"],
                 lambda m: dict(m.items())["ir"], lambda m: m.copy()["ir"], lambda m: (m | {})["ir"],
                 lambda m: m.pop("ir"), lambda m: dict(zip(reversed(m), reversed(m.values())))["ir"]):
        meta = gramc.compile(source, fmt, vocab=VOCAB).meta
        assert "ir" in meta and read(meta) == expected_ir
    meta = gramc.compile(source, fmt, vocab=VOCAB).meta
    keys = sorted(meta)
    assert "ir" in keys and len(meta) == len(keys) and meta == dict(meta)
    fresh = gramc.compile(source, fmt, vocab=VOCAB).meta
    assert not fresh != dict(meta) and fresh == gramc.compile(source, fmt, vocab=VOCAB).meta
    art = gramc.compile(source, fmt, vocab=VOCAB)
    art.save(tmp_path / "a.gmask")
    assert gramc.load(tmp_path / "a.gmask", vocab=VOCAB).meta == dict(art.meta)
