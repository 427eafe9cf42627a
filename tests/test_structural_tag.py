"""The structural-tag frontend (format="structural_tag").

Each format's compiled language is compared with ``accepts``, a reference written here from
the format's definition: it shares no code with gramc's lowering. It reads a string directly,
position by position (free text scans for the first trigger with ``str.find``), and checks
JSON with ``json.loads`` + ``jsonschema``, regexes with Python's ``re``. Strings are every
string over a small alphabet up to a length, random strings, and mutations of positives.
Where xgrammar is installed its GrammarMatcher is a second, differential oracle.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from functools import lru_cache
from pathlib import Path

import jsonschema
import numpy as np
import pytest

import gramc
from gramc.errors import GrammarSyntaxError, SchemaError, UnsupportedFeatureError
from gramc.runtime.check import check_artifact

try:
    import xgrammar
except ImportError:  # the bench extra installs it
    xgrammar = None


# ---------------------------------------------------------------- the reference

WS = " \t\n\r"


def _object_pairs(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def _strict(schema):
    """``schema`` with ``additionalProperties: false`` wherever an object schema declares
    properties without saying (XGrammar's strict mode)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def json_ok(text: str, schema) -> bool:
    """``text`` is one JSON value valid under ``schema``, with object members in the
    schema's property order and no whitespace around it."""
    if not text or text[0] in WS or text[-1] in WS:
        return False
    try:
        value = json.loads(text, object_pairs_hook=_object_pairs, parse_constant=lambda c: 1 / 0)
    except (ValueError, ZeroDivisionError):
        return False
    if not jsonschema.Draft202012Validator(_strict(schema)).is_valid(value):
        return False
    return _in_order(value, schema)


def _in_order(value, schema) -> bool:
    if isinstance(value, dict) and isinstance(schema, dict):
        order = list(schema.get("properties", {}))
        seen = [order.index(k) for k in value if k in order]
        return seen == sorted(seen) and all(_in_order(v, schema.get("properties", {}).get(k, {}))
                                            for k, v in value.items())
    return True


class Reference:
    """Which strings a structural tag accepts, from the definition of its formats."""

    def __init__(self, doc: dict):
        self.doc = doc

    def accepts(self, s: str) -> bool:
        self.s = s
        self.memo: dict = {}
        if "format" in self.doc:
            root = self.doc["format"]
        else:  # the legacy form is triggered tags of JSON Schemas
            root = {"type": "triggered_tags", "triggers": self.doc["triggers"],
                    "tags": [{"type": "tag", "begin": x["begin"], "end": x["end"],
                              "content": {"type": "json_schema", "json_schema": x["schema"]}}
                             for x in self.doc["structures"]]}
        return len(s) in self.ends(root, 0, ())

    def ends(self, fmt: dict, i: int, stops: tuple[str, ...]) -> frozenset[int]:
        """Every j such that ``s[i:j]`` matches ``fmt``; free text avoids ``stops``."""
        key = (id(fmt), i, stops)
        if key not in self.memo:
            self.memo[key] = frozenset(getattr(self, "f_" + fmt["type"])(fmt, i, stops))
        return self.memo[key]

    def f_const_string(self, fmt, i, stops):
        return [i + len(fmt["value"])] if self.s.startswith(fmt["value"], i) else []

    def f_regex(self, fmt, i, stops):
        return [j for j in range(i, len(self.s) + 1) if re.fullmatch(fmt["pattern"], self.s[i:j])]

    def f_json_schema(self, fmt, i, stops):
        return [j for j in range(i + 1, len(self.s) + 1) if json_ok(self.s[i:j], fmt["json_schema"])]

    def f_grammar(self, fmt, i, stops):  # the tests' grammars are regexes written as EBNF
        pattern = GRAMMAR_AS_REGEX[fmt["grammar"]]
        return [j for j in range(i, len(self.s) + 1) if re.fullmatch(pattern, self.s[i:j])]

    def seq(self, items, i, stops):
        at = {i}
        for item in items:
            at = {j for p in at for j in self.ends(item, p, stops)}
        return at

    def f_sequence(self, fmt, i, stops):
        return self.seq(fmt["elements"], i, stops)

    def f_or(self, fmt, i, stops):
        return set().union(*(self.ends(e, i, stops) for e in fmt["elements"]))

    def repeat(self, item, i, stops, lo, hi):
        out, at, n = set(), {i}, 0
        while at and (hi is None or n <= hi):
            if n >= lo:
                out |= at
            at = {j for p in at for j in self.ends(item, p, stops) if j > p} - (out if n >= lo else set())
            n += 1
        return out

    def f_optional(self, fmt, i, stops):
        return self.repeat(fmt["content"], i, stops, 0, 1)

    def f_star(self, fmt, i, stops):
        return self.repeat(fmt["content"], i, stops, 0, None)

    def f_plus(self, fmt, i, stops):
        return self.repeat(fmt["content"], i, stops, 1, None)

    def f_repeat(self, fmt, i, stops):
        return self.repeat(fmt["content"], i, stops, fmt["min"], None if fmt["max"] == -1 else fmt["max"])

    def f_tag(self, fmt, i, stops):
        end = fmt["end"] if isinstance(fmt["end"], list) else [fmt["end"]]
        if not self.s.startswith(fmt["begin"], i):
            return []
        inner = tuple(e for e in end if e)
        return [j + len(e) for j in self.ends(fmt["content"], i + len(fmt["begin"]), inner)
                for e in end if self.s.startswith(e, j)]

    def free(self, i, avoid):
        """Every j such that ``s[i:j]`` contains none of ``avoid``."""
        return [j for j in range(i, len(self.s) + 1) if not any(a in self.s[i:j] for a in avoid if a)]

    def f_any_text(self, fmt, i, stops):
        out = self.free(i, [*fmt.get("excludes", []), *stops])
        cap = fmt.get("max_chars")
        return [j for j in out if cap is None or j - i <= cap]

    def f_tags_with_separator(self, fmt, i, stops):
        one = {"type": "or", "elements": fmt["tags"]}
        sep = {"type": "const_string", "value": fmt["separator"]}
        out = at = set(self.ends(one, i, stops))  # one (sep one)*, or one alone
        while at and not fmt.get("stop_after_first"):
            at = {k for p in at for j in self.ends(sep, p, stops) for k in self.ends(one, j, stops)} - out
            out = out | at
        return out if fmt.get("at_least_one") else out | {i}

    def f_triggered_tags(self, fmt, i, stops):
        triggers = fmt["triggers"]
        avoid = [*fmt.get("excludes", []), *stops]
        tags = fmt["tags"]

        def tag_at(p):
            return set().union(*(self.ends(t, p, ()) for t in tags))

        def segment(p):
            """(where free text from p may stop, where the tags it dispatches to end)."""
            firsts = [(p + self.s[p:].find(t) + len(t), t) for t in triggers if t in self.s[p:]]
            first_end = min((e for e, _ in firsts), default=None)
            limit = len(self.s) if first_end is None else first_end - 1
            stop_at = [j for j in self.free(p, avoid) if j <= limit]
            after = set()
            for e, t in firsts:
                start = e - len(t)
                if e == first_end and not any(a in self.s[p:start] for a in avoid if a):
                    after |= set().union(*(self.ends(x, start, ()) for x in tags if x["begin"].startswith(t)))
            return stop_at, after

        def loop(p):
            out, todo, seen = set(), [p], {p}
            while todo:
                stop_at, after = segment(todo.pop())
                out |= set(stop_at)
                for q in after - seen:
                    seen.add(q)
                    todo.append(q)
            return out

        first, stop = fmt.get("at_least_one"), fmt.get("stop_after_first")
        if first and stop:
            return tag_at(i)
        if first:
            return set().union(*(loop(q) for q in tag_at(i)))
        if stop:
            stop_at, after = segment(i)
            return set(stop_at) | after
        return loop(i)


    def f_dispatch(self, fmt, i, stops):
        """Dispatch is triggered tags whose tags are a pattern and its format, with no end;
        its free text is bounded by its excludes only, not by an enclosing tag's end."""
        patterns = [p for p, _ in fmt["rules"]]
        return self.f_triggered_tags({"type": "triggered_tags", "triggers": patterns,
                                      "excludes": fmt.get("excludes", []),
                                      "stop_after_first": not fmt.get("loop", True),
                                      "tags": [tag(p, content, "") for p, content in fmt["rules"]]}, i, ())

# ---------------------------------------------------------------- the cases

GRAMMAR_AS_REGEX = {'root ::= "x" rest\nrest ::= "y"*': "xy*"}


def st(fmt) -> dict:
    return {"type": "structural_tag", "format": fmt}


def C(v):
    return {"type": "const_string", "value": v}


def tag(begin, content, end):
    return {"type": "tag", "begin": begin, "content": content, "end": end}


ANY = {"type": "any_text"}
SMALL = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}},
         "required": ["a"]}
