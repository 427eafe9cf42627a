"""Compile limits hold: the caller's Limits reach every frontend, the deadline covers binding,
and max_memory refuses a compile before its large arrays are allocated."""

from __future__ import annotations

import json
import tracemalloc
from types import SimpleNamespace

import pytest

import gramc
from gramc import limits as limits_module
from gramc.errors import LimitExceededError
from gramc.compiler.pipeline import lower
from gramc.limits import DEFAULT_LIMITS, Deadline, Limits
from gramc.vocab import Vocab, load_vocab

TINY = Vocab.from_list([bytes([b]) for b in range(32, 127)])

# (format, source, the limit, its value there, the smallest maximum that accepts it,
#  (line, col) of the offending construct, or None where the position is a JSON pointer,
#  a text that is in the language, a text that is not)
CASES = [
    ("regex", "a{10}", "max_repeat", 10, (1, 2), "a" * 10, "a" * 9),
    ("regex", "((((a))))", "max_nesting", 4, (1, 4), "a", "aa"),
    ("regex", "(a|b){2,7}c", "max_repeat", 7, (1, 6), "abc", "c"),
    ("gbnf", 'root ::= "a"{10}', "max_repeat", 10, (1, 14), "a" * 10, "a" * 11),
    ("gbnf", 'root ::= ("x"\n  ((("a"))))', "max_nesting", 4, (2, 5), "xa", "x"),
    ("ebnf", 'root ::= "a"{3,10}', "max_repeat", 10, (1, 16), "a" * 3, "aa"),
    ("ebnf", 'root = ((("a"))) ;', "max_nesting", 3, (1, 10), "a", "b"),
    ("lark", 'start: "a"~10', "max_repeat", 10, (1, 12), "a" * 10, "a"),
    ("lark", "start: /b{2,10}/", "max_repeat", 10, (1, 8), "bb", "b"),
    ("lark", 'start: ("x" [("a")])', "max_nesting", 3, (1, 14), "xa", "a"),
    ("lark", "start: /((b))c/", "max_nesting", 2, (1, 8), "bc", "c"),
    ("json_schema", '{"type": "string", "pattern": "^a{10}$"}', "max_repeat", 10, None, '"' + "a" * 10 + '"', '"a"'),
    ("json_schema", '{"type": "string", "pattern": "^((a))$"}', "max_nesting", 2, None, '"a"', '"aa"'),
    ("json_schema", '{"type": "string", "maxLength": 10}', "max_repeat", 10, None, '"abc"', '"' + "a" * 11 + '"'),
    ("json_schema", '{"type": "array", "items": {"const": 1}, "maxItems": 10}', "max_repeat", 10, None,
     "[1,1]", "[" + ",".join(["1"] * 11) + "]"),
    ("json_schema", '{"type": "object", "minProperties": 10}', "max_repeat", 10, None, "{" + ",".join(
        f'"k{i}":0' for i in range(10)) + "}", "{}"),
    ("json_schema", '{"type": "object", "properties": {"a": {"type": "array", "items": {"type": "null"}}}, '
                    '"required": ["a"], "additionalProperties": false}', "max_nesting", 3, None,
     '{"a":[null]}', '{"a":[1]}'),
]


def _ids(case):
    return f"{case[0]}-{case[2]}-{case[1][:24]}"


@pytest.mark.parametrize("fmt,source,limit,value,pos,good,bad", CASES, ids=[_ids(c) for c in CASES])
def test_every_frontend_enforces_the_callers_limit(fmt, source, limit, value, pos, good, bad):
    with pytest.raises(LimitExceededError) as info:
        gramc.compile(source, fmt, limits=Limits(**{limit: value - 1}), source_name="src")
    err = info.value
    assert (err.limit, err.value, err.maximum) == (limit, value, value - 1)
    message = str(err)
    assert f"{limit} exceeded: {value} > {value - 1}" in message
    assert f"Limits({limit}=...)" in message  # how to raise it
    if pos is not None:
        assert (err.span.line, err.span.col, err.span.source_name) == (*pos, "src")
        assert message.startswith(f"src:{pos[0]}:{pos[1]}: ")
    else:
        assert "#" in err.where  # the JSON pointer of the keyword


@pytest.mark.parametrize("fmt,source,limit,value,pos,good,bad", CASES, ids=[_ids(c) for c in CASES])
def test_a_source_at_the_limit_compiles_to_the_same_language(fmt, source, limit, value, pos, good, bad):
    art = gramc.compile(source, fmt, TINY, limits=Limits(**{limit: value}))
    for text, expected in ((good, True), (bad, False)):
        m = art.matcher()
        assert (m.commit_bytes(text.encode()) and m.is_complete()) is expected, text


