"""``uniqueItems`` enforced by the matcher (gramc.runtime.unique, gramc.schemas.unique).

Two references, both independent of the runtime check:

- For schemas whose documents (compact whitespace) are finitely many, every document of the
  grammar *without* uniqueness is enumerated from its DFA and kept when ``jsonschema``
  validates it; a token is then allowed exactly when prefix + token starts a kept document
  (EOS: the prefix is one). Masks are compared with that at every prefix reachable by allowed
  tokens, for DFA and PDA artifacts, eager and lazy, after save/load, rollback and fork.
- For open item languages (strings, numbers, objects, nested arrays), random arrays
  (hypothesis) with duplicates drawn on purpose, tokenized at random boundaries: a document is
  accepted exactly when ``jsonschema`` says it is valid, and along the way the mask agrees
  with what a commit accepts.
"""

from __future__ import annotations

import functools
import json
import random
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

import gramc
from gramc.compiler.pda import build_pda
from gramc.compiler.pipeline import CompileOptions, build_automaton
from gramc.errors import ArtifactFormatError, GramcWarning, SchemaError
from gramc.runtime.dfa_artifact import DFAArtifact
from gramc.runtime.pda_artifact import PDAArtifact
from gramc.runtime.unique import Tracker, canonical
from gramc.schemas import SchemaOptions, schema_to_grammar
from gramc.vocab import Vocab, load_vocab
from gramc.compiler.passes import optimize

COMPACT = CompileOptions(json_whitespace="compact")
SCHEMA_OPTIONS = SchemaOptions(whitespace="compact")


def synthetic_vocab() -> Vocab:
    """Every printable ASCII byte, and multi-byte tokens that cross item boundaries."""
    pieces = [bytes([b]) for b in range(0x20, 0x7F)]
    pieces += [b'","', b'"a"', b'"ab"', b'],', b'],[', b'[[', b']]', b'1,', b',1', b'1,1', b'"a","a"', b'10',
               b'["', b'"]', b'{"', b'"}', b'},{', b'true', b'e,', b'tr', b'ue', b',"', b'"b",', b'[1,1]', b'":']
    pieces.append(b"<eos>")
    return Vocab.from_list(pieces, special_ids=[len(pieces) - 1], eos_ids=[len(pieces) - 1], name="unique-test")


SYNTH = synthetic_vocab()


def artifacts(schema: dict, vocab: Vocab, options: SchemaOptions = SCHEMA_OPTIONS) -> dict[str, gramc.Artifact]:
    """The schema as DFA and PDA artifacts, eager and lazy, and eager ones read back."""
    grammar, _ = schema_to_grammar(schema, options)
    assert grammar.unique is not None
    meta = {"format": "json_schema", "unique": grammar.unique}
    kind, dfa = build_automaton(grammar)
    assert kind == "dfa"
    pda = build_pda(optimize(grammar))
    out: dict[str, gramc.Artifact] = {
        "dfa": DFAArtifact.bound(dfa, meta, vocab), "dfa-lazy": DFAArtifact.bound(dfa, meta, vocab, lazy=True),
        "pda": PDAArtifact.bound(pda, meta, vocab), "pda-lazy": PDAArtifact.bound(pda, meta, vocab, lazy=True),
    }
    out["dfa-loaded"] = gramc.from_bytes(out["dfa"].to_bytes(), vocab)
    out["pda-loaded"] = gramc.from_bytes(out["pda"].to_bytes(), vocab)
    return out


def documents(schema: dict) -> list[bytes]:
    """The documents of the grammar without uniqueness (finite), valid ones only."""
    loose = json.loads(json.dumps(schema).replace('"uniqueItems": true', '"uniqueItems": false'))
    grammar, _ = schema_to_grammar(loose, SCHEMA_OPTIONS)
    validator = Draft202012Validator(schema)
    return sorted(d for d in dfa_texts(build_automaton(grammar)[1]) if validator.is_valid(json.loads(d)))


def dfa_texts(dfa) -> list[bytes]:
    """Every text of a DFA's finite language."""
    out: list[bytes] = []
    todo = [(dfa.start, b"")]
    while todo:
        q, text = todo.pop()
        assert len(text) < 80, "not a finite language"
        if dfa.accept[q]:
            out.append(text)
        for b in range(256):
            nq = int(dfa.delta[q, dfa.byte_class[b]])
            if nq:
                todo.append((nq, text + bytes([b])))
    return out