TAGS = [tag("<f=a>", C("1"), "</f>"), tag("<f=b>", ANY, "</f>")]

CASES = {
    "const": (st(C("ab<")), "ab<"),
    "regex": (st({"type": "regex", "pattern": "a[b<]*"}), "ab<"),
    "grammar": (st({"type": "grammar", "grammar": 'root ::= "x" rest\nrest ::= "y"*'}), "xya"),
    "json": (st({"type": "json_schema", "json_schema": SMALL}), '{"a}: 1'),
    "sequence": (st({"type": "sequence", "elements": [C("a"), ANY, C("b")]}), "ab<"),
    "or": (st({"type": "or", "elements": [C("a"), C("ab"), {"type": "regex", "pattern": "<+"}]}), "ab<"),
    "optional_star_plus": (st({"type": "sequence", "elements": [
        {"type": "optional", "content": C("a")}, {"type": "star", "content": C("b<")},
        {"type": "plus", "content": C("a")}]}), "ab<"),
    "repeat": (st({"type": "repeat", "min": 1, "max": 3, "content": C("ab")}), "ab<"),
    "repeat_unbounded": (st({"type": "repeat", "min": 2, "max": -1, "content": C("a")}), "ab"),
    "any_text": (st(ANY), "ab<"),
    "any_text_excludes": (st({"type": "any_text", "excludes": ["ab", "<<"]}), "ab<"),
    "any_text_max_chars": (st({"type": "any_text", "max_chars": 3, "excludes": ["b"]}), "ab"),
    "tag_any_text": (st(tag("<", ANY, "aa")), "ab<"),
    "tag_end_list": (st(tag("<", ANY, ["ab", "b<"])), "ab<"),
    "tag_in_sequence": (st(tag("<", {"type": "sequence", "elements": [ANY, C("a"), ANY]}, ">")), "ab<>"),
    "nested_tags": (st(tag("<", {"type": "sequence", "elements": [ANY, tag("a", ANY, "b"), ANY]}, ">")), "ab<>"),
    "triggered": (st({"type": "triggered_tags", "triggers": ["<a"],
                      "tags": [tag("<ab", ANY, ">"), tag("<aa", C("b"), "<")]}), "ab<>"),
    "triggered_overlap": (st({"type": "triggered_tags", "triggers": ["aa", "<"],
                              "tags": [tag("aab", C("<"), ""), tag("<", ANY, "b")]}), "ab<"),
    "triggered_excludes": (st({"type": "triggered_tags", "triggers": ["<"], "excludes": ["bb"],
                               "tags": [tag("<a", ANY, ">")]}), "ab<>"),
    "triggered_in_tag": (st(tag("a", {"type": "triggered_tags", "triggers": ["<"],
                                      "tags": [tag("<", C("a"), ">")]}, "b")), "ab<>"),
    "tags_with_separator": (st({"type": "tags_with_separator", "separator": "a",
                                "tags": [tag("<", ANY, ">"), tag("b", C("a"), "")]}), "ab<>"),
    "dispatch": (st({"type": "dispatch", "rules": [["<a", C("b")], [">", {"type": "regex", "pattern": "a*<"}]],
                     "excludes": ["bb"]}), "ab<>"),
    "dispatch_no_loop": (st({"type": "dispatch", "loop": False, "rules": [["<", C("a>")], ["b>", C("<")]]}),
                         "ab<>"),
    "dispatch_in_tag": (st(tag("a", {"type": "dispatch", "rules": [["<", C("a>")]]}, "b")), "ab<>"),
}
for first in (False, True):
    for stop in (False, True):
        CASES[f"triggered_flags_{int(first)}{int(stop)}"] = (
            st({"type": "triggered_tags", "triggers": ["<"], "at_least_one": first, "stop_after_first": stop,
                "tags": [tag("<a", C("b"), ">")]}), "ab<>")
        CASES[f"separator_flags_{int(first)}{int(stop)}"] = (
            st({"type": "tags_with_separator", "separator": "b", "at_least_one": first,
                "stop_after_first": stop, "tags": [tag("<", C("a"), ">")]}), "ab<>")