def test_the_issue_examples_raise():
    for source, fmt, limit in (("a{10}", "regex", Limits(max_repeat=5)),
                               ("((((a))))", "regex", Limits(max_nesting=2)),
                               ('root ::= "a"{10}', "gbnf", Limits(max_repeat=5))):
        with pytest.raises(LimitExceededError):
            gramc.compile(source, fmt, limits=limit)


def test_lark_brackets_in_literals_and_comments_do_not_nest():
    source = 'start: "((" /[(]\\/(?:x)/ "[" // ((((\n  | "a"  # [[[[\n'
    art = gramc.compile(source, "lark", TINY, limits=Limits(max_nesting=1))
    m = art.matcher()
    assert m.commit_bytes(b"((" + b"(/x" + b"[") and m.is_complete()


def test_schema_counts_above_the_counted_length_stay_approximations():
    """A maxLength too large to count is over-approximated (as before), never a max_repeat
    error: the default behaviour is unchanged for sources within the defaults."""
    with pytest.warns(gramc.errors.GramcWarning, match="maxLength"):
        art = gramc.compile('{"type": "string", "maxLength": 200000}', "json_schema")
    assert art.dfa.fullmatch(b'"' + b"a" * 300 + b'"')


def test_default_limits_are_unchanged_for_ordinary_sources():
    assert DEFAULT_LIMITS.max_repeat == 100_000 and DEFAULT_LIMITS.max_nesting == 500
    from gramc.runtime.check import check_artifact

    art = gramc.compile("a{100000}", "regex")  # a counter: the repetition is not unrolled
    assert check_artifact(art, b"a" * 100_000).ok and not check_artifact(art, b"a" * 99_999).ok
    assert gramc.compile("(" * 500 + "a" + ")" * 500, "regex").dfa.fullmatch(b"a")


# ---------------------------------------------------------------- the deadline covers binding


class _Clock:
    """A monotonic clock that jumps forward when a stage whose name starts with ``jump_at``
    begins (the compile's progress callback drives it): deterministic, nothing is timed."""

    def __init__(self, jump_at: str):
        self.now, self.jump_at = 0.0, jump_at

    def monotonic(self) -> float:
        return self.now

    def progress(self, stage: str) -> None:
        if stage.startswith(self.jump_at):
            self.now += 1000.0


@pytest.mark.parametrize("source,fmt,kind", [
    ("[a-z]{1,8}", "regex", "DFA"),
    ('root ::= "[" (root ("," root)*)? "]"', "gbnf", "PDA"),
])
def test_the_deadline_fires_during_binding_and_names_it(monkeypatch, source, fmt, kind):
    clock = _Clock("binding")
    monkeypatch.setattr(limits_module, "time", SimpleNamespace(monotonic=clock.monotonic))
    vocab = load_vocab("gpt2")
    with pytest.raises(LimitExceededError) as info:
        gramc.compile(source, fmt, vocab, limits=Limits(max_compile_seconds=60), progress=clock.progress)
    err = info.value
    assert err.limit == "max_compile_seconds" and err.maximum == 60
    assert f"binding the {kind} to {vocab.size} tokens" in str(err)
    # the same compile, the clock never jumping, succeeds: the binding loop is what stopped it
    clock.jump_at = "never"
    assert gramc.compile(source, fmt, vocab, limits=Limits(max_compile_seconds=60), progress=clock.progress)


def test_a_spent_deadline_stops_eager_binding_at_its_first_check():
    art = gramc.compile("[a-z]{1,8}", "regex")
    with pytest.raises(LimitExceededError, match="while binding here"):
        type(art).bound(art.dfa, art.meta, TINY, deadline=Deadline(-1.0, "binding here"))
    assert type(art).bound(art.dfa, art.meta, TINY, lazy=True, deadline=Deadline(-1.0)).is_lazy  # lazy: nothing walked


# ---------------------------------------------------------------- max_memory


def test_max_memory_default_is_documented_and_sane():
    assert DEFAULT_LIMITS.max_memory == 4 * 2**30


def _peak_traced(fn) -> tuple[BaseException | None, int]:
    tracemalloc.start()
    try:
        fn()
        raised = None
    except LimitExceededError as err:
        raised = err
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return raised, peak


