"""Artifacts: round trips, determinism, vocabulary checks, hostile contents, the cache."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import gramc
from gramc.errors import ArtifactFormatError, ArtifactVersionError, VocabularyError
from gramc.formats import container

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
    for name, fn in changes.items():
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
    ],
)
def test_hostile_contents_are_rejected_with_a_clear_message(art, change, message):
    data = _tamper(art, x=change)
    with pytest.raises(ArtifactFormatError, match=message):
        gramc.from_bytes(data)


def test_newer_artifact_layout_is_a_version_error(art):
    data = _tamper(art, x=lambda m, a: m.__setitem__("artifact_version", 3))
    with pytest.raises(ArtifactVersionError):
        gramc.from_bytes(data)


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


def test_importing_gramc_does_not_import_the_compiler():
    code = (
        "import sys, gramc; gramc.load; "
        "bad = [m for m in sys.modules if m.startswith(('gramc.compiler', 'lark', 'jsonschema', 'pycuda', 'torch'))]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_runtime_modules_never_import_the_compiler():
    from pathlib import Path

    runtime = Path(gramc.__file__).parent / "runtime"
    for path in runtime.rglob("*.py"):
        text = path.read_text()
        assert "gramc.compiler" not in text and "gramc.api" not in text, path


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


@pytest.mark.parametrize(
    "change, message",
    [
        (_set("vocab.bytes", 0, ord("[")), "fingerprint"),
        (_set("pda.delta", 5, 10**4), "pda.delta"),
        (_set("pda.node_rule", 1, 7), "pda.node_rule"),
        (lambda m, a: a.__setitem__("pda.accept", np.zeros_like(a["pda.accept"])), "cannot finish"),
        (_set("nodes.unc_ids", 0, 10**6) , "nodes.unc_ids"),
        (lambda m, a: a.__setitem__("nodes.accepted", a["nodes.accepted"][:1].copy()), "nodes.accepted"),
        (lambda m, a: a.__setitem__("vocab.lengths", a["vocab.lengths"][:-1].copy()), "vocab.lengths"),
        (lambda m, a: m["pda"].__setitem__("rule_names", []), "rule_names"),
    ],
)
def test_hostile_pda_contents_are_rejected(pda_art, change, message):
    meta, arrays = pda_art.to_arrays()
    assert len(arrays["nodes.unc_ids"]), "the fixture must have uncertain tokens to corrupt"
    with pytest.raises(ArtifactFormatError, match=message):
        gramc.from_bytes(_tamper(pda_art, x=change))