def strings(alphabet: str, positives: list[str], n: int = 400, seed: int = 0) -> list[str]:
    """Every string up to a length (6 letters for 3 symbols, 5 for 4), random longer ones,
    and each positive with one symbol changed, added or removed."""
    longest = 6 if len(alphabet) <= 3 else 5
    out = ["".join(p) for k in range(longest + 1) for p in itertools.product(alphabet, repeat=k)]
    rng = random.Random(seed)
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randint(7, 14))) for _ in range(n)]
    for p in positives:
        for k in range(len(p) + 1):
            for c in alphabet:
                out += [p[:k] + c + p[k + 1:], p[:k] + c + p[k:]]
            out.append(p[:k] + p[k + 1:])
    return list(dict.fromkeys(out))


@lru_cache(maxsize=None)
def compiled(source: str):
    return gramc.compile(source, format="structural_tag")


def accepted(source: str, s: str) -> bool:
    return check_artifact(compiled(source), s.encode()).ok


POSITIVES = {
    "json": ['{"a":1}', '{ "a" : 7 }', '{\n"a":0}'],
    "triggered": ["x<ab>y<aab<", "<aab<<abb>"],
    "triggered_in_tag": ["a<a><a>b", "ax<a>yb"],
    "tags_with_separator": ["<x>aba<>", "<>ab"],
    "dispatch": ["xa<ab>aa<b", "<ab><"],
    "dispatch_no_loop": ["ab<a>", "aab><"],
}