def same(got: np.ndarray, want: np.ndarray, vocab: Vocab, prefix: bytes) -> None:
    extra = [vocab.tokens[t] for t in np.flatnonzero(got & ~want)]
    missing = [vocab.tokens[t] for t in np.flatnonzero(want & ~got)]
    assert not extra and not missing, (prefix, "allowed, invalid:", extra, "forbidden, valid:", missing)


class Oracle:
    def __init__(self, docs: list[bytes], vocab: Vocab):
        self.docs, self.vocab = docs, vocab
        self.eos = set(vocab.eos_ids)

    def mask(self, prefix: bytes) -> np.ndarray:
        out = np.zeros(self.vocab.size, dtype=bool)
        live = [d for d in self.docs if d.startswith(prefix)]
        for t, data in enumerate(self.vocab.tokens):
            if t in self.eos:
                out[t] = prefix in self.docs
            elif data and t not in self.vocab.special_ids:
                out[t] = any(d.startswith(prefix + data) for d in live)
        return out


FINITE = [
    # enum strings where one value is a prefix of another: the dead end after "ab" when both were used
    {"type": "array", "items": {"enum": ["a", "ab", "b"]}, "maxItems": 4, "uniqueItems": True},
    # fewer distinct values than minItems asks for at most: capped; unsatisfiable past it
    {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 4, "uniqueItems": True},
    # literals end at the byte after them; "null" is a prefix of nothing else, "t" of "true" only
    {"type": "array", "items": {"enum": ["x", None, True, False]}, "maxItems": 3, "uniqueItems": True},
    # objects (member order does not matter for equality) and nested arrays, each level unique
    {"type": "array", "maxItems": 3, "uniqueItems": True,
     "items": {"type": "array", "items": {"enum": ["p", "q"]}, "maxItems": 2, "uniqueItems": True}},
    {"type": "array", "maxItems": 3, "uniqueItems": True,
     "items": {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"],
               "additionalProperties": False}},
    # uniqueness under a property, behind an anyOf with null, beside a plain array
    {"type": "object", "properties": {
        "t": {"anyOf": [{"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 3, "uniqueItems": True},
                        {"type": "null"}]},
        "u": {"type": "array", "items": {"enum": ["x"]}, "maxItems": 2}},
     "required": ["t", "u"], "additionalProperties": False},
]


def explore(art: gramc.Artifact, oracle: Oracle, vocab: Vocab, limit: int = 150) -> int:
    """Compare masks with the oracle at prefixes reachable by allowed tokens (breadth-first,
    ``limit`` of them); at each, rollback and fork must give the same masks."""
    seen = {b""}
    todo = [(b"", [])]
    n = 0
    rng = random.Random(0)
    while todo and n < limit:
        prefix, path = todo.pop(0)
        m = art.matcher(max_rollback=64)
        assert m.commit_tokens(path) == len(path)
        want = oracle.mask(prefix)
        same(m.mask(), want, vocab, prefix)
        assert m.is_complete() == (prefix in oracle.docs)
        n += 1
        allowed = [t for t in np.flatnonzero(want).tolist() if t not in oracle.eos]
        for t in allowed:
            nxt = prefix + vocab.tokens[t]
            if nxt not in seen:
                seen.add(nxt)
                todo.append((nxt, path + [t]))
        if allowed:  # a fork goes its own way; the original, rolled back, is where it was
            f = m.fork()
            t = rng.choice(allowed)
            assert f.commit_token(t)
            same(f.mask(), oracle.mask(prefix + vocab.tokens[t]), vocab, prefix + vocab.tokens[t])
            same(m.mask(), want, vocab, prefix)
            assert m.commit_token(t)
            m.rollback(1)
            same(m.mask(), want, vocab, prefix)
        if path:
            m.rollback(1)
            back = prefix[: len(prefix) - len(vocab.tokens[path[-1]])]
            same(m.mask(), oracle.mask(back), vocab, back)
    return n


@pytest.mark.parametrize("schema", FINITE, ids=range(len(FINITE)))
def test_masks_are_exact_on_finite_languages(schema):
    docs = documents(schema)
    oracle = Oracle(docs, SYNTH)
    for name, art in artifacts(schema, SYNTH).items():
        assert explore(art, oracle, SYNTH) > 20, name


@pytest.mark.slow
def test_masks_are_exact_with_gpt2():
    vocab = load_vocab("gpt2")
    for schema in FINITE[:3]:
        oracle = Oracle(documents(schema), vocab)
        for name, art in artifacts(schema, vocab).items():
            assert explore(art, oracle, vocab, limit=40) > 10, name


# ---------------------------------------------------------------- open item languages

OPEN = {
    "string": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    "number": {"type": "array", "items": {"type": "number"}, "uniqueItems": True},
    "object": {"type": "array", "uniqueItems": True,
               "items": {"type": "object", "properties": {"k": {"type": "string"}, "n": {"type": "integer"}}}},
    "nested": {"type": "array", "uniqueItems": True,
               "items": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}},
    "property": {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                                           "uniqueItems": True}}},
    # member values found by the patterns their names match (both, one, none: other names)
    "pattern": {"type": "object", "patternProperties": {
        "^a": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
        "b$": {"type": "array", "items": {"type": "integer"}, "maxItems": 3}},
        "additionalProperties": {"type": "array", "items": {"type": "integer"}}},
}

