"""Objects whose members may come in any order, checked by the matcher (the plan's members
condition, ``o``: gramc.schemas.objects ``_seen_body``, gramc.runtime.unique).

With ``property_order="any"``, an object with more declared properties than
``any_order_max_properties`` gets a grammar that accepts any member any number of times, and
the matcher forbids a repeated declared name and a ``}`` before every required name. The
tests lower the bound so that small objects take that path, and compare with two references
independent of the runtime check:

- the exact subset automaton (the same schema with a bound high enough): its documents
  (compact, finitely many), kept when ``jsonschema`` validates them, give a token oracle
  (a token is allowed exactly when prefix + token starts a kept document); masks are compared
  at every prefix reachable by allowed tokens, DFA and PDA, eager and lazy, after save/load,
  rollback and fork;
- for open languages, random documents with shuffled members (hypothesis), repeated and
  missing names drawn on purpose, tokenized at random boundaries: accepted exactly when
  ``jsonschema`` says valid, the mask agreeing with what a commit accepts.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

import gramc
from gramc.compiler.pda import build_pda
from gramc.compiler.passes import optimize
from gramc.compiler.pipeline import CompileOptions, build_automaton
from gramc.errors import ArtifactFormatError, GramcWarning
from gramc.runtime.check import check_artifact
from gramc.runtime.pda_artifact import PDAArtifact
from gramc.schemas import SchemaOptions, schema_to_grammar
from gramc.vocab import Vocab, load_vocab

from test_unique_items import Oracle, dfa_texts, explore
from test_unique_items import artifacts as unique_artifacts

#: Objects with more than one declared property take the members condition.
LOW = SchemaOptions(whitespace="compact", property_order="any", any_order_max_properties=1)
EXACT = SchemaOptions(whitespace="compact", property_order="any", any_order_max_properties=8)


def synthetic_vocab() -> Vocab:
    """Printable ASCII bytes, and tokens that cross member boundaries."""
    pieces = [bytes([b]) for b in range(0x20, 0x7F)]
    pieces += [b'"a"', b'"ab"', b'"b"', b'":', b'",', b',"', b'{"', b'"}', b'},', b'1,', b'1}', b',"a":null',
               b'"a":true,"a"', b'{}', b'ab', b'true', b'true}', b'true,"', b'1,"b', b'null']
    pieces.append(b"<eos>")
    return Vocab.from_list(pieces, special_ids=[len(pieces) - 1], eos_ids=[len(pieces) - 1], name="members-test")


SYNTH = synthetic_vocab()


def artifacts(schema: dict, vocab: Vocab) -> dict[str, gramc.Artifact]:
    """The schema with its objects under the members condition, as unique_artifacts builds."""
    assert any("o" in n for n in schema_to_grammar(schema, LOW)[0].unique["nodes"])
    return unique_artifacts(schema, vocab, LOW)


def documents(schema: dict) -> list[bytes]:
    """The valid documents, from the exact any-order automaton (finite)."""
    grammar, _ = schema_to_grammar(schema, EXACT)
    assert grammar.unique is None
    out = dfa_texts(build_automaton(grammar)[1])
    validator = Draft202012Validator(schema)
    assert all(validator.is_valid(json.loads(d)) for d in out)
    return sorted(out)


FINITE = [
    # a name that is a prefix of another ("a", "ab"): after both, '"a' is a dead end
    {"type": "object", "properties": {"a": {"type": "null"}, "ab": {"type": "null"}, "b": {"type": "boolean"}},
     "required": ["b"], "additionalProperties": False},
    # nested: the inner object has its own condition; the outer one needs "x"
    {"type": "object", "additionalProperties": False, "required": ["x"],
     "properties": {"x": {"type": "object", "properties": {"a": {"const": True}, "b": {"type": "null"}},
                          "required": ["a"], "additionalProperties": False},
                    "y": {"type": "boolean"}}},
]


@pytest.mark.parametrize("schema", FINITE, ids=range(len(FINITE)))
def test_masks_are_exact_on_finite_languages(schema):
    docs = documents(schema)
    oracle = Oracle(docs, SYNTH)
    for name, art in artifacts(schema, SYNTH).items():
        assert explore(art, oracle, SYNTH, limit=200) > 20, name


@pytest.mark.slow
def test_masks_are_exact_with_gpt2():
    vocab = load_vocab("gpt2")
    for schema in FINITE:
        oracle = Oracle(documents(schema), vocab)
        for name, art in artifacts(schema, vocab).items():
            assert explore(art, oracle, vocab, limit=40) > 10, name


# ---------------------------------------------------------------- open languages

NAMES = [f"p{i}" for i in range(12)] + ["q", "qq"]
OPEN = {
    "closed": {"type": "object", "additionalProperties": False, "required": ["p0", "p5", "qq"],
               "properties": {n: {"type": "integer"} for n in NAMES}},
    "open": {"type": "object", "required": ["p3"],
             "properties": {n: {"type": ["string", "integer"]} for n in NAMES}},
    "nested": {"type": "object", "required": ["p1"], "additionalProperties": False,
               "properties": {**{n: {"type": "integer"} for n in NAMES[:10]},
                              "p1": {"type": "array", "items": {"$ref": "#/properties/p2"}},
                              "p2": {"type": "object", "required": ["q"], "additionalProperties": False,
                                     "properties": {n: {"type": "integer"} for n in NAMES}}}},
}

_ART: dict[tuple[str, str], gramc.Artifact] = {}


def open_artifact(name: str, how: str) -> gramc.Artifact:
    key = (name, how)
    if key not in _ART:
        schema = OPEN[name]
        opts = CompileOptions(json_whitespace="compact", json_property_order="any")  # 14 names > 8
        if how.startswith("pda"):
            grammar, _ = schema_to_grammar(schema, SchemaOptions(whitespace="compact", property_order="any"))
            meta = {"format": "json_schema", "unique": grammar.unique}
            art: gramc.Artifact = PDAArtifact.bound(build_pda(optimize(grammar)), meta, SYNTH, lazy=how == "pda-lazy")
        else:
            art = gramc.compile(json.dumps(schema), "json_schema", SYNTH, options=opts, lazy=how == "dfa-lazy")
            if how == "dfa-loaded":
                art = gramc.from_bytes(art.to_bytes(), SYNTH)
        _ART[key] = art
    return _ART[key]


def members(name: str, depth: int = 0) -> st.SearchStrategy:
    """Objects for schema ``name``: declared names (repeats drawn on purpose, as a list of
    pairs), undeclared ones, values valid or not, in any order."""
    value = st.one_of(st.integers(0, 20), st.sampled_from(["s", "p0"]))
    if name == "nested" and depth == 0:
        inner = members("closed", 1).map(lambda pairs: dict(pairs))
        value = st.one_of(value, st.lists(inner, max_size=2))
    key = st.sampled_from(NAMES + ["x", "p"])
    return st.lists(st.tuples(key, value), max_size=8)


def text_of(pairs: list) -> bytes:
    """Compact JSON text of an object written as (name, value) pairs (repeats kept)."""
    body = ",".join(json.dumps(k) + ":" + json.dumps(v, separators=(",", ":")) for k, v in pairs)
    return ("{" + body + "}").encode()


def valid(name: str, pairs: list) -> bool:
    declared = [k for k, _ in pairs if k in NAMES]
    if len(declared) != len(set(declared)):  # a declared name written twice: never allowed
        return False
    # An undeclared name may repeat (docs/json-schema.md, "Objects": not prevented); a parser
    # keeps one of its values, and jsonschema judges the object it builds.
    return Draft202012Validator(OPEN[name]).is_valid(dict(pairs))


def tokenize(text: bytes, rng: random.Random) -> list[int]:
    ids = {t: i for i, t in enumerate(SYNTH.tokens) if i not in SYNTH.special_ids}
    out, i = [], 0
    while i < len(text):
        fits = [n for n in range(1, 12) if text[i:i + n] in ids]
        n = rng.choice(fits)
        out.append(ids[text[i:i + n]])
        i += n
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(sorted(OPEN)), how=st.sampled_from(["dfa", "dfa-lazy", "dfa-loaded", "pda", "pda-lazy"]),
       data=st.data(), seed=st.integers(0, 2**16))
def test_documents_are_accepted_exactly_when_valid(name, how, data, seed):
    pairs = data.draw(members(name))
    if data.draw(st.booleans()):  # mostly-valid documents too: the required names, shuffled
        req = OPEN[name]["required"]
        pairs = [(k, 1) for k in req] + [(k, v) for k, v in pairs if k not in req]
        random.Random(seed).shuffle(pairs)
    rng = random.Random(seed)
    text = text_of(pairs)
    want = valid(name, pairs)
    art = open_artifact(name, how)
    m = art.matcher(max_rollback=8)
    accepted = True
    for t in tokenize(text, rng):
        allowed = bool(m.mask()[t])
        if rng.random() < 0.2:  # a fork and a rollback change nothing
            f = m.fork()
            assert bool(f.mask()[t]) == allowed
        if not allowed:  # masks leave out dead ends too, which a commit alone may take
            accepted = False
            break
        assert m.commit_token(t), (text, t)
        if rng.random() < 0.2:
            m.rollback(1)
            assert m.commit_token(t)
    assert (accepted and m.is_complete()) == want, text
    assert check_artifact(art, text).ok == want, text


def test_a_repeated_name_and_an_early_close_are_refused():
    art = open_artifact("closed", "dfa")
    ids = {t: i for i, t in enumerate(SYNTH.tokens)}
    m = art.matcher()
    assert m.commit_tokens([ids[b'{"'], ids[b"p"], ids[b"5"], ids[b'":'], ids[b"1"], ids[b","]]) == 6
    mask = m.mask()
    assert mask[ids[b'"']]
    assert m.commit_tokens([ids[b'"'], ids[b"p"]]) == 2
    mask = m.mask()
    assert not mask[ids[b"5"]] and mask[ids[b"1"]] and mask[ids[b"4"]]  # "p5" again is a dead end
    assert not mask[ids[b'"']]  # "p" is no name (no other names allowed)
    assert m.commit_token(ids[b"5"])  # the grammar alone allows it...
    assert not m.mask().any() and not m.commit_token(ids[b'"'])  # ...but "p5" cannot be written twice
    m = art.matcher()
    assert m.commit_tokens([ids[b'{"'], ids[b"p"], ids[b"0"], ids[b'":'], ids[b"1"]]) == 5
    assert not m.mask()[ids[b"}"]] and not m.mask()[ids[b"1}"]]  # p5 and qq missing
    assert m.mask()[ids[b","]]


def test_objects_the_plan_cannot_locate_keep_schema_order():
    """Two branches admit objects: where a value is does not say which members condition
    applies, so that object keeps schema order (a reported restriction), never unchecked."""
    big = {"type": "object", "properties": {n: {"type": "integer"} for n in NAMES}, "required": ["p0"]}
    schema = {"type": "object", "properties": {
        "x": {"$ref": "#/$defs/big"},
        "y": {"anyOf": [{"$ref": "#/$defs/big"}, {"type": "object", "properties": {"z": {"type": "null"}},
                                                  "required": ["z"]}]}},
        "$defs": {"big": big}}
    with pytest.warns(GramcWarning, match="restricted 'properties'"):
        art = gramc.compile(json.dumps(schema), "json_schema",
                            options=CompileOptions(json_whitespace="compact", json_property_order="any"))
    assert check_artifact(art, b'{"x":{"p0":1}}').ok
    assert not check_artifact(art, b'{"y":{"p0":1,"p0":2}}').ok
    assert not check_artifact(art, b'{"x":{"p0":1,"p0":2}}').ok


def test_members_condition_is_layout_6_and_checked_when_read():
    from gramc.formats import container
    from gramc.runtime.reader import read_artifact

    art = open_artifact("closed", "dfa")
    meta, arrays = art.to_arrays()
    assert meta["artifact_version"] == 6
    assert gramc.from_bytes(container.pack(meta, arrays), SYNTH).has_unique
    node = {"u": False, "p": [], "r": -1, "k": {}, "a": -1}
    for bad in ({"root": 0, "nodes": [{**node, "o": [["a"], ["b"]]}]}, {"root": 0, "nodes": [{**node, "o": "a"}]},
                {"root": 0, "nodes": [{**node, "o": [["a"]]}]}):
        with pytest.raises(ArtifactFormatError):
            read_artifact({**meta, "source": {**meta["source"], "unique": bad}}, arrays)
    for older in (4, 5):  # a members condition in a layout that predates it
        with pytest.raises(ArtifactFormatError):
            read_artifact({**meta, "artifact_version": older}, arrays)
    # schema order, or any order under the bound: no plan, unchanged layouts
    small = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
             "additionalProperties": False}
    for order in ("schema", "any"):
        art = gramc.compile(json.dumps(small), "json_schema", SYNTH, options=CompileOptions(json_property_order=order))
        assert "unique" not in art.meta and art.to_arrays()[0]["artifact_version"] == 1


def test_an_unbound_pda_with_a_members_condition_reads_back():
    """A PDA (layout 8, whatever its plan) without a vocabulary: its finish ranks and its
    members condition are written and read."""
    schema = {"type": "object", "required": ["p3"], "properties": {
        **{n: {"type": "integer"} for n in NAMES}, "kids": {"type": "array", "items": {"$ref": "#"}}}}
    art = gramc.compile(json.dumps(schema), "json_schema", options=CompileOptions(json_property_order="any"))
    meta = art.to_arrays()[0]
    assert isinstance(art, PDAArtifact) and meta["artifact_version"] == 10
    assert any("o" in node for node in meta["source"]["unique"]["nodes"])  # a members condition
    back = gramc.from_bytes(art.to_bytes())
    assert back.to_bytes() == art.to_bytes()
    assert check_artifact(back, b'{"p3":1,"kids":[{"p3":2,"p0":3}]}').ok
    assert not check_artifact(back, b'{"p3":1,"p3":2}').ok