@pytest.mark.parametrize("name", CASES)
def test_language_matches_the_reference(name):
    doc, alphabet = CASES[name]
    source = json.dumps(doc)
    ref = Reference(doc)
    for s in strings(alphabet, POSITIVES.get(name, [])):
        assert accepted(source, s) == ref.accepts(s), (name, s)


def test_reference_is_not_vacuous():
    """Every case but plain any_text (all text) accepts some and rejects some of its strings."""
    for name, (doc, alphabet) in CASES.items():
        got = {Reference(doc).accepts(s) for s in strings(alphabet, POSITIVES.get(name, []), n=50)}
        assert got == ({True} if name == "any_text" else {True, False}), name


@pytest.mark.skipif(xgrammar is None, reason="xgrammar is not installed (pip install 'gramc[bench]')")
@pytest.mark.parametrize("name", CASES)
def test_agrees_with_xgrammar(name):
    doc, alphabet = CASES[name]
    grammar = xgrammar.Grammar.from_structural_tag(json.dumps(doc))
    source = json.dumps(doc)
    for s in strings(alphabet, POSITIVES.get(name, []), n=100, seed=1):
        assert accepted(source, s) == xgrammar.testing._is_grammar_accept_string(grammar, s), (name, s)


# ---------------------------------------------------------------- documents and errors


def test_legacy_form_is_triggered_tags_of_schemas():
    legacy = {"type": "structural_tag", "triggers": ["<f="],
              "structures": [{"begin": "<f=a>", "schema": SMALL, "end": "</f>"},
                             {"begin": "<f=b>", "schema": json.dumps({"type": "boolean"}), "end": "</f>"}]}
    current = st({"type": "triggered_tags", "triggers": ["<f="], "tags": [
        tag("<f=a>", {"type": "json_schema", "json_schema": SMALL}, "</f>"),
        tag("<f=b>", {"type": "json_schema", "json_schema": {"type": "boolean"}}, "</f>")]})
    assert compiled(json.dumps(legacy)).meta["ir"] == compiled(json.dumps(current)).meta["ir"]
    legacy["structures"][1]["schema"] = {"type": "boolean"}
    for s in ['hi <f=a>{"a": 3}</f> and <f=b>true</f>', '<f=a>{"a": 10}</f>', "<f=b>1</f>", "<f", "x"]:
        assert accepted(json.dumps(legacy), s) == Reference(legacy).accepts(s), s