_ART: dict[tuple[str, str], gramc.Artifact] = {}


def open_artifact(name: str, how: str) -> gramc.Artifact:
    key = (name, how)
    if key not in _ART:
        schema = OPEN[name]
        grammar, _ = schema_to_grammar(schema, SCHEMA_OPTIONS)
        meta = {"format": "json_schema", "unique": grammar.unique}
        if how.startswith("pda"):
            art: gramc.Artifact = PDAArtifact.bound(build_pda(optimize(grammar)), meta, SYNTH, lazy=how == "pda-lazy")
        else:
            art = gramc.compile(json.dumps(schema), "json_schema", SYNTH, options=COMPACT, lazy=how == "dfa-lazy")
        _ART[key] = art
    return _ART[key]


def scalars() -> st.SearchStrategy:
    return st.one_of(st.sampled_from(["a", "b", "ab", ""]), st.integers(-3, 12),
                     st.sampled_from([1.0, 2.5, 0.0, -0.0, 1e2, 10.0]))


def instances(name: str) -> st.SearchStrategy:
    if name in ("string", "property"):
        items = st.lists(st.sampled_from(["a", "b", "ab", "", "a\\"]), max_size=5)
        return st.fixed_dictionaries({"tags": items}) if name == "property" else items
    if name == "number":
        return st.lists(st.one_of(st.integers(-3, 12), st.sampled_from([1.0, 2.5, 0.0, 1e2, 10.0, 0.25])),
                        max_size=5)
    if name == "pattern":
        return st.dictionaries(st.sampled_from(["a", "ab", "b", "xb", "x", "\\u0061"]),
                               st.lists(st.integers(0, 2), max_size=4), max_size=3)
    if name == "object":
        member = st.builds(lambda k, n: {**({"k": k} if k else {}), **({"n": n} if n is not None else {})},
                           st.sampled_from([None, "a", "b"]), st.one_of(st.none(), st.integers(0, 2)))
        return st.lists(member, max_size=4)
    return st.lists(st.lists(st.integers(0, 2), max_size=3), max_size=4)


def tokenize(text: bytes, rng: random.Random) -> list[int]:
    """``text`` split at random boundaries into tokens of the synthetic vocabulary."""
    ids = {t: i for i, t in enumerate(SYNTH.tokens) if i not in SYNTH.special_ids}
    out, i = [], 0
    while i < len(text):
        fits = [n for n in range(1, 8) if text[i:i + n] in ids]
        n = rng.choice(fits)
        out.append(ids[text[i:i + n]])
        i += n
    return out


def serialise(value, rng: random.Random) -> bytes:
    text = json.dumps(value, separators=(",", ":"))
    if rng.random() < 0.5:  # key order and number spelling change nothing
        text = text.replace("1.0", "1").replace("100.0", "1e2")
    return text.encode()


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(sorted(OPEN)), how=st.sampled_from(["dfa", "dfa-lazy", "pda", "pda-lazy"]),
       data=st.data(), seed=st.integers(0, 2**16))
def test_documents_are_accepted_exactly_when_valid(name, how, data, seed):
    value = data.draw(instances(name))
    rng = random.Random(seed)
    text = serialise(value, rng)
    valid = Draft202012Validator(OPEN[name]).is_valid(json.loads(text))
    art = open_artifact(name, how)
    m = art.matcher()
    accepted = True
    for t in tokenize(text, rng):
        allowed = bool(m.mask()[t])
        took = m.commit_token(t)
        assert allowed == took, (text, t)
        if not took:
            accepted = False
            break
    assert (accepted and m.is_complete()) == valid, text
    if not valid and accepted:
        pytest.fail(f"an invalid document was accepted: {text!r}")


