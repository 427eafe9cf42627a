"""PDA masks on the real gpt2 vocabulary equal a brute-force Earley oracle.

The oracle walks its own dict trie of the vocabulary depth-first, extending an independent
Earley chart (tests/earley.py) byte by byte and pruning dead prefixes; a token is allowed when
its last byte leaves a non-empty chart. Nothing is shared with gramc's binding, expanded
automata or runtime parser.
"""

from __future__ import annotations

import numpy as np
import pytest

import gramc
from earley import EarleyOracle
from gramc.compiler.frontends.gbnf import parse_gbnf
from paths import shared_path

PARENS = 'root ::= "" | "(" root ")" root'
ARITH = '''
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" ws expr ws ")"
ws ::= " "?
'''


def _trie(vocab) -> dict:
    root: dict = {}
    for i, tok in enumerate(vocab.tokens):
        if i in vocab.special_ids or not tok:
            continue
        node = root
        for b in tok:
            node = node.setdefault(b, {})
        node.setdefault(None, []).append(i)
    return root


def brute_force(oracle: EarleyOracle, chart, trie, vocab) -> np.ndarray:
    mask = np.zeros(vocab.size, dtype=bool)
    stack = [(trie, chart)]
    while stack:
        node, ch = stack.pop()
        for b, child in node.items():
            if b is None:
                continue
            nxt = oracle.step(ch, b)
            if nxt[-1]:
                mask[child.get(None, [])] = True
                stack.append((child, nxt))
    if oracle.is_complete(chart):
        mask[list(vocab.eos_ids)] = True
    return mask


@pytest.fixture(scope="module")
def gpt2():
    vocab = gramc.load_vocab("gpt2")
    return vocab, _trie(vocab)


def walk(text: str, gpt2, tokens_or_steps, seed=0):
    vocab, trie = gpt2
    oracle = EarleyOracle(parse_gbnf(text))
    m = gramc.compile(text, format="gbnf", vocab=vocab).matcher()
    chart = oracle.initial()
    rng = np.random.default_rng(seed)
    for step in range(tokens_or_steps if isinstance(tokens_or_steps, int) else len(tokens_or_steps)):
        expected = brute_force(oracle, chart, trie, vocab)
        got = m.mask()
        bad = np.flatnonzero(got != expected)
        assert not len(bad), (step, [(int(t), vocab.tokens[t], bool(got[t])) for t in bad[:8]])
        if isinstance(tokens_or_steps, int):
            choices = [t for t in np.flatnonzero(expected) if t not in vocab.eos_ids]
            if not choices:
                return
            t = int(rng.choice(choices))
        else:
            t = tokens_or_steps[step]
            assert expected[t]
        assert m.commit_token(t)
        chart = oracle.feed(chart, vocab.tokens[t])


@pytest.mark.parametrize("seed", range(3))
def test_balanced_brackets_on_gpt2(gpt2, seed):
    walk(PARENS, gpt2, 10, seed)


@pytest.mark.parametrize("seed", range(3))
def test_arithmetic_with_nested_parentheses_on_gpt2(gpt2, seed):
    walk(ARITH, gpt2, 10, seed)


@pytest.mark.slow
def test_llama_cpp_json_grammar_on_gpt2(gpt2):
    vocab, _ = gpt2
    text = shared_path("corpora", "gbnf", "json.gbnf").read_text()
    doc = b'{"a": [1, -2.5e3, {"b": null}], "c\\u0041": true}'
    by_bytes = {t: i for i, t in enumerate(vocab.tokens) if i not in vocab.special_ids}
    tokens, pos = [], 0
    while pos < len(doc):  # greedy longest-match tokenisation: any valid split will do
        end = max(e for e in range(pos + 1, min(len(doc), pos + 12) + 1) if doc[pos:e] in by_bytes)
        tokens.append(by_bytes[doc[pos:end]])
        pos = end
    walk(text, gpt2, tokens)