def test_recursive_schemas_keep_their_rules_apart():
    """Two recursive schemas with the same definition names: a PDA whose embedded rules do
    not collide."""
    tree = {"$defs": {"node": {"type": "object", "properties": {"k": {"$ref": "#/$defs/node"}},
                               "additionalProperties": False}}, "$ref": "#/$defs/node"}
    lst = {"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
           "$ref": "#/$defs/node"}
    doc = st({"type": "sequence", "elements": [
        tag("<t>", {"type": "json_schema", "json_schema": tree}, "</t>"),
        tag("<l>", {"type": "json_schema", "json_schema": lst}, "</l>")]})
    art = compiled(json.dumps(doc))
    assert art.kind == "pda"
    ref = Reference(doc)
    for s in ['<t>{"k":{"k":{}}}</t><l>[[],[[]]]</l>', '<t>{}</t><l>[]</l>', '<t>{"k":[]}</t><l>[]</l>',
              '<t>{}</t><l>[[],[],[]]</l>', '<t>{"k":{"k":{"k":{}}}}</t><l>[[[[]]]]</l>']:
        assert accepted(json.dumps(doc), s) == ref.accepts(s), s


ERRORS = [
    ({"type": "structural_tag", "format": {"type": "bogus"}}, GrammarSyntaxError, "format.type"),
    ({"type": "structural_tag"}, GrammarSyntaxError, "missing field 'format'"),
    ({"type": "json_schema", "format": {}}, GrammarSyntaxError, "type: expected 'structural_tag'"),
    (st({"type": "tag", "begin": "a", "content": C("b")}), GrammarSyntaxError, "format: missing field 'end'"),
    (st({"type": "tag", "begin": 3, "content": C("b"), "end": "c"}), GrammarSyntaxError, "format.begin: expected"),
    (st({"type": "sequence", "elements": [C("a"), {"type": "or", "elements": []}]}), GrammarSyntaxError,
     "format.elements[1].elements"),
    (st({"type": "triggered_tags", "triggers": ["<f", "<g"], "tags": [tag("<f>", ANY, "e"), tag("<f=", ANY, "e"),
                                                                      tag("<x", ANY, "e")]}),
     GrammarSyntaxError, "format.tags[2].begin"),
    (st({"type": "triggered_tags", "triggers": ["<f", "<g"], "tags": [tag("<f>", ANY, "e")]}),
     GrammarSyntaxError, "format.triggers[1]"),
    (st({"type": "triggered_tags", "triggers": ["<f", ""], "tags": [tag("<f>", ANY, "e")]}),
     GrammarSyntaxError, "format.triggers[1]: a trigger must be a non-empty string"),
    (st({"type": "triggered_tags", "triggers": ["<", "<f"], "tags": [tag("<f>", ANY, "e")]}),
     GrammarSyntaxError, "format.tags[0].begin"),
    (st({"type": "tag", "begin": "a", "content": ANY, "end": ""}), GrammarSyntaxError, "format.content"),
    (st({"type": "any_text", "exclude": ["x"]}), GrammarSyntaxError, "format.exclude: unknown field"),
    (st({"type": "tags_with_separator", "tags": [tag("a", C("b"), "c")], "separator": ",",
         "at_least_one": "yes"}), GrammarSyntaxError, "format.at_least_one: expected a boolean"),
    (st({"type": "regex", "pattern": "a("}), GrammarSyntaxError, "format.pattern"),
    (st({"type": "json_schema", "json_schema": {"type": "nope"}}), SchemaError, "format.json_schema"),
    (st({"type": "dispatch", "rules": []}), GrammarSyntaxError, "format.rules: needs at least one rule"),
    (st({"type": "dispatch", "rules": [["", C("a")]]}), GrammarSyntaxError, "format.rules[0][0]"),
    (st({"type": "dispatch", "rules": [["<", C("a")], ["<a", C("b")]]}), UnsupportedFeatureError,
     "format.rules[0][0]: dispatch patterns inside one another"),
    (st({"type": "json_schema", "json_schema": {}, "style": "gemma"}), UnsupportedFeatureError, "gemma"),
    (st({"type": "any_text", "max_tokens": 5}), UnsupportedFeatureError, "max_tokens"),
    ({"type": "structural_tag", "triggers": ["<f"], "structures": [{"begin": "<g", "schema": {}, "end": "e"}]},
     GrammarSyntaxError, "structures[0].begin"),
]