def test_a_duplicate_is_refused_at_the_token_that_settles_it():
    art = open_artifact("number", "dfa")
    m = art.matcher()
    ids = {t: i for i, t in enumerate(SYNTH.tokens)}
    for piece in [b"[", b"1", b"0", b",", b"1"]:
        assert m.commit_token(ids[piece])
    mask = m.mask()
    assert mask[ids[b"0"]] and mask[ids[b"."]]  # 10 again is possible... until it is settled
    assert m.commit_token(ids[b"0"])
    assert not m.mask()[ids[b","]] and not m.mask()[ids[b"]"]]
    assert m.mask()[ids[b"0"]] and m.mask()[ids[b"e"]]  # 100, 10e1 (= 100) is no duplicate yet
    assert not art.matcher().commit_tokens([ids[b"[1,1]"]])  # one token completing two items


def test_canonical_values_follow_json_schema_equality():
    assert canonical(b"1") == canonical(b"1.0") == canonical(b"10e-1") == canonical(b"0.1e1")
    assert canonical(b"0") == canonical(b"-0") == canonical(b"0.0")
    assert canonical(b"true") != canonical(b"1") and canonical(b"false") != canonical(b"0")
    assert canonical(b'{"a":1,"b":[2]}') == canonical(b'{ "b" : [2.0], "a" : 1 }')
    assert canonical(b'"\\u0061"') == canonical(b'"a"')
    assert canonical(b"[1,2]") != canonical(b"[2,1]")


# ---------------------------------------------------------------- compile side and format


def test_exact_uniqueness_is_not_reported_and_strict_mode_accepts_it():
    schema = {"type": "object", "properties": {"tags": {"anyOf": [
        {"type": "array", "items": {"type": "string"}, "uniqueItems": True}, {"type": "null"}]}}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grammar, approx = schema_to_grammar(schema, SchemaOptions(strict=True))
    assert approx == [] and grammar.unique is not None


def test_uniqueness_the_place_cannot_decide_stays_reported():
    schema = {"anyOf": [{"type": "array", "uniqueItems": True},
                        {"type": "array", "items": {"type": "integer"}}]}
    with pytest.warns(GramcWarning, match="'uniqueItems' at #/anyOf/0/uniqueItems"):
        grammar, approx = schema_to_grammar(schema)
    assert [a.keyword for a in approx] == ["uniqueItems"] and grammar.unique is None
    with pytest.raises(SchemaError):
        schema_to_grammar(schema, SchemaOptions(strict=True))
    # a schema embedded in a structural tag has no runtime check: reported as before
    with pytest.warns(GramcWarning, match="uniqueItems"):
        schema_to_grammar({"type": "array", "uniqueItems": True}, runtime_unique=False)


def test_too_few_distinct_values_make_the_array_impossible():
    schema = {"type": "object", "additionalProperties": False, "properties": {"x": {
        "type": "array", "items": {"enum": ["a", "b"]}, "minItems": 3, "uniqueItems": True}}}
    art = gramc.compile(json.dumps(schema), "json_schema", SYNTH, options=COMPACT)
    ids = {t: i for i, t in enumerate(SYNTH.tokens)}
    m = art.matcher()
    assert m.commit_token(ids[b"{"])
    assert not m.mask()[ids[b'"']] and m.mask()[ids[b"}"]]  # "x" can have no valid value


def test_artifacts_without_unique_items_are_unchanged():
    art = gramc.compile('{"type": "array", "items": {"type": "string"}}', "json_schema", SYNTH)
    assert "unique" not in art.meta and not art.has_unique
    meta, arrays = art.to_arrays()
    assert meta["artifact_version"] == 1 and "vocab.bytes" not in arrays


def test_the_plan_is_layout_4_or_5_and_checked_when_read():
    """Unbound, an artifact with a plan is layout 4; bound, layout 5 (the token bytes the plan
    reads are the vocabulary's, bound by fingerprint, not stored)."""
    from gramc.formats import container
    from gramc.runtime.reader import read_artifact

    art = open_artifact("string", "dfa")
    unbound = gramc.compile(json.dumps(OPEN["string"]), "json_schema", options=COMPACT)
    assert unbound.has_unique and unbound.to_arrays()[0]["artifact_version"] == 4
    meta, arrays = art.to_arrays()
    assert meta["artifact_version"] == 5 and meta["source"]["unique"] == art.meta["unique"]
    assert not any(name.startswith("vocab.") for name in arrays)
    assert gramc.from_bytes(container.pack(meta, arrays), SYNTH).has_unique
    for bad in ({"root": 5, "nodes": []}, {"root": 0, "nodes": [{"u": True}]}, "x",
                {"root": 0, "nodes": [{"u": True, "p": [3], "r": -1, "k": {}, "a": -1}]}):
        with pytest.raises(ArtifactFormatError):
            read_artifact({**meta, "source": {**meta["source"], "unique": bad}}, arrays)
    with pytest.raises(ArtifactFormatError):  # layout 4 without a plan
        read_artifact({**meta, "source": {k: v for k, v in meta["source"].items() if k != "unique"}}, arrays)
    with pytest.raises(ArtifactFormatError):  # a plan in an older layout
        read_artifact({**meta, "artifact_version": 1}, arrays)


def test_whole_text_checks_enforce_the_plan():
    """``check_artifact`` (``gramc check``, the suite bench) refuses a duplicate where the
    grammar alone accepts it, at the byte that completes it."""
    from gramc.runtime.check import check_artifact

    art = gramc.compile(json.dumps({"type": "array", "uniqueItems": True}), format="json_schema")
    assert check_artifact(art, b'[1, {"a": 1, "b": [2]}, "x"]').ok
    for text, offset in ((b"[1,1]", 4), (b"[1,1.0]", 6), (b'[{"a":1,"b":2},{"b":2,"a":1}]', 27)):
        result = check_artifact(art, text)
        assert not result.ok and result.offset == offset and "uniqueItems" in result.message


def test_a_property_named_ref_is_not_a_reference():
    schema = {"type": "object", "properties": {"$ref": {"type": "string"}},
              "additionalProperties": {"type": "array", "uniqueItems": True}}
    art = gramc.compile(json.dumps(schema), format="json_schema")
    assert check_artifact_ok(art, b'{"$ref": "a", "x": [1, 2]}')
    assert not check_artifact_ok(art, b'{"x": [1, 1]}')


def check_artifact_ok(art, text: bytes) -> bool:
    from gramc.runtime.check import check_artifact

    return check_artifact(art, text).ok


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-20, 200) | st.sampled_from([1.5, 0.0, 1e3]) | st.text("ab\"\\ ,]}[{", max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text("ab", max_size=2), inner, max_size=3),
    max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.lists(JSON_VALUES, min_size=1, max_size=5), spaced=st.booleans())
