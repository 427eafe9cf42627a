"""Source text -> IR -> automaton: the compiler's one entry point.

:func:`compile_source` picks the frontend, lowers to the IR, and builds the automaton the
grammar needs (a minimal DFA for regular grammars, a PDA for recursive ones). The vocabulary is bound afterwards, by
:mod:`gramc.automata.bind`, so that the runtime can bind unbound artifacts too.
"""

from __future__ import annotations

import hashlib
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Mapping

from gramc import __version__
from gramc.automata.tables import DFATable
from gramc.automata.counted import CountedDFA
from gramc.compiler.captures import capture_grammar
from gramc.compiler.counted import build_counted_dfa
from gramc.compiler.dfa import build_dfa
from gramc.compiler.frontends import FRONTENDS
from gramc.automata.pda_table import PDATable
from gramc.compiler.ir import Grammar, format_grammar, postorder
from gramc.compiler.passes import optimize, outline_shared, resolve_token_names
from gramc.compiler.nfa import thompson_size
from gramc.compiler.pda import build_pda
from gramc.errors import GramcError, LimitExceededError
from gramc.limits import DEFAULT_LIMITS, Deadline, Limits


@dataclass(frozen=True)
class CompileOptions:
    """Options that change the compiled language (all recorded in the artifact).

    Attributes:
        regex_dialect: ``"unicode"`` (default; ECMA-262 semantics over code points) or
            ``"bytes"`` (classes and ``.`` range over raw bytes). See docs/regex.md.
        json_whitespace, json_max_whitespace, json_additional_properties_default, json_strict,
        json_max_depth, json_property_order, json_any_order_max_properties: the JSON Schema
            options (see :class:`gramc.schemas.SchemaOptions` and docs/json-schema.md).
            :meth:`to_meta` leaves out the ``json_*`` options that have their default values,
            so artifacts of other formats keep their bytes.
    """

    regex_dialect: str = "unicode"
    json_whitespace: str = "flexible"
    json_max_whitespace: int | None = None
    json_additional_properties_default: bool = True
    json_strict: bool = False
    json_max_depth: int | None = None
    json_property_order: str = "schema"
    json_any_order_max_properties: int = 8

    def to_meta(self) -> dict:
        defaults = CompileOptions.__dataclass_fields__
        return {k: v for k, v in asdict(self).items()
                if not (k.startswith("json_") and v == defaults[k].default)}


@dataclass
class Compiled:
    """What the compiler produces before binding: the automaton and its provenance.

    ``kind`` is ``"dfa"`` (``automaton`` is a DFATable) for regular grammars, ``"counted"``
    (a CountedDFA) for regular ones with large counted repetitions, and ``"pda"`` (a
    PDATable) for recursive ones.
    """

    grammar: Grammar
    kind: str
    automaton: DFATable | PDATable | CountedDFA
    meta: dict = field(default_factory=dict)


def lower(source: str, format: str, options: CompileOptions = CompileOptions(),
          source_name: str = "<input>", limits: Limits = DEFAULT_LIMITS) -> Grammar:
    """The IR grammar of ``source`` written in ``format`` (errors name ``source_name``;
    ``limits.max_repeat`` and ``limits.max_nesting`` bound what the frontend accepts)."""
    frontend = FRONTENDS.get(format)
    if frontend is None:
        raise GramcError(f"unknown source format {format!r} (available: {', '.join(sorted(FRONTENDS))})")
    return frontend(source, options.to_meta(), source_name, limits)


#: The whole grammar is inlined only while its Thompson NFA has at most
#: ``max_nfa_states // INLINE_NFA_FRACTION`` states (250,000 by default): a regular grammar
#: then becomes one DFA. Larger ones keep their rules.
INLINE_NFA_FRACTION = 8
#: ... and a recursive grammar (a PDA either way) only while it has at most
#: ``max_nfa_states // INLINE_NFA_FRACTION_RECURSIVE`` (15,625). Above that, the subset
#: construction of the inlined grammar takes seconds and gives larger automata whose masks
#: are no faster than the rule-keeping PDA's.
INLINE_NFA_FRACTION_RECURSIVE = 128