@pytest.mark.parametrize("doc,error,where", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_errors_name_the_path(doc, error, where):
    with pytest.raises(error) as info:
        gramc.compile(json.dumps(doc), format="structural_tag", source_name="t.stag.json")
    assert where in str(info.value)
    assert "t.stag.json" in str(info.value)


def test_malformed_json_is_a_syntax_error():
    with pytest.raises(GrammarSyntaxError, match="line 1, column 2"):
        gramc.compile("{,}", format="structural_tag")


def test_file_suffix_selects_the_format():
    from gramc.cli.sources import detect_format

    assert detect_format("tools/call.stag.json", "auto") == "structural_tag"
    assert detect_format("schema.json", "auto") == "json_schema"


# ---------------------------------------------------------------- generation on gpt2

TOOLS = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                     "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                    "required": ["city", "days"]},
    "add": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"]},
}
TOOL_CALLS = st({"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
    tag(f'<tool_call>{{"name": "{name}", "arguments": ', {"type": "json_schema", "json_schema": schema},
        "}</tool_call>") for name, schema in TOOLS.items()]})
CALL = re.compile(r'<tool_call>\{"name": "(\w+)", "arguments": (.*?)\}</tool_call>', re.S)


def test_generated_tool_calls_validate():
    """Sampled on random logits (pushed towards the trigger's tokens at the start): every
    finished output is accepted by the reference, and every tool call's arguments validate
    against the tool's schema."""
    gpt2 = gramc.load_vocab("gpt2")
    art = gramc.compile(json.dumps(TOOL_CALLS), format="structural_tag", vocab=gpt2, lazy=True)
    lead = [gpt2.tokens.index(t) for t in (b"<", b"tool", b"_", b"call", b">")]
    calls = finished = 0
    for seed in range(12):
        def logits(ids, seed=seed):
            rng = np.random.default_rng(hash((seed, tuple(ids))) & 0xFFFFFFFF)
            x = rng.normal(size=gpt2.size).astype(np.float32)
            if seed % 2 and len(ids) < len(lead):
                x[lead[len(ids)]] += 20.0
            x[list(gpt2.eos_ids)] += 12.0 if len(ids) > 30 else 0.0
            return x
        r = gramc.generate(art, logits, vocab=gpt2, max_tokens=120, temperature=1.0, seed=seed)
        if r.stop_reason != "max_tokens":
            finished += 1
            assert Reference(TOOL_CALLS).accepts(r.data.decode("utf-8")), r.data
        for name, args in CALL.findall(r.data.decode("utf-8", errors="ignore")):
            jsonschema.validate(json.loads(args), TOOLS[name])
            calls += 1
    assert calls > 0 and finished > 0



def _steered_walk(target: bytes, allowed: np.ndarray, vocab, rng: random.Random) -> int:
    """A token allowed now: mostly one that spells the next bytes of ``target`` (so walks reach
    the calls), sometimes any allowed token (so they stray into other states)."""
    spelling = [t for t in np.flatnonzero(allowed).tolist()
                if t < len(vocab.tokens) and vocab.tokens[t] and target.startswith(vocab.tokens[t])]
    pool = spelling if spelling and rng.random() < 0.9 else np.flatnonzero(allowed).tolist()
    return rng.choice(pool)