def test_every_token_that_completes_an_item_is_checked(value, spaced):
    """The runtime checks only the tokens its per-mode event rows select (a sparse subset of
    the mask); any token that completes an item of an open unique array (or opens one and
    completes an item of it) must be among them, from every prefix of a document, with every
    slice of its continuation as the token."""
    from gramc.runtime.unique import Plan, UniqueCheck, VocabRows, _ids

    text = json.dumps(value, separators=(", ", ": ") if spaced else (",", ":")).encode()
    pieces = sorted({text[p:p + n] for p in range(len(text)) for n in range(1, 9)} | {b"["})
    check = UniqueCheck(Plan({"root": 0, "nodes": [{"u": True, "p": [], "r": 0, "k": {}, "a": 0}]}),
                        VocabRows(pieces, frozenset()))
    everything = np.full((len(pieces) + 31) // 32, 0xFFFFFFFF, dtype=np.uint32)
    tracker = check.initial()
    for p in range(len(text)):
        selected = set(_ids(check._item_ends(tracker) & everything))
        for t, piece in enumerate(pieces):
            if not text.startswith(piece, p):
                continue
            nxt = tracker.feed(piece)
            completes = nxt is None or any(
                len(nxt.frames) <= d or len(nxt.frames[d].raws) > len(f.raws)
                for d, f in enumerate(tracker.frames) if f.array) or (
                len(nxt.frames) > len(tracker.frames) and any(f.raws for f in nxt.frames[len(tracker.frames):]))
            assert not completes or t in selected, (text[:p], piece)
        tracker = tracker.feed(text[p:p + 1])
        if tracker is None:  # the document repeats an item itself: the rest is never reached
            return


@pytest.mark.parametrize("schema, texts", [
    # branches that only add `required` beside a uniqueItems they share ask the same: exact
    ({"type": "object", "properties": {"r": {"type": "array", "uniqueItems": True}, "a": {}},
      "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
     [b'{"r":[1,1],"a":1}', b'{"r":[1,2],"b":1}', b'{"r":[2,2],"b":1}', b'{"r":[2,3],"a":1}', b'{"r":[]}']),
    ({"oneOf": [{"type": "object", "required": ["x"]}, {"type": "object", "required": ["y"]}],
      "properties": {"x": {"type": "array", "items": {"type": "array", "uniqueItems": True}}}},
     [b'{"x":[[1,2],[1,2]]}', b'{"x":[[1,1]]}', b'{"y":1,"x":[[3,"3",3]]}', b'{"y":1,"x":[[3,"3"]]}']),
    # three branches: two agree on a unique array, the third asks nothing of it (reported,
    # never merged into "nothing asked")
    ({"type": "object", "anyOf": [{"required": ["a"], "properties": {"r": {"type": "array", "uniqueItems": True}}},
                                  {"required": ["b"], "properties": {"r": {"type": "array", "uniqueItems": True}}},
                                  {"required": ["c"]}]},
     None),
    # a branch that allows at most one item (unique anyway) beside one that allows more
    ({"type": "object", "properties": {"r": {"type": "array", "uniqueItems": True}},
      "anyOf": [{"properties": {"r": {"maxItems": 1}}}, {"properties": {"r": {"minItems": 2}}}]},
     [b'{"r":[1,1]}', b'{"r":[1,2]}', b'{"r":[1]}', b'{"r":[]}', b'{"r":[2,1,2]}']),
    # a name matching a pattern whose values have nothing unique below never takes the
    # other names' uniqueness
    ({"type": "object", "patternProperties": {"^a$": {"type": "array"}, "^b": {"type": "array", "uniqueItems": True}},
      "additionalProperties": {"type": "array", "uniqueItems": True}},
     [b'{"a":[1,1]}', b'{"b":[1,1]}', b'{"x":[1,1]}', b'{"a":[1,2]}', b'{"bb":[2,3]}']),
    # a declared name with nothing unique below, beside other names whose values are unique
    ({"type": "object", "properties": {"x": {"type": "array"}},
      "additionalProperties": {"type": "array", "uniqueItems": True}},
     [b'{"x":[1,1]}', b'{"x":[1,1],"y":[1,1]}', b'{"x":[1,1],"y":[1,2]}', b'{"y":[[1],[1]]}']),
])
def test_places_that_every_branch_agrees_on_are_exact(schema, texts):
    """Where several branches of a disjunction admit the value and agree on what must be
    unique below it, the plan follows them without a warning, and whole-text checks agree
    with jsonschema."""
    from gramc.runtime.check import check_artifact

    if texts is None:  # the branches differ: reported, not followed
        with pytest.warns(GramcWarning, match="several branches"):
            gramc.compile(json.dumps(schema), format="json_schema")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error", GramcWarning)
        art = gramc.compile(json.dumps(schema), format="json_schema")
    validator = Draft202012Validator(schema)
    for text in texts:
        assert check_artifact(art, text).ok == validator.is_valid(json.loads(text)), text


def test_branches_that_differ_below_stay_reported():
    schema = {"type": "object", "anyOf": [{"properties": {"r": {"type": "array", "uniqueItems": True}}},
                                          {"properties": {"r": {"type": "array"}}}]}
    with pytest.warns(GramcWarning, match="several branches of the 'anyOf'"):
        grammar, approx = schema_to_grammar(schema)
    assert [a.keyword for a in approx] == ["uniqueItems"]


def test_patterns_route_member_values_and_the_plan_is_layout_7():
    """A plan that finds member values by the patterns their names match is layout 7 (bound
    or not); its patterns and routes are checked when read, and older layouts refuse it."""
    from gramc.formats import container
    from gramc.runtime.reader import read_artifact

    art = gramc.compile(json.dumps(OPEN["pattern"]), "json_schema", SYNTH, options=COMPACT)
    meta, arrays = art.to_arrays()
    plan = meta["source"]["unique"]
    assert meta["artifact_version"] == 7 and len(plan["patterns"]) == 2
    assert gramc.compile(json.dumps(OPEN["pattern"]), "json_schema", options=COMPACT).to_arrays()[0][
        "artifact_version"] == 7
    back = gramc.from_bytes(container.pack(meta, arrays), SYNTH)
    m = back.matcher()
    assert m.commit_tokens(tokenize(b'{"xb":[1,1],"ab":[1,1', random.Random(0)))  # "xb": b$ only
    assert not m.mask()[SYNTH.tokens.index(b"]")] and m.mask()[SYNTH.tokens.index(b"0")]  # "ab": ^a too
    node = next(i for i, n in enumerate(plan["nodes"]) if "m" in n)
    pattern = plan["patterns"][0]

    def with_plan(**changes):
        return {**meta, "source": {**meta["source"], "unique": {**plan, **changes}}}

    def with_node(**changes):
        nodes = [dict(n, **changes) if i == node else n for i, n in enumerate(plan["nodes"])]
        return with_plan(nodes=nodes)

    for bad in (with_plan(patterns="x"), with_plan(patterns=[{**pattern, "s": 10 ** 6}]),
                with_plan(patterns=[{**pattern, "c": pattern["c"][:10]}, plan["patterns"][1]]),
                with_plan(patterns=[{**pattern, "d": [[99] * len(pattern["d"][0])]}, plan["patterns"][1]]),
                with_node(m=[[[5], 1]]), with_node(m=[[[], 1]]), with_node(m=[[[0], 1], [[0], 1]]),
                with_node(m=[[[0], 99]]), with_plan(extra=1)):
        with pytest.raises(ArtifactFormatError):
            read_artifact(bad, arrays)
    for version in (5, 6):  # a plan with patterns in an older layout
        with pytest.raises(ArtifactFormatError, match="layout 7"):
            read_artifact({**meta, "artifact_version": version}, arrays)
    without = {k: v for k, v in plan.items() if k != "patterns"}
    with pytest.raises(ArtifactFormatError, match="layout 7"):  # layout 7 without patterns
        read_artifact({**meta, "source": {**meta["source"], "unique": {
            **without, "nodes": [{k: v for k, v in n.items() if k != "m"} for n in plan["nodes"]]}}}, arrays)


def _compact_by_bytes(text: bytes, start: int) -> bytes:
    """Whitespace outside strings dropped, one byte at a time (the reference for compact)."""
    from gramc.runtime.unique import ESCAPED, OUTSIDE

    out, in_str, esc = bytearray(), start != OUTSIDE, start == ESCAPED
    for b in text:
        if in_str:
            out.append(b)
            esc, in_str = (False, True) if esc else (b == 0x5C, b != 0x22)
        elif b not in b" \t\n\r":
            out.append(b)
            in_str = b == 0x22
    return bytes(out)


@given(st.binary(max_size=12).map(lambda b: bytes(b" \t\n\"\\ab,"[x % 8] for x in b)), st.integers(0, 2))
def test_compact_drops_exactly_the_whitespace_outside_strings(text, start):
    from gramc.runtime.unique import compact

    assert compact(text, start) == _compact_by_bytes(text, start)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.lists(JSON_VALUES, min_size=1, max_size=4), indent=st.sampled_from([None, 1, "\t"]),
       cuts=st.lists(st.integers(1, 6), min_size=1, max_size=8), asked=st.lists(st.booleans(), min_size=1))
def test_item_texts_follow_the_text_however_it_is_fed(value, indent, cuts, asked):
    """A tracker's texts of the items being written (made from the tracker before it where
    that one made them, else from the text) are the compact text from each item's start,
    whether or not every tracker on the way was asked for them."""
    from gramc.runtime.unique import Plan

    text = json.dumps(value, indent=indent).encode()
    plan = Plan({"root": 0, "nodes": [{"u": True, "p": [], "r": 0, "k": {}, "a": 0}]})
    tracker = Tracker(plan)
    pos, step = 0, 0
    while pos < len(text) and tracker is not None:
        n = cuts[step % len(cuts)]
        tracker = tracker.feed(text[pos:pos + n])
        pos, step = pos + n, step + 1
        if tracker is None or not asked[step % len(asked)]:
            continue
        want = tuple(_compact_by_bytes(text[f.start:min(pos, len(text))], 0)
                     if f.array and f.start >= 0 else None for f in tracker.frames)
        assert tracker.items_written() == want, text[:pos]


def _whitespace_vocab() -> Vocab:
    """The synthetic pieces and runs of whitespace, alone and around structure."""
    pieces = list(SYNTH.tokens[:-1]) + [b"  ", b"   ", b"\n", b"\n ", b"\n  ", b"\t", b" \t", b"\r\n", b", ",
                                        b": ", b" [", b' "', b"[ ", b" ]", b",\n", b"}\n"]
    pieces.append(b"<eos>")
    return Vocab.from_list(pieces, special_ids=[len(pieces) - 1], eos_ids=[len(pieces) - 1], name="unique-ws")


WS_VOCAB = _whitespace_vocab()


@functools.lru_cache(maxsize=None)
def _finite_documents(i: int) -> list[bytes]:
    return documents(FINITE[i])


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(sorted(OPEN) + list(range(len(FINITE)))), kind=st.sampled_from(["pda", "compiled"]),
       data=st.data(), max_ws=st.sampled_from([None, 2]), seed=st.integers(0, 2**16))