@pytest.mark.parametrize("source", ["json.gbnf", "schema"])
def test_regions_built_one_token_deep_give_the_same_node_rows(gpt2, source):
    """Built only as far from each node as the longest token reads (breadth first, states
    met nearer later built on), the expansion binds every node to the rows of the whole
    regions; with a string's maxLength chain it is far smaller."""
    import json

    from gramc.automata.pda_bind import LazyExpansion, bind_nodes, expand
    from gramc.automata.trie import trie_for
    from gramc.compiler.passes import optimize
    from gramc.compiler.pda import build_pda

    if source == "schema":
        schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 400},
                                                   "b": {"type": "array", "items": {"$ref": "#"}}}}
        table = gramc.compile(json.dumps(schema), format="json_schema").pda
    else:
        table = build_pda(optimize(parse_gbnf(shared_path("corpora", "gbnf", source).read_text())))
    trie = trie_for(gpt2[0])
    nodes = np.arange(1, table.n_nodes)
    whole = expand(table, 2)
    near = expand(table, 2, reach=trie.max_len)
    lazy = LazyExpansion(table, 2, reach=trie.max_len)
    lazy_rows = [bind_nodes(table, trie, np.array([n]), 2, lazy.automaton_for(n)) for n in nodes.tolist()[::-1]]
    a, b = bind_nodes(table, trie, nodes, 2, whole), bind_nodes(table, trie, nodes, 2, near)
    assert np.array_equal(a.accepted, b.accepted)
    assert np.array_equal(a.unc_indptr, b.unc_indptr) and np.array_equal(a.unc_ids, b.unc_ids)
    for k, row in zip(nodes.tolist()[::-1], lazy_rows):
        i = k - 1
        assert np.array_equal(row.accepted[0], a.accepted[i])
        assert np.array_equal(row.unc_ids, a.unc_ids[a.unc_indptr[i]:a.unc_indptr[i + 1]])
    if source == "schema":
        assert len(near.delta) < 0.6 * len(whole.delta), (len(near.delta), len(whole.delta))


@pytest.mark.parametrize("max_states", [50_000, 800, 40])
def test_lazy_expansion_gives_the_global_node_rows(gpt2, max_states):
    """Lazy binding grows the expanded automaton one node region at a time. With room for
    the whole expansion, every node's accepted/uncertain rows equal the global ones; with a
    tiny budget (regions built afresh, then at smaller depths, down to the node's own rule,
    or no region at all) accepted tokens can only move to uncertain, never appear or vanish:
    the runtime check keeps masks exact either way."""
    from gramc.automata.pda_bind import OWN_RULE, LazyExpansion, bind_nodes, expand
    from gramc.automata.trie import trie_for
    from gramc.compiler.passes import optimize
    from gramc.compiler.pda import build_pda

    table = build_pda(optimize(parse_gbnf(shared_path("corpora", "gbnf", "json.gbnf").read_text())))
    trie = trie_for(gpt2[0])
    nodes = np.arange(1, table.n_nodes)
    whole = bind_nodes(table, trie, nodes, 2, expand(table, 2))
    lazy = LazyExpansion(table, 2, max_states)
    depths, unbounded = set(), 0
    for k, n in enumerate(nodes.tolist()):
        x = lazy.automaton_for(n)
        depths.add(lazy.current.depth)
        if x is None:  # the runtime treats every token as uncertain there
            unbounded += 1
            continue
        row = bind_nodes(table, trie, np.array([n]), 2, x)
        want_acc = np.unpackbits(whole.accepted[k].view(np.uint8), bitorder="little")
        got_acc = np.unpackbits(row.accepted[0].view(np.uint8), bitorder="little")
        want_unc = set(whole.unc_ids[whole.unc_indptr[k]:whole.unc_indptr[k + 1]].tolist())
        got_unc = set(row.unc_ids.tolist())
        if max_states == 50_000:
            assert np.array_equal(got_acc, want_acc) and got_unc == want_unc, n
        else:  # depth-2 regions of json.gbnf reach 1,524 states: some nodes get depth 1
            assert not (got_acc & ~want_acc).any(), n  # nothing newly accepted
            want_any = set(np.flatnonzero(want_acc).tolist()) | want_unc
            assert want_any <= set(np.flatnonzero(got_acc).tolist()) | got_unc, n
    assert (OWN_RULE in depths and unbounded > 0) == (max_states == 40), (depths, unbounded)