def test_tool_call_masks_agree_eager_lazy_and_saved(tmp_path):
    """The masks of free text, delimiters and arguments are the same whether the tool-call tag
    is bound eagerly, lazily or read back from a file, by every fill path (the exact-width
    int32/uint32 fast path, a wider row, a bool mask), and a token is committed exactly when
    its bit is set, whether commits index dense next-state rows, search the sorted ones, or
    (``dense_row_bytes`` too small for every state's) do either by state."""
    from gramc import RuntimeLimits
    from gramc.bitmask import pack_dense

    gpt2 = gramc.load_vocab("gpt2")
    source = json.dumps(TOOL_CALLS)
    eager = gramc.compile(source, format="structural_tag", vocab=gpt2)
    eager.save(tmp_path / "tool_calls.gmask")
    searched = RuntimeLimits(dense_row_bytes=0)  # commits search the rows of ids
    partial = RuntimeLimits(dense_row_bytes=20 * 4 * gpt2.size)  # dense rows for the first 20 states
    arts = {"eager": eager, "lazy": gramc.compile(source, format="structural_tag", vocab=gpt2, lazy=True),
            "saved": gramc.load(tmp_path / "tool_calls.gmask", gpt2),
            "searched": gramc.load(tmp_path / "tool_calls.gmask", gpt2, runtime_limits=searched),
            "partial": gramc.load(tmp_path / "tool_calls.gmask", gpt2, runtime_limits=partial)}
    assert arts["lazy"].token_table.is_lazy and not arts["saved"].token_table.is_lazy
    words = (gpt2.size + 31) // 32
    rng = random.Random(20)
    states, steps = set(), 0
    for doc in range(6):
        city = rng.choice(["Paris", "Zürich", "São Paulo", "Oslo"])
        target = (f"Let me look that up{'.' * doc} <tool_call>{{\"name\": \"get_weather\", \"arguments\": "
                  f"{{\"city\": \"{city}\", \"days\": {doc + 1}}}}}</tool_call> and <tool_call>{{\"name\": \"add\", "
                  f"\"arguments\": {{\"x\": {doc - 2.5}, \"y\": {doc}}}}}</tool_call> done").encode()
        ms = {k: a.matcher() for k, a in arts.items()}
        for _ in range(len(target) + 4):
            masks = {}
            for k, m in ms.items():
                i32, u32, wide = np.zeros(words, np.int32), np.zeros(words, np.uint32), np.full(words + 3, -1, np.int32)
                m.fill_bitmask(i32)
                m.fill_bitmask(u32)
                m.fill_bitmask(wide)
                packed = pack_dense(m.mask()[None, :])[0]
                assert np.array_equal(i32.view(np.uint32), packed) and np.array_equal(u32, packed), k
                assert np.array_equal(wide[:words].view(np.uint32), packed) and not wide[words:].any(), k
                masks[k] = packed
            assert all(np.array_equal(masks["eager"], v) for v in masks.values())
            allowed = ms["eager"].mask()
            if not allowed.any():
                break
            probes = [rng.randrange(gpt2.size) for _ in range(8)] + rng.sample(np.flatnonzero(allowed).tolist(), 1)
            for m in ms.values():
                assert [m.validate_tokens([t]) == 1 for t in probes] == [bool(allowed[t]) for t in probes]
            token = _steered_walk(target, allowed, gpt2, rng)
            assert all(m.commit_token(token) for m in ms.values())
            if token < len(gpt2.tokens) and target.startswith(gpt2.tokens[token]):
                target = target[len(gpt2.tokens[token]):]
            states.add(ms["eager"].state)
            steps += 1
    assert steps > 600 and len(states) > 80  # the walks went through calls, not only free text
    dense = {k: sum(row is not None for row in a.token_table._dense) for k, a in arts.items()}
    assert dense["searched"] == 0 and dense["partial"] == 20 and dense["saved"] > 80  # every commit path