def test_max_memory_refuses_a_large_binding_before_allocating_it():
    """``[a-z]{1,2000}z`` against gpt2 needs about a gigabyte of token rows (the repetition is
    unrolled: its exit byte can also start an iteration, so it is no counter); with 64 MiB
    allowed the compile stops once what it holds proves the rows cannot fit, holding a
    fraction of them."""
    vocab = load_vocab("gpt2")
    maximum = 64 << 20
    source = "[a-z]{1,2000}z"
    err, peak = _peak_traced(lambda: gramc.compile(source, "regex", vocab, limits=Limits(max_memory=maximum)))
    assert err is not None and err.limit == "max_memory" and err.maximum == maximum
    assert err.value > maximum and "token rows of 4,002 DFA states" in str(err)
    assert "MiB" in str(err) and "Limits(max_memory=...)" in str(err)
    assert peak < 2 * maximum


def test_max_memory_checks_the_packed_masks_from_their_shape():
    vocab = load_vocab("gpt2")
    states = gramc.compile("[0-9]{1,300}", "regex").dfa.n_states
    need = states * ((vocab.size + 31) // 32) * 4
    err, peak = _peak_traced(lambda: gramc.compile("[0-9]{1,300}", "regex", vocab, limits=Limits(max_memory=need - 1)))
    assert err is not None and err.value == need and "packed token masks" in str(err)
    assert peak < need  # refused before the masks existed
    assert gramc.compile("[0-9]{1,300}", "regex", TINY, limits=Limits(max_memory=need - 1))  # fewer tokens: fits


def test_max_memory_checks_the_pda_node_masks_from_their_shape():
    vocab = load_vocab("gpt2")
    grammar = 'root ::= "[" (root ("," root)*)? "]" | [a-z]{1,40}'
    with pytest.raises(LimitExceededError, match="token masks of [0-9,]+ PDA nodes") as info:
        gramc.compile(grammar, "gbnf", vocab, limits=Limits(max_memory=1 << 20))
    assert info.value.limit == "max_memory"


def test_max_memory_checks_the_transition_tables_while_they_grow():
    with pytest.raises(LimitExceededError, match="transition tables of [0-9,]+ DFA states") as info:
        gramc.compile("[a-z]{1,3000}z", "regex", limits=Limits(max_memory=20_000))  # unrolled
    assert info.value.limit == "max_memory"


def test_the_error_says_the_size_in_bytes_units():
    err = LimitExceededError("max_memory", 5 * 2**30, 4 * 2**30, "somewhere")
    assert str(err).startswith("limit max_memory exceeded: 5.0 GiB > 4.0 GiB (somewhere)")


def test_a_compile_that_fits_gives_the_same_bytes():
    """The memory checks change nothing below the limit: same artifact bytes."""
    vocab = load_vocab("gpt2")
    a = gramc.compile("[0-9]{1,30}x", "regex", vocab)
    b = gramc.compile("[0-9]{1,30}x", "regex", vocab, limits=Limits(max_memory=1 << 30))
    assert a.to_bytes() == b.to_bytes()


def test_json_schema_nesting_counts_containers_below_the_root_and_names_the_pointer():
    schema = {"type": "object", "properties": {"a": {"properties": {"b": {"items": {}}}}}}
    with pytest.raises(LimitExceededError) as info:
        gramc.compile(json.dumps(schema), "json_schema", limits=Limits(max_nesting=4))
    assert "#/properties/a/properties/b/items" in str(info.value)


def test_nesting_allowed_by_a_raised_max_nesting_compiles():
    """The passes and the NFA construction walk on explicit stacks: an expression nested
    2,000 deep compiles when max_nesting allows it (it was a RecursionError)."""
    deep = "(a" * 2000 + ")?" * 2000
    dfa = gramc.compile(deep, limits=Limits(max_nesting=3000)).dfa
    assert dfa.fullmatch(b"") and dfa.fullmatch(b"a" * 2000) and not dfa.fullmatch(b"a" * 2001)


def test_lark_nesting_past_the_recursion_limit_is_not_blamed_on_max_nesting():
    source = "start: " + '("a" ' * 300 + '"b"' + ")" * 300  # within max_nesting=500
    with pytest.raises(LimitExceededError) as info:
        gramc.compile(source, "lark")
    assert info.value.limit == "expression_depth" and "Limits(" not in str(info.value)


def test_the_inlining_budget_is_reported_as_the_maximum_it_is():
    """A grammar too large to inline into one automaton names the part of max_nfa_states it
    was measured against (it printed the whole limit: "45 > 40")."""
    with pytest.raises(LimitExceededError) as info:
        gramc.compile("(abc|def){1,5}x[a-z]+", limits=Limits(max_nfa_states=40))
    err = info.value
    assert err.limit == "max_nfa_states" and err.value > err.maximum
    assert f"{err.value} > {err.maximum} (every rule inlined into one automaton" in str(err)


def test_max_memory_bounds_the_subset_construction_of_an_ambiguous_repetition():
    """((a{1,40}|b){1,40}){1,40}: each DFA state is a set of NFA states about as large as
    its position (the inner counts are ambiguous), n^2 / 2 in all, which passed 6 GB before
    a limit fired. The sets are counted against max_memory as they grow."""
    maximum = 64 << 20
    err, peak = _peak_traced(lambda: gramc.compile("((a{1,40}|b){1,40}){1,40}", vocab=None,
                                                   limits=Limits(max_memory=maximum)))
    assert err is not None and err.limit == "max_memory" and "NFA state sets" in str(err)
    assert peak < 4 * maximum


@pytest.mark.parametrize("source, item, bounds", [("((a{1,40}){1,40}){1,40}", "a", (1, 64_000)),
                                                  ("(([0-9]{2,5}){3,9})", "7", (6, 45)),
                                                  ("((ab){1,100}){0,900}", "ab", (0, 90_000))])
def test_a_repetition_of_a_repetition_is_one_counter(source, item, bounds):
    """Nested counts that form one range are one repetition (issue 18: the first passed
    4.5 GB unrolled before max_memory fired); the counted DFA reads the same language."""
    from gramc.compiler.counted import merge_nested_counts
    from gramc.compiler.ir import Repeat
    from gramc.runtime.check import check_artifact

    merged = merge_nested_counts(lower(source, "regex").rules["root"], 100_000)
    assert isinstance(merged, Repeat) and (merged.min, merged.max) == bounds
    art = gramc.compile(source, vocab=None)
    for n in {max(bounds[0] - 1, 0), bounds[0], bounds[1] // 2, bounds[1], bounds[1] + 1}:
        assert check_artifact(art, (item * n).encode()).ok == (bounds[0] <= n <= bounds[1]), n


def test_counts_that_skip_are_not_merged():
    """(a{3}){1,5} is a{3}, a{6}, ... a{15}: no one range, so it stays as written."""
    from gramc.compiler.counted import merge_nested_counts

    body = lower("(a{3}){1,5}", "regex").rules["root"]
    assert merge_nested_counts(body, 100_000) is body
    dfa = gramc.compile("(a{3}){1,5}").dfa
    assert [n for n in range(20) if dfa.fullmatch(b"a" * n)] == [3, 6, 9, 12, 15]


def test_memory_held_beside_a_subset_construction_counts_against_max_memory():
    """A PDA's rule DFAs stay alive until they are stacked: each rule's construction counts
    the ones built before it (a MaskBench schema's rule DFAs, thousands of call columns
    each, passed 11 GB together while each one fitted the limit)."""
    from gramc.compiler.dfa import byte_classes, determinize
    from gramc.compiler.ir import Grammar
    from gramc.compiler.nfa import build_nfa

    nfa = build_nfa(Grammar.single(lower("[a-z]{1,50}", "regex").rules["root"]))
    classes = byte_classes(set(nfa.cls) - {0})
    limits = Limits(max_memory=1 << 20)
    determinize(nfa, classes, [], 0, limits, Deadline(60))  # alone it fits
    with pytest.raises(LimitExceededError, match="the transition tables of 52 DFA states x 2 columns, with [0-9,]+ bytes held beside them") as info:
        determinize(nfa, classes, [], 0, limits, Deadline(60), held=1_048_000)
    assert info.value.limit == "max_memory"


def test_a_dfa_state_limit_names_the_automaton_it_stopped():
    """The message said only "max_dfa_states exceeded: 200002 > 200000" (issue 18)."""
    with pytest.raises(LimitExceededError, match=r"max_dfa_states exceeded: \d+ > 100 \(the DFA of rule 'root', "
                                                 r"other rules inlined\)"):
        gramc.compile("ab" * 200, limits=Limits(max_dfa_states=100))
    recursive = 'root ::= "(" root ")" | body\nbody ::= "' + "xy" * 200 + '"'
    with pytest.raises(LimitExceededError, match=r"max_dfa_states exceeded: \d+ > 100 \(the DFA of rule 'root'\)"):
        gramc.compile(recursive, "gbnf", limits=Limits(max_dfa_states=100))