def test_dead_end_shortcuts_change_no_mask(name, kind, data, max_ws, seed):
    """Two shortcuts of the dead-end checks give the masks the checks give token by token:
    one verdict for every whitespace run where the grammar's state after any run is the same
    (and none where it is not: a bounded run), and the bytes that showed a grammar state
    alive tried first from a state of the same key. Open item languages, and finite ones
    (where dead ends are) along their documents."""
    rng = random.Random(seed)
    if isinstance(name, int):
        schema = FINITE[name]
        value = json.loads(rng.choice(_finite_documents(name)))
    else:
        schema = OPEN[name]
        value = data.draw(instances(name))
    text = json.dumps(value, indent=rng.choice([None, 1, 2, "\t"])).encode()
    grammar, _ = schema_to_grammar(schema, SchemaOptions(max_whitespace=max_ws))
    meta = {"format": "json_schema", "unique": grammar.unique}

    def build() -> gramc.Artifact:  # the kind the schema compiles to, or a PDA of it
        if kind == "pda":
            return PDAArtifact.bound(build_pda(optimize(grammar)), meta, WS_VOCAB)
        return gramc.compile(json.dumps(schema), "json_schema", WS_VOCAB,
                             options=CompileOptions(json_max_whitespace=max_ws))

    fast, slow = build(), build()
    check = slow.unique_check()
    check._blank_state = lambda state, engine: None
    check._shows_alive = lambda tracker, path: False
    ids = {t: i for i, t in enumerate(WS_VOCAB.tokens) if i not in WS_VOCAB.special_ids}
    a, b = fast.matcher(), slow.matcher()
    i = 0
    while i <= len(text):
        got, want = a.mask(), b.mask()
        same(got, want, WS_VOCAB, text[:i])
        allowed = [t for t in np.flatnonzero(want).tolist() if t not in WS_VOCAB.special_ids]
        if allowed:  # and one step off the document, where dead ends are
            t = rng.choice(allowed)
            fa, fb = a.fork(), b.fork()
            assert fa.commit_token(t) and fb.commit_token(t)
            same(fa.mask(), fb.mask(), WS_VOCAB, text[:i] + WS_VOCAB.tokens[t])
        fits = [n for n in range(1, 5) if text[i:i + n] in ids and want[ids[text[i:i + n]]]]
        if not fits:
            break
        t = ids[text[i:i + rng.choice(fits)]]
        assert a.commit_token(t) and b.commit_token(t)
        i += len(WS_VOCAB.tokens[t])
    # what the shortcuts remember by state key is small: verdicts and bytes, never a state
    # (a parser's state holds its chart)
    kept = fast.unique_check()
    assert all(type(v) is bool for v in kept._blank.values())
    assert all(type(v) is bytes for v in kept._witness.values())