def test_example_file_compiles_from_the_command_line(tmp_path):
    """examples/tool_call.stag.json: `gramc compile` picks the format from the suffix, and
    `gramc check` agrees with the reference on a call, free text and a wrong argument."""
    from click.testing import CliRunner

    from gramc.cli.main import main

    example = Path(__file__).resolve().parents[1] / "examples" / "tool_call.stag.json"
    out = tmp_path / "tool_call.gmask"
    res = CliRunner().invoke(main, ["compile", str(example), "--vocab", "none", "-o", str(out)])
    assert res.exit_code == 0, res.output
    ref = Reference(json.loads(example.read_text()))
    for text in ['Sure. <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
                 'No call needed.', '<tool_call>{"name": "get_time", "arguments": {"city": "Paris"}}</tool_call>',
                 '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "kelvin"}}</tool_call>']:
        data = tmp_path / "text.txt"
        data.write_text(text)
        res = CliRunner().invoke(main, ["check", str(out), str(data)])
        assert (res.exit_code == 0) == ref.accepts(text), text


def test_token_delimiters_are_special_tokens():
    """A ``token`` begin or end is matched by id, never by its bytes; a name is resolved
    against the vocabulary's special tokens."""
    from gramc.compiler.frontends.structural_tag import parse_structural_tag
    from gramc.compiler.ir import Token, TokenName, walk

    doc = st(tag({"type": "token", "token": 7}, C("x"), {"type": "token", "token": "<|endoftext|>"}))
    leaves = set(walk(parse_structural_tag(json.dumps(doc)).rules["root"]))
    assert Token(7) in leaves and TokenName("<|endoftext|>") in leaves
    gpt2 = gramc.load_vocab("gpt2")
    m = gramc.compile(json.dumps(doc), format="structural_tag", vocab=gpt2).matcher()
    assert m.allowed_tokens().tolist() == [7]
    assert m.commit_token(7) and m.commit_token(gpt2.tokens.index(b"x"))
    assert m.allowed_tokens().tolist() == [50256]


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
           "required": ["city"]}
FAMILIES = {
    "llama3_json": st({"type": "triggered_tags", "triggers": ['{"name": '], "tags": [
        tag('{"name": "get_weather", "parameters": ', {"type": "json_schema", "json_schema": WEATHER}, "}")]}),
    "hermes_qwen": st({"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
        tag('<tool_call>\n{"name": "get_weather", "arguments": ', {"type": "json_schema", "json_schema": WEATHER},
            "}\n</tool_call>")]}),
    "function_tag": st({"type": "triggered_tags", "triggers": ["<function="], "stop_after_first": True, "tags": [
        tag("<function=get_weather>", {"type": "json_schema", "json_schema": WEATHER}, "</function>")]}),
}
PIECES = {
    "llama3_json": ['{"name": ', '"get_weather", "parameters": ', '{"city": "Rome"}', '{"days": 2}', "}", "Hi ",
                    '{"city": "x", "days": 1}', "{", '"', " "],
    "hermes_qwen": ["<tool_call>", '\n{"name": "get_weather", "arguments": ', '{"city": "Rome"}', "}\n</tool_call>",
                    "ok ", "<tool", "{}", "\n", '{"city":"a","days":-3}'],
    "function_tag": ["<function=", "get_weather>", '{"city": "Rome"}', "</function>", "text ", "<func", '{"x": 1}',
                     "<function=get_weather>"],
}


@pytest.mark.skipif(xgrammar is None, reason="xgrammar is not installed (pip install 'gramc[bench]')")
@pytest.mark.parametrize("family", FAMILIES)
def test_tool_call_tags_agree_with_xgrammar(family):
    """Tool-call tags of three model families: gramc and XGrammar accept the same strings
    among random concatenations of the tags' pieces (calls, broken calls, free text)."""
    doc = FAMILIES[family]
    grammar = xgrammar.Grammar.from_structural_tag(json.dumps(doc))
    rng = random.Random(family)
    texts = {"".join(rng.choice(PIECES[family]) for _ in range(rng.randint(0, 6))) for _ in range(600)}
    verdicts = set()
    for s in sorted(texts):
        mine = accepted(json.dumps(doc), s)
        assert mine == xgrammar.testing._is_grammar_accept_string(grammar, s), s
        assert mine == Reference(doc).accepts(s), s
        verdicts.add(mine)
    assert verdicts == {True, False}
