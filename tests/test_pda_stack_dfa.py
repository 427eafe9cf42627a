"""The stack DFA that checks uncertain PDA tokens agrees with the Earley parser, token by token.

At each step of random walks over real grammars and the gpt2 vocabulary, every byte token is
checked both ways: :meth:`StackDFA.accepts` (configuration sets stepped by array gathers) and
the Earley parser reading the token's bytes from the same chart. The full-mask comparison with
an independent oracle is in tests/test_pda_real_vocab.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gramc
from gramc.automata.pda_table import _has_cycle
from gramc.runtime import pda_slices, pda_stack_dfa
from gramc.automata.trie import trie_for
from gramc.bitmask import n_words, unpack_row
from gramc.runtime.pda_slices import NodeSlices, _loop_components, _on_short_cycles, _shape
from gramc.runtime.pda_stack_dfa import StackDFA
from paths import shared_path

PARENS = 'root ::= "" | "(" root ")" root'
TREE_SCHEMA = json.dumps({
    "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                       "required": ["v"]}},
    "$ref": "#/$defs/node",
})
NAMED_TREE_SCHEMA = json.dumps({
    "$defs": {"node": {"type": "object", "properties": {
        "name": {"type": "string"}, "tag": {"type": "string", "pattern": "^[a-z]+(-[a-z0-9]+)*$"},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["name"]}},
    "$ref": "#/$defs/node",
})
LEFT_RECURSIVE_LARK = 'start: expr\nexpr: expr "+" NUM | NUM\nNUM: /[0-9]+/\n'


@pytest.fixture(scope="module")
def gpt2():
    return gramc.load_vocab("gpt2")


def _earley_accepts(table, chart, ids) -> np.ndarray:
    ok = set(table._check(chart, np.asarray(ids)))
    return np.array([t in ok for t in ids.tolist()], dtype=bool)


def _walk_and_compare(art, vocab, steps: int, seed: int, sample: int = 6000) -> int:
    table = art.token_table
    assert "walk" in table.strategies
    stack = StackDFA(table.table, table.parser, table.vocab, table.limits)
    byte_ids = np.array([i for i in range(vocab.size) if i not in vocab.special_ids and vocab.tokens[i]])
    trie = trie_for(vocab)
    rng = np.random.default_rng(seed)
    m = art.matcher()
    compared = 0
    for _ in range(steps):
        chart = m._state
        key = table.parser.key(chart)
        ids = np.sort(rng.choice(byte_ids, size=min(sample, len(byte_ids)), replace=False))
        got = stack.accepts(key, ids)
        want = _earley_accepts(table, chart, ids)
        bad = np.flatnonzero(got != want)
        assert not len(bad), [(int(ids[i]), vocab.tokens[ids[i]], bool(got[i])) for i in bad[:8]]
        few = np.concatenate([ids[want][:8], ids[~want][:24]])  # again, on transitions built above
        assert np.array_equal(stack.accepts(key, few), np.isin(few, ids[want]))
        # The whole-vocabulary walk (lazy masks), on this DFA and on a fresh one that builds
        # every state it needs during the walk.
        everything = byte_ids[stack.accepts(key, byte_ids)]
        fresh = StackDFA(table.table, table.parser, table.vocab, table.limits)
        for walker in (stack, fresh):
            words = np.zeros(n_words(vocab.size), dtype=np.uint32)
            walker.allowed(key, trie, words)
            assert np.array_equal(np.flatnonzero(unpack_row(words, vocab.size)), everything)
        compared += int(want.sum())
        allowed = [t for t in np.flatnonzero(m.mask()) if t not in vocab.eos_ids]
        if not allowed:
            break
        assert m.commit_token(int(rng.choice(allowed)))
    return compared


@pytest.mark.parametrize("seed", range(3))
def test_agrees_with_earley_on_balanced_brackets(gpt2, seed):
    art = gramc.compile(PARENS, format="gbnf", vocab=gpt2)
    assert _walk_and_compare(art, gpt2, 12, seed) > 0


@pytest.mark.parametrize("seed", range(2))
def test_agrees_with_earley_on_llama_cpp_json(gpt2, seed):
    art = gramc.compile(shared_path("corpora", "gbnf", "json.gbnf").read_text(), format="gbnf", vocab=gpt2)
    assert _walk_and_compare(art, gpt2, 15, seed) > 0


@pytest.mark.parametrize("seed", range(2))
def test_agrees_with_earley_on_a_recursive_schema(gpt2, seed):
    art = gramc.compile(TREE_SCHEMA, format="json_schema", vocab=gpt2)
    assert art.kind == "pda"
    assert _walk_and_compare(art, gpt2, 20, seed) > 0


@pytest.mark.parametrize("seed", range(3))
def test_node_slices_and_string_body_loops_stay_exact(gpt2, seed, monkeypatch):
    """Whole-vocabulary walks that start from each node's precomputed stack-free tokens and
    walk only the tokens reaching past an exit are still equal, token by token, to the
    per-token check; string bodies (loops) are met on the way and share their slice."""
    loops = []
    slice_for = NodeSlices.slice_for

    def spy(self, node):
        found = slice_for(self, node)
        loops.append(bool(self._comp[node] >= 0 and found is not None and len(found.exits)))
        return found

    monkeypatch.setattr(NodeSlices, "slice_for", spy)
    art = gramc.compile(NAMED_TREE_SCHEMA, format="json_schema", vocab=gpt2)
    assert art.kind == "pda"
    assert _walk_and_compare(art, gpt2, 30, seed) > 0
    assert any(loops)


@pytest.mark.parametrize("seed", range(3))
def test_entry_slices_patch_the_first_bytes_that_differ(gpt2, seed, monkeypatch):
    """A node entering a string body whose first byte may also start a declared property name
    takes the loop head's slice and walks only the tokens of the differing first bytes: masks
    stay equal, token by token, to the per-token check."""
    from gramc.compiler.pipeline import CompileOptions

    patched = []
    entry_slice = NodeSlices._entry_slice

    def spy(self, row):
        found = entry_slice(self, row)
        # Patched: a new slice, not the loop node's own (kept already) returned as it is.
        patched.append(found is not None and all(found is not kept for kept in self._by_node.values()))
        return found

    monkeypatch.setattr(NodeSlices, "_entry_slice", spy)
    # The base slice's tokens are kept by clearing the other first bytes or, where the entry
    # node reads few of the loop's bytes, by copying the shared ones.
    kept = []
    for name in ("_clear_ranges", "_copy_ranges"):
        def counted(words, source_or_ids, *args, _name=name, _kernel=getattr(pda_slices, name)):
            kept.append(_name)
            return _kernel(words, source_or_ids, *args)
        monkeypatch.setattr(pda_slices, name, counted)

    def tree(pattern: str):
        """A recursive any-order schema whose required "v" string matches ``pattern``."""
        schema = json.dumps({"$defs": {"node": {"type": "object", "properties": {
            "v": {"type": "string", "pattern": pattern},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "required": ["v"], "additionalProperties": False}}, "$ref": "#/$defs/node"})
        art = gramc.compile(schema, format="json_schema", vocab=gpt2,
                            options=CompileOptions(json_property_order="any"))
        assert art.kind == "pda"
        return art

    # "v" strings start either a letter loop or "." (and GPT-2 has '.",': read past the exit).
    assert _walk_and_compare(tree("^(\\.|[a-z]+)$"), gpt2, 30, seed) > 0
    assert any(patched) and "_clear_ranges" in kept
    # Strings that enter their letter loop on "a" only: the tokens starting with "a" are copied.
    kept.clear()
    assert _walk_and_compare(tree("^a[a-z]*$"), gpt2, 30, seed) > 0
    assert "_copy_ranges" in kept


def test_loop_shapes_are_shared_across_tables_of_one_vocabulary(gpt2, monkeypatch):
    """A string body walked for one schema is reused by another schema whose table has other
    byte classes (shapes are keyed per byte, per vocabulary): its masks stay exact."""
    import weakref

    from gramc.runtime import pda_slices

    from gramc.runtime.cache import LRUCache

    class Recording(LRUCache):
        hits: list = []

        def get(self, key, default=None):
            if key in self:
                self.hits.append(key)
            return super().get(key, default)

    shapes = Recording(1024)
    monkeypatch.setattr(pda_slices, "_SHAPES", weakref.WeakKeyDictionary({trie_for(gpt2): shapes}))
    first = gramc.compile(NAMED_TREE_SCHEMA, format="json_schema", vocab=gpt2)
    assert _walk_and_compare(first, gpt2, 20, 0) > 0
    walked_first = set(shapes)
    assert walked_first
    other = json.dumps({"$defs": {"item": {"type": "object", "properties": {
        "note": {"type": "string"}, "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]$"},
        "items": {"type": "array", "items": {"$ref": "#/$defs/item"}}}, "required": ["note"]}},
        "$ref": "#/$defs/item"})
    second = gramc.compile(other, format="json_schema", vocab=gpt2)
    assert not np.array_equal(first.token_table.table.byte_class, second.token_table.table.byte_class)
    shapes.hits.clear()
    assert _walk_and_compare(second, gpt2, 20, 0) > 0
    assert walked_first & set(shapes.hits)


def test_node_slices_stay_exact_when_dropped_for_memory(gpt2, monkeypatch):
    """Past RuntimeLimits.node_slices the least recently used slices are dropped and made
    afresh when met again: masks stay exact and the kept slices stay bounded."""
    kept = []
    make = NodeSlices._make

    def spy(self, node):
        kept.append(len(self._by_node))
        return make(self, node)

    monkeypatch.setattr(NodeSlices, "_make", spy)
    art = gramc.compile(NAMED_TREE_SCHEMA, format="json_schema", vocab=gpt2,
                        runtime_limits=gramc.RuntimeLimits(node_slices=2))
    assert _walk_and_compare(art, gpt2, 20, 1) > 0
    assert len(kept) > 2 and max(kept) <= 2  # more than 2 made, at most 2 kept


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9).flatmap(lambda n: st.lists(st.lists(st.integers(0, n - 1), min_size=3, max_size=3),
                                                    min_size=n, max_size=n)), st.integers(1, 5))
def test_short_cycle_transitions_are_those_on_a_cycle_that_short(rows, max_cycle):
    """A transition u -> v is kept exactly when some path leads from v back to u in at most
    ``max_cycle - 1`` transitions (node 0, DEAD, has no transitions)."""
    succ = np.array(rows, dtype=np.int32)
    succ[0] = 0
    n = len(succ)
    within = [{u} for u in range(n)]  # within[u]: nodes reaching u in at most d steps
    for _ in range(max_cycle - 1):
        within = [within[u] | {a for a in range(n) for b in succ[a] if b and b in within[u]} for u in range(n)]
    got = _on_short_cycles(succ, max_cycle)
    for u in range(n):
        for c in range(succ.shape[1]):
            v = int(succ[u, c])
            assert got[u, c] == (v if v and v in within[u] else 0), (u, c)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.lists(st.lists(st.integers(0, n - 1), min_size=3, max_size=3), min_size=n, max_size=n),
    st.lists(st.booleans(), min_size=n, max_size=n))))
def test_loops_are_the_strongly_connected_plain_nodes(graph):
    """Loop ids against the definition: two plain nodes share a loop exactly when each reaches
    the other through plain nodes, and a node is in a loop when it reaches itself."""
    rows, plain = graph
    succ = np.array(rows, dtype=np.int32)
    plain = np.array(plain, dtype=np.bool_)
    plain[0] = False  # node 0 is DEAD
    n = len(succ)
    reach = np.zeros((n, n), dtype=bool)  # reach[a, b]: a path of one or more plain steps
    for a in range(n):
        for b in succ[a]:
            reach[a, b] = plain[a] and plain[b]
    for k in range(n):
        reach |= reach[:, k : k + 1] & reach[k : k + 1, :]
    comp = _loop_components(succ, plain)
    for a in range(n):
        assert (comp[a] >= 0) == bool(reach[a, a])
        for b in range(n):
            if comp[a] >= 0 and comp[b] >= 0:
                assert (comp[a] == comp[b]) == bool(reach[a, b] and reach[b, a])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=300))
def test_distinct_exit_nodes_are_np_unique_with_inverse(values):
    from gramc.runtime.pda_slices import _distinct

    array = np.array(values, dtype=np.int64)
    nodes, at = _distinct(array)
    expected, inverse = np.unique(array, return_inverse=True)
    assert nodes.tolist() == expected.tolist() and at.tolist() == inverse.tolist()


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 9).flatmap(lambda n: st.tuples(
    st.lists(st.lists(st.integers(0, n - 1), min_size=3, max_size=3), min_size=n, max_size=n),
    st.lists(st.booleans(), min_size=n, max_size=n), st.integers(1, n - 1))))
def test_loop_shapes_are_the_loop_renumbered_from_the_node(graph):
    """A loop's shape read back: local state 1 is the node, each local row is its node's row
    (members by local number, other nodes as numbered exits), local numbers and exits appear
    in scan order (so isomorphic loops get equal shapes), and the scratch is left clean."""
    rows, plain, node = graph
    succ = np.array(rows, dtype=np.int32)
    plain = np.array(plain, dtype=np.bool_)
    plain[0] = False
    comp = _loop_components(succ, plain)
    loops = np.unique(comp[np.append(succ[node], node)])
    loops = loops[loops >= 0]
    member = np.isin(comp, loops) & (comp >= 0)
    scratch = np.full(len(succ), -1, dtype=np.int64)
    local, targets = _shape(succ, comp, loops.astype(np.int64), node, scratch)
    assert (scratch == -1).all()
    m = len(local)
    nodes = {1: node}  # local number -> node, read back from the rows
    seen_local, seen_exit = [1], []
    for i in range(1, m + 1):
        assert i in nodes, "local states are numbered in scan order"
        for c, t in enumerate(succ[nodes[i]].tolist()):
            got = int(local[i - 1, c])
            if t == 0:
                assert got == 0
            elif member[t]:
                assert 1 <= got <= m and nodes.setdefault(got, t) == t
                if got not in seen_local:
                    assert got == len(seen_local) + 1
                    seen_local.append(got)
            else:
                assert got > m and targets[got - m - 1] == t
                if got not in seen_exit:
                    assert got == m + 1 + len(seen_exit)
                    seen_exit.append(got)
    assert len(set(nodes.values())) == m
    assert len(targets) == len(seen_exit) == len(set(targets.tolist()))  # one exit per node


def test_a_dropped_return_is_caught(gpt2, monkeypatch):
    """The comparison can fail: a closure that forgets returns disagrees with Earley."""
    art = gramc.compile(PARENS, format="gbnf", vocab=gpt2)

    def close_without_returns(self, seeds):
        out, work = set(), list(seeds)
        while work:
            n, k = cfg = work.pop()
            if cfg not in out:
                out.add(cfg)
                work.extend((self._rule_start[r], self.parser.intern(frozenset(((ret, k),))))
                            for r, ret in self._calls[n])
        return frozenset(out)

    monkeypatch.setattr(StackDFA, "_close", close_without_returns)
    with pytest.raises(AssertionError):
        _walk_and_compare(art, gpt2, 12, 0)


def test_states_are_reused_across_masks(gpt2):
    art = gramc.compile(PARENS, format="gbnf", vocab=gpt2)
    table = art.token_table
    stack = StackDFA(table.table, table.parser, table.vocab, table.limits)
    ids = np.arange(gpt2.size)
    ids = ids[[bool(gpt2.tokens[i]) and i not in gpt2.special_ids for i in ids]]
    key = table.parser.key(art.matcher()._state)
    first = stack.accepts(key, ids)
    n_states = len(stack._states)
    assert np.array_equal(stack.accepts(key, ids), first)
    assert len(stack._states) == n_states  # nothing new to build


def test_masks_stay_exact_when_the_dfa_is_dropped_or_a_state_is_too_large(gpt2, monkeypatch):
    text = 'root ::= "[" (root ("," root)*)? "]" | [a-z]+'
    doc = b"[[ab,[c]],[],[[d,e],f]]"
    reference = _masks_along(gramc.compile(text, format="gbnf", vocab=gpt2), gpt2, doc)

    def masks(lazy):
        return _masks_along(gramc.compile(text, format="gbnf", vocab=gpt2, lazy=lazy), gpt2, doc)

    for lazy in (False, True):  # lazy tables walk the stack DFA for whole masks
        assert masks(lazy) == reference
        tiny = _masks_along(gramc.compile(text, format="gbnf", vocab=gpt2, lazy=lazy,
                                          runtime_limits=gramc.RuntimeLimits(stack_dfa_states=3)), gpt2, doc)
        assert tiny == reference
        monkeypatch.setattr(pda_stack_dfa, "MAX_CONFIGS", 1)  # every new state: Earley fallback
        assert masks(lazy) == reference
        monkeypatch.setattr(pda_stack_dfa, "MAX_CONFIGS", 4)  # some states built, some refused
        assert masks(lazy) == reference
        monkeypatch.undo()


def _masks_along(art, vocab, doc: bytes) -> list[bytes]:
    m = art.matcher()
    out = []
    for b in doc:
        out.append(np.packbits(m.mask()).tobytes())
        assert m.commit_bytes(bytes([b]))
    return out


def test_left_recursive_grammars_use_the_earley_check(gpt2):
    art = gramc.compile(LEFT_RECURSIVE_LARK, format="lark", vocab=gpt2)
    table = art.token_table
    assert table.table.left_recursive()
    assert table.strategies == ("stored_rows", "rows")
    m = art.matcher()
    plus, digits = gpt2.tokens.index(b"+"), gpt2.tokens.index(b"12")
    for t in (digits, plus, digits, plus, digits):
        assert m.mask()[t]
        assert m.commit_token(t)
    assert m.mask()[digits] and not m.mask()[gpt2.tokens.index(b"(")]  # "12" continues the number
    assert m.is_complete()
    assert not gramc.compile(PARENS, format="gbnf", vocab=gpt2).token_table.table.left_recursive()


@pytest.mark.parametrize("edges, cyclic", [
    ([set(), {0}, {1}], False),
    ([{1}, {2}, {0}], True),
    ([{0}], True),
    ([{1, 2}, {2}, set()], False),
])
def test_cycle_detection(edges, cyclic):
    assert _has_cycle(edges) is cyclic