def build_automaton(grammar: Grammar, limits: Limits = DEFAULT_LIMITS, deadline: Deadline | None = None,
                    progress: Callable[[str], None] = lambda stage: None
                    ) -> tuple[str, DFATable | PDATable | CountedDFA]:
    """A DFA for a regular grammar (a counted one where a large bounded repetition can be a
    counter: :mod:`gramc.compiler.counted`), a PDA for a recursive one (within ``deadline``,
    by default a fresh one of ``limits.max_compile_seconds``; ``progress`` hears the stages).

    Inlining every non-recursive rule can blow a DFA up (Lark's ``%ignore COMMENT`` inlined
    after every terminal is the classic case). When a DFA-state limit is hit, the grammar is
    compiled again as a PDA that keeps every rule a rule, and large shared parts too, whose
    per-rule DFAs stay small.
    """
    deadline = deadline or Deadline(limits.max_compile_seconds)
    try:
        progress("running the passes")
        optimized = optimize(grammar)
        progress("building the automaton")
        recursive = optimized.is_recursive()
        counted = None if recursive else build_counted_dfa(optimized, limits)
        if counted is not None:
            return "counted", counted
        fraction = INLINE_NFA_FRACTION_RECURSIVE if recursive else INLINE_NFA_FRACTION
        size, budget = thompson_size(optimized), limits.max_nfa_states // fraction
        if size > budget:
            # Inlining multiplies shared rules (a list body writes its element twice, so
            # every level of nesting doubles): keep the rules instead of trying.
            raise LimitExceededError("max_nfa_states", size, budget,
                                     f"every rule inlined into one automaton: 1/{fraction} of max_nfa_states "
                                     f"{limits.max_nfa_states:,}")
        if recursive:
            return "pda", build_pda(optimized, limits, deadline=deadline.during("building the PDA"))
        return "dfa", build_dfa(optimized, limits, deadline.during("building the DFA"))
    except LimitExceededError as err:
        if err.limit not in ("max_dfa_states", "max_nfa_states"):
            raise
        kept = optimize(grammar, inline=False)
        # Short shared parts inline first (string bodies stay loops inside their rule, which
        # masks much faster), within a tenth of the limits so a blow-up fails fast; where
        # their copies blow a rule's DFA up, as rules.
        tight = replace(limits, max_dfa_states=limits.max_dfa_states // 10,
                        max_nfa_states=limits.max_nfa_states // 10)
        for keep_short, within in ((True, tight), (False, limits)):
            try:
                return "pda", build_pda(outline_shared(kept, keep_short=keep_short), within, collapse=False,
                                        deadline=deadline.during("building the PDA"))
            except LimitExceededError as again:
                if again.limit == "max_memory":
                    raise  # the rule-keeping PDA does not fit either: say where it stopped
                if again.limit not in ("max_dfa_states", "max_nfa_states"):
                    break
        raise err from None


@contextmanager
def _depth_as_limit():
    """A RecursionError of the passes or the automaton construction (their walks over an
    expression recurse along it) as a LimitExceededError, not a traceback."""
    try:
        yield
    except RecursionError:
        depth = sys.getrecursionlimit()
        raise LimitExceededError("expression_depth", depth + 1, depth,
                                 "the grammar's expressions nest deeper than the compiler's walks can follow") from None


class SourceMeta(dict):
    """A compile's provenance (``artifact.meta``) whose ``"ir"`` entry, the IR text, is
    written out on first use: reading it, iterating, comparing, copying, saving. Formatting
    the IR is about a tenth of a lazy compile that is never saved or inspected; until then
    the grammar (a small DAG) is kept instead of its text. Every dict method that reads more
    than one given key writes the text out first (:data:`_RESOLVING`), so it behaves as the
    plain dict it becomes."""

    __slots__ = ("_grammar",)

    def __init__(self, meta: dict[str, Any], grammar: Grammar):
        super().__init__(meta)
        self._grammar: Grammar | None = grammar

    def _resolved(self) -> "SourceMeta":
        grammar = self._grammar
        if grammar is not None:
            dict.__setitem__(self, "ir", ir_text(grammar))
            self._grammar = None
        return self

    def __missing__(self, key: str) -> Any:
        if self._grammar is not None and key == "ir":
            return dict.__getitem__(self._resolved(), key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or (key == "ir" and self._grammar is not None)

    def __setitem__(self, key: str, value: Any) -> None:
        if key == "ir":
            self._grammar = None  # set by hand: nothing left to write out
        dict.__setitem__(self, key, value)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self):
        return (dict, (dict(self._resolved()),))


def _resolving(name: str) -> Callable[..., Any]:
    """``dict.<name>`` on the written-out meta (and on the other operand, if one is a
    :class:`SourceMeta`)."""
    plain = getattr(dict, name)

    def method(self: SourceMeta, *args: Any, **kwargs: Any) -> Any:
        args = tuple(a._resolved() if isinstance(a, SourceMeta) else a for a in args)
        return plain(self._resolved(), *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    return method


#: The dict methods a SourceMeta answers only once its IR text is written out.
_RESOLVING = ("get", "keys", "items", "values", "__iter__", "__reversed__", "__len__", "__eq__", "__ne__",
              "__repr__", "__or__", "__ror__", "__ior__", "copy", "pop", "popitem", "setdefault", "update",
              "__delitem__")
for _name in _RESOLVING:
    setattr(SourceMeta, _name, _resolving(_name))


#: Above this many nodes written out as a tree, the stored IR text names shared sub-expressions.
IR_TEXT_MAX_TREE_NODES = 20_000


def ir_text(grammar: Grammar) -> str:
    """The IR text kept in the artifact (``gramc inspect --ir``, golden ``ir.txt``).

    The IR is a DAG: a JSON Schema definition reached through many ``$ref`` paths is one
    node. Written out as a tree it can be exponentially long (a Kubernetes schema printed
    to hundreds of megabytes), so large grammars are printed with their shared
    sub-expressions as ``_shared<k>`` rules: the same language, each part written once.
    """
    sizes: dict[int, int] = {}
    for body in grammar.rules.values():
        for node in postorder(body):
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in node.children())
    tree = sum(sizes[id(b)] for b in grammar.rules.values())
    return format_grammar(outline_shared(grammar) if tree > IR_TEXT_MAX_TREE_NODES else grammar)


def compile_source(
    source: str,
    format: str = "regex",
    options: CompileOptions = CompileOptions(),
    limits: Limits = DEFAULT_LIMITS,
    source_name: str = "<input>",
    progress: Callable[[str], None] = lambda stage: None,
    special_names: Mapping[str, int] | None = None,
    deadline: Deadline | None = None,
) -> Compiled:
    """Lower ``source``, run the passes and build its automaton: a DFA when the grammar is
    regular, a PDA when it is recursive. ``special_names`` resolves ``<name>`` tokens.
    ``progress`` is called with each stage's name as it starts (``"parsing"``, ``"running
    the passes"``, ``"building the automaton"``, ``"recording the IR"``); ``deadline``
    (default: a fresh one of ``limits.max_compile_seconds``) bounds the automaton's
    construction."""
    progress("parsing")
    lowered = lower(source, format, options, source_name, limits)
    return compile_lowered(lowered, source, format, options, limits, progress, special_names, deadline)


def compile_lowered(
    lowered: Grammar,
    source: str,
    format: str,
    options: CompileOptions = CompileOptions(),
    limits: Limits = DEFAULT_LIMITS,
    progress: Callable[[str], None] = lambda stage: None,
    special_names: Mapping[str, int] | None = None,
    deadline: Deadline | None = None,
) -> Compiled:
    """:func:`compile_source` from the IR grammar on: ``lowered`` is the grammar of
    ``source`` in ``format`` (both recorded in the artifact's provenance); the entry point of
    grammars composed in Python (:mod:`gramc.grammar`), which have no frontend."""
    grammar = resolve_token_names(lowered, special_names)
    with _depth_as_limit():
        kind, automaton = build_automaton(grammar, limits, deadline, progress)
    progress("recording the IR")
    meta = SourceMeta({
        "format": format,
        "sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(),
        "options": options.to_meta(),
        "compiler_version": __version__,
    }, grammar)
    if lowered.captures or lowered.uncaptured:  # grammars without captures carry nothing more
        grammar.captures, grammar.uncaptured = lowered.captures, lowered.uncaptured
        meta["captures"] = capture_grammar(grammar)
    if grammar.unique is not None:  # enforced by the matcher (gramc.runtime.unique)
        meta["unique"] = grammar.unique
    return Compiled(grammar, kind, automaton, meta)