def test_vocabulary_rows_are_shared_and_bounded():
    """Artifacts bound to one vocabulary share its rows (made once); the rows of at most
    MAX_VOCAB_ROWS vocabularies are kept."""
    from gramc.runtime.unique import MAX_VOCAB_ROWS, vocab_rows

    schema = json.dumps(OPEN["string"])
    a = gramc.compile(schema, "json_schema", WS_VOCAB, options=COMPACT)
    b = gramc.compile(schema, "json_schema", WS_VOCAB)
    assert a.unique_check().rows is b.unique_check().rows is vocab_rows(WS_VOCAB)
    first = vocab_rows(WS_VOCAB)
    for i in range(MAX_VOCAB_ROWS):
        vocab_rows(Vocab.from_list([b"a", bytes([0x61 + i + 1])], name=f"v{i}"))
    assert vocab_rows(WS_VOCAB) is not first


@given(name=st.text(max_size=12), ascii_only=st.booleans())
def test_member_names_are_read_as_json_reads_them(name, ascii_only):
    """The tracker's reading of a member name's literal (without ``json.loads`` where it has
    no escape) is ``json.loads``'s, escapes and non-ASCII names included."""
    from gramc.runtime.unique import _member_name

    literal = json.dumps(name, ensure_ascii=ascii_only).encode()
    assert _member_name(literal) == json.loads(literal) == name