def test_lazy_artifacts_bind_shallower_give_the_same_masks_and_write_the_eager_bytes(gpt2):
    """A lazy table stores no node rows (nor configuration masks) and binds them at run time at LAZY_DEPTH (more
    uncertain tokens, checked on the stack): the masks along a document are the eager ones,
    and writing gives the eager artifact's bytes."""
    vocab, _ = gpt2
    text = shared_path("corpora", "gbnf", "json.gbnf").read_text()
    eager = gramc.compile(text, format="gbnf", vocab=vocab)
    lazy = gramc.compile(text, format="gbnf", vocab=vocab, lazy=True)
    assert eager.token_table.strategies == ("stored_configs", "stored_rows", "walk", "rows")
    assert lazy.token_table.strategies == ("walk", "rows")
    nodes = range(1, eager.pda.n_nodes)
    stored = [len(eager.token_table.node_row(n)[1]) for n in nodes]
    bound = [len(lazy.token_table.node_row(n)[1]) for n in nodes]
    assert all(b >= s for b, s in zip(bound, stored)) and sum(bound) > sum(stored)
    a, b = eager.matcher(), lazy.matcher()
    for piece in [b'{"', b"key", b'":', b" [", b"1", b",", b' "x', b'\\n', b'"', b"],", b' "b', b'":', b"{}", b"}"]:
        assert np.array_equal(a.mask(), b.mask()), piece
        assert a.commit_bytes(piece) and b.commit_bytes(piece)
    assert np.array_equal(a.mask(), b.mask()) and a.is_complete()
    assert lazy.to_bytes() == eager.to_bytes()


TREE_SCHEMA = """{"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 20},
  "size": {"type": "integer"},
  "children": {"type": "array", "items": {"$ref": "#"}}},
  "required": ["name"], "additionalProperties": false}"""


@pytest.mark.parametrize("name, fmt", [("json.gbnf", "gbnf"), ("arithmetic.gbnf", "gbnf"), ("tree", "json_schema")])
def test_a_lazy_compile_and_a_loaded_artifact_give_identical_masks(gpt2, name, fmt):
    """The same engine with and without precomputed masks: an in-memory lazy compile and
    the artifact `gramc compile` writes, loaded with the decoder's vocabulary (which it shares
    rather than decoding its stored copy), agree on every mask of random walks."""
    vocab, _ = gpt2
    text = TREE_SCHEMA if fmt == "json_schema" else shared_path("corpora", "gbnf", name).read_text()
    lazy = gramc.compile(text, format=fmt, vocab=vocab, lazy=True)
    loaded = gramc.from_bytes(gramc.compile(text, format=fmt, vocab=vocab).to_bytes(), vocab=vocab)
    assert loaded.kind == lazy.kind == "pda"
    assert loaded.token_table.vocab is vocab and not loaded.is_lazy and lazy.is_lazy
    rng = np.random.default_rng(len(name))
    for walk_no in range(4):
        a, b = lazy.matcher(), loaded.matcher()
        for step in range(40):
            ma, mb = a.mask(), b.mask()
            bad = np.flatnonzero(ma != mb)
            assert not len(bad), (walk_no, step, [(int(t), vocab.tokens[t]) for t in bad[:6]])
            choices = [t for t in np.flatnonzero(ma).tolist() if t not in vocab.eos_ids]
            if not choices:
                break
            t = int(rng.choice(choices))
            assert a.commit_token(t) and b.commit_token(t)
    assert lazy.token_table.served["walk"] > 0 and loaded.token_table.served["stored_configs"] > 0
