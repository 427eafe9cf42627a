"""Grammar passes: references, unproductive and unreachable rules, inlining, recursion."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from gramc.cli.main import main
from gramc.compiler.ir import EMPTY, Grammar, Ref, Repeat, Token, TokenName, alt, format_expr, literal, repeat, seq
from gramc.compiler.passes import (
    check_references,
    inline_nonrecursive,
    optimize,
    recursive_rules,
    remove_unproductive,
    remove_unreachable,
    resolve_token_names,
)
from gramc.errors import GramcError, GramcWarning, GrammarSyntaxError, VocabularyError


def test_undefined_reference_is_an_error():
    g = Grammar({"root": seq(literal(b"a"), Ref("nope"))}, "root")
    with pytest.raises(GrammarSyntaxError, match="undefined rule 'nope'"):
        check_references(g)


def test_unproductive_rule_is_dropped_with_a_warning():
    g = Grammar({"root": alt(literal(b"a"), Ref("loop")), "loop": seq(literal(b"b"), Ref("loop"))}, "root")
    with pytest.warns(GramcWarning, match="can never finish are ignored: loop"):
        out = remove_unproductive(g)
    assert out.rules == {"root": literal(b"a")}


def test_empty_language_is_an_error():
    g = Grammar({"root": seq(literal(b"a"), Ref("root"))}, "root")
    with pytest.raises(GramcError, match="language is empty"):
        remove_unproductive(g)


def test_unreachable_rule_is_dropped_with_a_warning():
    g = Grammar({"root": literal(b"a"), "spare": literal(b"b")}, "root")
    with pytest.warns(GramcWarning, match="unused rules are ignored: spare"):
        assert list(remove_unreachable(g).rules) == ["root"]


def test_inlining_keeps_only_start_and_recursive_rules():
    g = Grammar({
        "root": seq(Ref("item"), Ref("list")),
        "list": alt(EMPTY, seq(literal(b","), Ref("item"), Ref("list"))),
        "item": alt(literal(b"x"), literal(b"y")),
    }, "root")
    assert recursive_rules(g) == {"list"}
    out = inline_nonrecursive(g)
    assert set(out.rules) == {"root", "list"}
    assert str(out).splitlines()[0] == 'root ::= [xy] list'


def test_left_recursion_terminates():
    g = Grammar({"root": alt(literal(b"x"), seq(Ref("root"), literal(b"+x")))}, "root")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert optimize(g).is_recursive()


def test_token_names_resolve_against_the_vocabulary():
    g = Grammar({"root": seq(TokenName("<|eot|>"), literal(b"a"))}, "root")
    assert resolve_token_names(g, {"<|eot|>": 7}).rules["root"] == seq(Token(7), literal(b"a"))
    with pytest.raises(VocabularyError, match="no special token named <|eot|>"):
        resolve_token_names(g, {"<|other|>": 1})
    with pytest.raises(GramcError, match="compile it with a vocabulary"):
        resolve_token_names(g, None)


def test_cli_prints_pass_warnings_as_one_line_each(tmp_path):
    src = tmp_path / "g.gbnf"
    src.write_text('root ::= "a" | loop\nloop ::= "b" loop\nspare ::= "c"\n')
    res = CliRunner().invoke(main, ["compile", str(src), "--vocab", "gpt2"])
    assert res.exit_code == 0, res.output
    lines = [l for l in res.stderr.splitlines() if l.startswith("gramc: warning:")]
    assert any("never finish are ignored: loop" in l for l in lines) and any("unused rules" in l and "spare" in l for l in lines)


def test_outline_shared_keeps_the_language_and_builds_each_copy_once():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from earley import EarleyOracle
    from gramc.compiler.passes import SHORT_BYTES, _longest, outline_shared
    from strategies import exprs, strings

    @settings(max_examples=60, deadline=None)
    @given(exprs(), exprs(), st.lists(strings(), max_size=6))
    def check(a, b, samples):
        shared = repeat(alt(a, b), 0, 1)  # a node that survives flattening
        body = seq(shared, literal(b","), shared, repeat(shared, 0, 2))
        g = Grammar.single(body)
        out = outline_shared(g, min_size=1)
        longest = _longest(shared, {})
        if shared.children() and (longest is None or longest > SHORT_BYTES):
            assert any(n.startswith("_shared") for n in out.rules)  # (empty items simplify away)
        before, after = EarleyOracle(g), EarleyOracle(out)
        for s in samples:
            assert before.fullmatch(s) == after.fullmatch(s)
            assert before.is_viable_prefix(s) == after.is_viable_prefix(s)

    check()


def test_short_shared_parts_and_their_repetitions_stay_inline():
    """A JSON string character is a large IR node (UTF-8 and escapes) shared by every string:
    as a rule it would put a call and a return on each character, so it stays inline, and so
    does ``char*``; a long shared part is still outlined."""
    from gramc.compiler.ir import byte_range
    from gramc.compiler.passes import SHORT_BYTES, outline_shared

    hexdigit = alt(byte_range(0x30, 0x39), byte_range(0x61, 0x66))
    char = alt(byte_range(0x20, 0x21), byte_range(0x23, 0x5B), byte_range(0x5D, 0x7E),
               seq(literal(b"\\u"), repeat(hexdigit, 4, 4)), seq(byte_range(0xC2, 0xDF), byte_range(0x80, 0xBF)))
    string = alt(seq(literal(b'"'), repeat(char, 0, None), literal(b'"')), literal(b"null"))
    long_part = alt(literal(b"x" * (SHORT_BYTES + 1)), literal(b"y"))  # (an Alt is not flattened into a Seq)
    g = Grammar.single(seq(repeat(char, 0, None), literal(b","), repeat(char, 0, None), char, char,
                           long_part, long_part))
    out = outline_shared(g, min_size=1)
    assert [format_expr(b) for n, b in out.rules.items() if n != g.start] == [format_expr(long_part)]
    kept = outline_shared(Grammar.single(seq(string, literal(b":"), string)), min_size=1)
    (body,) = [b for n, b in kept.rules.items() if n != kept.start]
    assert format_expr(body) == format_expr(string)  # the whole string is one rule, its body a loop


def test_long_counted_repetitions_call_their_item():
    """A string with a large maxLength, inlined, copies its character's states at every
    position (~20,000 states for 1,024 JSON characters), so its character becomes a rule the
    repetition calls; a short count keeps it inline. The language is the same."""
    from earley import EarleyOracle
    from gramc.compiler.ir import Ref, byte_range
    from gramc.compiler.passes import MAX_INLINE_REPEAT_BYTES, SHORT_BYTES, outline_shared

    char = alt(byte_range(0x61, 0x7A), seq(literal(b"\\u"), repeat(byte_range(0x30, 0x39), 4, 4)))  # 6 bytes
    n = max(MAX_INLINE_REPEAT_BYTES, SHORT_BYTES) // 6 + 1  # long, and not short (which stays inline)
    g = Grammar.single(seq(repeat(char, 0, n), literal(b","), repeat(char, 0, 3)))
    out = outline_shared(g, min_size=1)
    (name, body), = [(k, b) for k, b in out.rules.items() if k != g.start]
    assert format_expr(body) == format_expr(char)
    assert format_expr(out.rules[g.start]) == format_expr(seq(repeat(Ref(name), 0, n), literal(b","),
                                                              repeat(char, 0, 3)))
    # Used twice, the repetition is a rule of its own, which calls the character's.
    big = repeat(char, 0, n)
    g2 = Grammar.single(seq(big, literal(b","), big, literal(b","), repeat(char, 0, 3)))
    out2 = outline_shared(g2, min_size=1)
    (char_rule,) = [k for k, b in out2.rules.items() if b == char]
    assert sorted(format_expr(b) for k, b in out2.rules.items() if k != g2.start) == \
        sorted([format_expr(char), format_expr(repeat(Ref(char_rule), 0, n))])
    for grammar, outlined in ((g, out), (g2, out2)):
        before, after = EarleyOracle(grammar), EarleyOracle(outlined)
        for s in [b"ab,c", b"a" * n + b",zz", b"a" * (n + 1) + b",", b"\\u0123b,\\u12", b",abcd",
                  b"a\\u12x", b"ab," + b"b" * n + b",c", b"," + b"b" * (n + 1) + b","]:
            assert before.fullmatch(s) == after.fullmatch(s)
            assert before.is_viable_prefix(s) == after.is_viable_prefix(s)


def test_chains_past_the_chain_bound_are_rules_built_directly(monkeypatch):
    """A long counted repetition of more than MIN_CHAIN_RULE iterations becomes a rule of
    its own, whose DFA (a chain of positions) build_pda makes without a subset construction;
    that DFA is the one the subset construction and minimisation give, and the PDA's
    language is unchanged."""
    from earley import EarleyOracle
    from gramc.compiler import passes, pda
    from gramc.compiler.dfa import byte_classes, determinize_used
    from gramc.compiler.ir import byte_range
    from gramc.compiler.nfa import build_nfa
    from gramc.limits import DEFAULT_LIMITS, Deadline

    monkeypatch.setattr(passes, "MIN_CHAIN_RULE", 6)
    char = alt(byte_range(0x61, 0x7A), seq(literal(b"\\u"), repeat(byte_range(0x30, 0x39), 4, 4)))
    g = Grammar({"root": alt(seq(literal(b'"'), repeat(char, 2, 9), literal(b'"')),
                             seq(literal(b"["), Ref("root"), literal(b"]")))}, "root")
    out = passes.outline_shared(g, min_size=1)
    chains = [k for k, b in out.rules.items() if isinstance(b, Repeat) and isinstance(b.item, Ref)]
    assert len(chains) == 1 and pda._chain(out.rules[chains[0]]) == (out.rules[chains[0]].item.name, 2, 9)
    names = [out.start] + [n for n in out.rules if n != out.start]
    calls = {n: i for i, n in enumerate(names)}
    nfa = build_nfa(Grammar(out.rules, chains[0]), DEFAULT_LIMITS, calls)
    classes = byte_classes({m for n in names if n != chains[0]
                            for m in build_nfa(Grammar(out.rules, n), DEFAULT_LIMITS, calls).cls} - {0})
    want = determinize_used(nfa, classes, [], DEFAULT_LIMITS, Deadline(60))
    got = pda._chain_dfa(out.rules[chains[0]].item.name, 2, 9, int(classes.max()) + 1, calls)
    for a, b in zip(got, want):
        assert np.array_equal(a, b)
    table = pda.build_pda(out, collapse=False)
    before, after = EarleyOracle(g), EarleyOracle(out)
    assert table.rule_names == tuple(names)
    for text in [b'"ab"', b'"a"', b'"' + b"a" * 9 + b'"', b'"' + b"a" * 10 + b'"', b'["\\u0123b"]', b'[["zz"]]']:
        assert before.fullmatch(text) == after.fullmatch(text), text


def test_a_rule_whose_body_is_a_long_counted_repetition_calls_its_item():
    """The rule-keeping compilation keeps rules whose whole body is a counted repetition
    (``word ::= [a-z]{30}``): such a body calls its item like any long counted repetition,
    whether or not something else is outlined (it once looked up a rule never made for the
    item, a KeyError, as soon as anything else was)."""
    from earley import EarleyOracle
    from gramc.compiler.ir import byte_range
    from gramc.compiler.passes import MAX_INLINE_REPEAT_BYTES, outline_shared

    n = MAX_INLINE_REPEAT_BYTES + 6
    letters = repeat(byte_range(0x61, 0x7A), n, n)
    digits = repeat(byte_range(0x30, 0x39), 0, n)  # used twice: outlined as well
    rules = {"root": seq(Ref("word"), literal(b"="), Ref("list")), "word": letters,
             "list": alt(seq(literal(b"["), Ref("list"), literal(b"]")), seq(digits, literal(b","), digits))}
    for g in (Grammar(rules, "root"), Grammar({k: v for k, v in rules.items() if k != "list"} |
                                              {"root": seq(Ref("word"), literal(b"="))}, "root")):
        out = outline_shared(g, min_size=1)
        (item,) = [k for k, b in out.rules.items() if b == byte_range(0x61, 0x7A)]
        assert out.rules["word"] == repeat(Ref(item), n, n)
        before, after = EarleyOracle(g), EarleyOracle(out)
        for text in [b"a" * n + b"=[1,2]", b"a" * n + b"=", b"a" * (n - 1) + b"=", b"a" * n + b"=[[,9]]", b"ab"]:
            assert before.fullmatch(text) == after.fullmatch(text), text
            assert before.is_viable_prefix(text) == after.is_viable_prefix(text), text


def test_stored_ir_text_names_shared_parts_of_a_large_dag():
    """A definition reached through many paths is one IR node; written out as a tree the IR
    doubles with every level. The stored text must stay proportional to the DAG, and small
    grammars keep their plain form (the golden ir.txt files pin that)."""
    from gramc.compiler.ir import format_grammar
    from gramc.compiler.pipeline import IR_TEXT_MAX_TREE_NODES, ir_text

    e = alt(literal(b"leaf-a"), literal(b"leaf-b"))
    for level in range(40):  # 2**40 leaves as a tree
        e = alt(seq(literal(b"["), e, literal(b","), e, literal(b"]%d" % level)), literal(b"-"))
    text = ir_text(Grammar.single(e))
    assert len(text) < 40 * 200 and text.count("_shared") >= 40
    tiny = Grammar.single(repeat(alt(literal(b"ab"), literal(b"c")), 1, 3))
    assert ir_text(tiny) == format_grammar(tiny)
    assert IR_TEXT_MAX_TREE_NODES > 1000


def test_the_fallback_pda_outlines_short_parts_when_inlining_them_blows_up(monkeypatch):
    """The rule-keeping fallback first keeps short shared parts inline, within a tenth of the
    limits; when a rule's DFA blows up, it compiles again with every large shared part a rule,
    within the full limits (the language is the same either way)."""
    from gramc.compiler import pipeline
    from gramc.errors import LimitExceededError
    from gramc.limits import Limits

    char = alt(*(literal(bytes([0xC3, 0x80 + i])) for i in range(40)))  # large in IR, 2 bytes long
    many = alt(*(seq(literal(b"k%d" % i), repeat(char, 0, None)) for i in range(8)))
    g = Grammar({"root": seq(many, literal(b";"), many, alt(literal(b""), seq(literal(b"("), Ref("root"), literal(b")"))))}, "root")
    limits = Limits(max_nfa_states=400)  # the first, all-inline path is refused at once
    tried = []
    real = pipeline.build_pda

    def build_pda(grammar, within, collapse=True, deadline=None):
        tried.append((len(grammar.rules), within.max_dfa_states))
        if len(tried) == 1:
            raise LimitExceededError("max_dfa_states", within.max_dfa_states + 1, within.max_dfa_states)
        return real(grammar, within, collapse=collapse, deadline=deadline)

    monkeypatch.setattr(pipeline, "build_pda", build_pda)
    kind, table = pipeline.build_automaton(g, limits)
    assert kind == "pda"
    assert [d for _, d in tried] == [limits.max_dfa_states // 10, limits.max_dfa_states]
    assert tried[1][0] > tried[0][0]  # the second try keeps the shared parts as rules


def test_grammars_past_the_inline_bound_keep_their_rules(monkeypatch):
    """A recursive grammar is inlined only while its NFA is within
    ``max_nfa_states // INLINE_NFA_FRACTION_RECURSIVE``; past that, its rules are kept. A
    regular grammar of the same size still becomes one DFA (up to ``INLINE_NFA_FRACTION``)."""
    from gramc.compiler import pipeline
    from gramc.compiler.nfa import thompson_size
    from gramc.compiler.passes import optimize
    from gramc.limits import Limits

    item = alt(literal(b"ab"), literal(b"cd"), seq(literal(b"["), Ref("root"), literal(b"]")))
    g = Grammar({"root": seq(Ref("item"), repeat(seq(literal(b","), Ref("item")), 0, None)), "item": item}, "root")
    size = thompson_size(optimize(g))
    collapsed = []
    real = pipeline.build_pda
    monkeypatch.setattr(pipeline, "build_pda", lambda grammar, within, collapse=True, deadline=None:
                        collapsed.append(collapse) or real(grammar, within, collapse=collapse, deadline=deadline))
    tables = {}
    for factor in (2, 1 / 2):  # the bound twice the NFA, then half of it
        limits = Limits(max_nfa_states=int(size * pipeline.INLINE_NFA_FRACTION_RECURSIVE * factor))
        kind, tables[factor] = pipeline.build_automaton(g, limits)
        assert kind == "pda"
    assert collapsed == [True, False]
    assert tables[2].n_rules < tables[1 / 2].n_rules
    regular = Grammar.single(repeat(alt(literal(b"ab"), literal(b"cd")), 0, 40))
    limits = Limits(max_nfa_states=thompson_size(regular) * pipeline.INLINE_NFA_FRACTION_RECURSIVE // 2)
    assert pipeline.build_automaton(regular, limits)[0] == "dfa"


def test_lexemes_stay_whole_and_survive_the_passes():
    """A lexeme (a key that is none of the declared names) is never split into shared
    rules, even where its parts are shared outside it, which are still outlined there; the
    passes carry the lexemes along, and the language is the same."""
    from earley import EarleyOracle
    from gramc.compiler.ir import Ref, walk
    from gramc.compiler.passes import SHORT_BYTES, optimize, outline_shared

    part = alt(literal(b"x" * (SHORT_BYTES + 1)), literal(b"y"))  # long enough to outline
    word = alt(seq(literal(b'"'), part, literal(b"-"), part, literal(b'"')), literal(b"z"))  # (not flattened)
    once = alt(seq(literal(b"<"), part, literal(b">")), literal(b"w"))  # a lexeme used once
    g = Grammar({"root": seq(Ref("item"), literal(b","), part, part, once), "item": seq(word, literal(b"!"), word)},
                "root", lexemes=[word, once])
    kept = optimize(g, inline=False)
    assert kept.lexemes == {word, once}
    out = outline_shared(kept, min_size=1)
    assert [format_expr(b) for n, b in out.rules.items() if n.startswith("_shared")] == \
        [format_expr(part), format_expr(word)]
    assert out.rules[[n for n, b in out.rules.items() if b is word][0]] is word  # whole inside
    assert any(once in walk(b) for b in out.rules.values())
    plain = outline_shared(Grammar(kept.rules, kept.start), min_size=1)  # without the lexeme: split
    assert not any(b is word for b in plain.rules.values())
    before, after = EarleyOracle(g), EarleyOracle(out)
    assert before.fullmatch(b'z!"y-y",yy<y>') and not before.fullmatch(b'"y-y"!"y-x",yyw')
    for text in [b'"y-y"!z,yyw', b'z!"y-y",yy<y>', b'"y-y"!"' + b"x" * (SHORT_BYTES + 1) + b'-y",yyw', b'"y-y"!"y-x",yyw']:
        assert before.fullmatch(text) == after.fullmatch(text)
