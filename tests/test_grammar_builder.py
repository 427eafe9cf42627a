"""gramc.grammar (composing grammars in Python) and gramc.compile of JSON Schemas given as a
dict or a pydantic model: the same languages and artifacts as the equivalent text sources."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

import gramc
from gramc import grammar as g
from gramc.api import cache_key
from gramc.compiler.pipeline import CompileOptions
from gramc.grammar import schema_text

ALPHABET = "abcxyz-[]{}\":,0123456789 "
VOCAB = gramc.Vocab.from_list([c.encode() for c in ALPHABET] + [b"ab", b"<n>", b"</n>"])


def _accepts(artifact: gramc.Artifact, text: str) -> bool:
    m = artifact.matcher()
    return m.commit_bytes(text.encode()) and m.is_complete()


def _random_strings(rng: random.Random, chars: str, samples: list[str], n: int = 400) -> list[str]:
    """Random strings over ``chars``, plus mutations of strings known to be in the language
    (so that both answers occur)."""
    out = list(samples)
    for _ in range(n):
        if samples and rng.random() < 0.5:
            s = list(rng.choice(samples))
            for _ in range(rng.randint(0, 2)):
                op = rng.randrange(3)
                i = rng.randrange(len(s) + 1)
                if op == 0:
                    s.insert(i, rng.choice(chars))
                elif s and op == 1:
                    del s[min(i, len(s) - 1)]
                elif s:
                    s[min(i, len(s) - 1)] = rng.choice(chars)
            out.append("".join(s))
        else:
            out.append("".join(rng.choice(chars) for _ in range(rng.randint(0, 8))))
    return out


def _same_language(a: gramc.Artifact, b: gramc.Artifact, strings: list[str]) -> None:
    verdicts = [(s, _accepts(a, s), _accepts(b, s)) for s in strings]
    assert [v for v in verdicts if v[1] != v[2]] == []
    assert any(v[1] for v in verdicts) and not all(v[1] for v in verdicts)  # both answers tested


def test_combinators_match_the_equivalent_regex():
    part = g.seq(g.plus(g.regex("[a-c]")), g.optional("-"), g.repeat(g.alt("x", "yz"), 1, 3), g.star("0"))
    built = gramc.compile(part, vocab=VOCAB)
    written = gramc.compile("[a-c]+-?(x|yz){1,3}0*", vocab=VOCAB)
    samples = ["a-x", "abcyzyz", "cx000", "b-yzxx0"]
    _same_language(built, written, _random_strings(random.Random(1), "abcxyz-0", samples))


def test_recursive_rule_matches_the_hand_written_grammar():
    value = g.rule("value", g.alt(g.regex("[a-c]+"), g.seq("[", g.ref("value"), g.star(g.seq(",", g.ref("value"))), "]")))
    built = gramc.compile(value, vocab=VOCAB)
    assert built.kind == "pda"
    written = gramc.compile('root ::= [a-c]+ | "[" root ("," root)* "]"', format="gbnf", vocab=VOCAB)
    samples = ["a", "[a]", "[[ab],c]", "[a,[b,[c]]]"]
    _same_language(built, written, _random_strings(random.Random(2), "abc[],", samples))


def test_a_tag_around_a_schema_matches_the_schema_between_the_strings():
    schema = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}},
              "required": ["b", "a"], "additionalProperties": False}
    part = g.tag("<n>", g.json_schema(schema), "</n>")
    built = gramc.compile(part, vocab=VOCAB)
    inner = gramc.compile(schema, vocab=VOCAB)
    rng = random.Random(3)
    docs = ['{"b":1,"a":"x"}', '{"b": 12, "a": ""}', '{"a":"x","b":1}', '{"b":1}', '{"b":-0,"a":"zz"}']
    for doc in _random_strings(rng, ALPHABET, docs, 300):
        assert _accepts(built, f"<n>{doc}</n>") == _accepts(inner, doc), doc
    assert _accepts(built, '<n>{"b":1,"a":"x"}</n>') and not _accepts(built, '{"b":1,"a":"x"}')


def test_str_prints_the_ir_grammar():
    assert str(g.seq("ab", g.optional(g.regex("[0-9]")), g.plus("c"))) == 'root ::= "ab" [0-9]? "c"+\n'
    shared = g.rule("digit", g.regex("[0-9]"))
    assert str(g.seq(shared, "-", shared)) == 'root ::= digit "-" digit\ndigit ::= [0-9]\n'


def test_dict_and_string_schemas_give_byte_identical_artifacts():
    schema = {"type": "object", "properties": {"z": {"type": "boolean"}, "a": {"type": "integer"}}}
    from_dict = gramc.compile(schema, vocab=VOCAB)
    assert from_dict.meta["format"] == "json_schema"
    assert from_dict.to_bytes() == gramc.compile(schema_text(schema), format="json_schema", vocab=VOCAB).to_bytes()
    assert from_dict.to_bytes() == gramc.compile(schema, "json_schema", vocab=VOCAB).to_bytes()
    # The builder reads a schema's text and its dict to the same part.
    assert g.json_schema(json.dumps(schema, indent=2)) == g.json_schema(schema)
    # Property order is kept: "z" comes first in the canonical text and in the language.
    assert schema_text(schema).index('"z"') < schema_text(schema).index('"a"')
    assert _accepts(from_dict, '{"z":true,"a":1}') and not _accepts(from_dict, '{"a":1,"z":true}')


def test_pydantic_model_gives_the_artifact_of_its_schema():
    pydantic = pytest.importorskip("pydantic")

    class Call(pydantic.BaseModel):
        name: str
        count: int

    artifact = gramc.compile(Call, vocab=VOCAB)
    assert artifact.to_bytes() == gramc.compile(Call.model_json_schema(), vocab=VOCAB).to_bytes()
    assert _accepts(artifact, '{"name":"ab","count":3}') and not _accepts(artifact, '{"name":"ab"}')
    assert g.json_schema(Call) == g.json_schema(Call.model_json_schema())


def test_the_cache_is_keyed_by_the_canonical_text(tmp_path: Path):
    schema = {"type": "array", "items": {"type": "integer"}, "maxItems": 2}
    first = gramc.compile(schema, vocab=VOCAB, cache_dir=tmp_path)
    key = cache_key(schema_text(schema), "json_schema", CompileOptions(), VOCAB)
    assert [p.name for p in tmp_path.rglob("*.gmask")] == [f"{key}.gmask"]
    assert gramc.compile(dict(schema), vocab=VOCAB, cache_dir=tmp_path).to_bytes() == first.to_bytes()
    part = g.plus(g.regex("[0-9]"))
    gramc.compile(part, vocab=VOCAB, cache_dir=tmp_path)
    assert (tmp_path / (k := cache_key(part.source(), "grammar", CompileOptions(), VOCAB))[:2] / f"{k}.gmask").exists()


@pytest.mark.parametrize("call, error, words", [
    (lambda: gramc.compile({"type": "string"}, format="regex"), TypeError, "format='regex'"),
    (lambda: gramc.compile(g.literal("a"), format="gbnf"), TypeError, "format='gbnf'"),
    (lambda: gramc.compile(42), TypeError, "got int"),
    (lambda: gramc.compile(b"[0-9]"), TypeError, "decode it first"),
    (lambda: gramc.compile({"type": "number", "maximum": float("nan")}), gramc.SchemaError, "not JSON"),
    (lambda: g.json_schema("{not json"), gramc.SchemaError, "not JSON"),
    (lambda: g.json_schema([1]), TypeError, "got list"),
    (lambda: g.seq(), ValueError, "at least one part"),
    (lambda: g.alt("a", 3), TypeError, "alt: part 2"),
    (lambda: g.literal(b"a"), TypeError, "literal: expected a str"),
    (lambda: g.repeat("a", 2, 1), ValueError, "max (1) is less than min (2)"),
    (lambda: g.repeat("a", -1, None), ValueError, "min must be"),
    (lambda: g.rule("1x", "a"), ValueError, "rule name"),
    (lambda: gramc.compile(g.seq("a", g.ref("missing"))), gramc.GrammarSyntaxError, "ref('missing') names no rule"),
    (lambda: gramc.compile(g.seq(g.rule("r", "a"), g.rule("r", "b"))), gramc.GrammarSyntaxError,
     "two different rules are named 'r'"),
    (lambda: gramc.compile(g.seq(g.rule("root", "a"), "b")), gramc.GrammarSyntaxError, "'root'"),
    (lambda: gramc.compile(g.regex("[a-")), gramc.GrammarSyntaxError, "regex '[a-'"),
    (lambda: gramc.compile(g.json_schema({"type": "nonsense"})), gramc.SchemaError, "nonsense"),
])
def test_bad_inputs_raise_clear_errors(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)


def test_the_api_docs_example_runs():
    text = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    section = text.split("## Composing grammars in Python", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    exec(compile(code.group(1), "docs/api.md", "exec"), {})


def test_deeply_nested_parts_hit_the_nesting_limit_not_the_python_stack():
    from gramc.limits import Limits

    part: g.Part = g.literal("a")
    for _ in range(3000):
        part = g.seq(part, "b")
    text = part.source()  # written without recursion
    assert text.startswith('{"seq":[' * 3000 + '{"literal":"a"}') and text.count('{"literal":"b"}') == 3000
    with pytest.raises(gramc.LimitExceededError, match="max_nesting"):
        gramc.compile(part)
    artifact = gramc.compile(part, vocab=VOCAB, limits=Limits(max_nesting=5000))
    assert _accepts(artifact, "a" + "b" * 3000) and not _accepts(artifact, "a" + "b" * 2999)
