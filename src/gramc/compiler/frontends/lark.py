"""The Lark frontend: Lark grammar text to the IR (see docs/grammars/lark.md).

The grammar text is parsed by the ``lark`` package's own grammar loader
(:class:`lark.load_grammar.GrammarBuilder`: ``%import``, ``%override``, ``%extend``,
``%ignore``, terminal inlining and its checks), and the loader's definitions are lowered here:

- every rule becomes an IR rule of the same name; ``?rule``, ``!rule``, ``_rule``, aliases
  (``-> name``) and priorities (``rule.2``, ``TERM.2``) shape Lark's parse trees or steer its
  lexer and parser, so they do not change the language and are ignored;
- every terminal used becomes an IR rule of the same name holding the strings it matches as a
  whole (see :mod:`gramc.compiler.frontends.lark_terminals`); gramc has no lexer, so there is
  no maximal munch, no terminal priority and no collision between terminals;
- templates (``_sep{x, sep}: ...``) are expanded, one rule per distinct argument list;
- ``%ignore`` inserts ``__ignore ::= (T1 | T2 ...)*`` after every terminal occurrence and at
  the start (rule ``__start``), so ignored text may appear before, between and after tokens;
- llguidance's dialect (special tokens, ``{m,n}``, ``%json``, ``%lark``, ``%regex``, ``&``/``~``,
  ``%llguidance``, rule attributes) is rewritten into plain Lark first
  (:mod:`gramc.compiler.frontends.lark_dialect`); a rule with ``[lazy]``, ``stop=`` or
  ``suffix=`` is one lexeme holding the shortest matches of its body (and suffix), and cuts
  the lexemes allowed next to it as llguidance's lexer does
  (:mod:`gramc.compiler.frontends.lark_lexemes`); parametric rules ``name::_`` get one rule
  per reachable parameter value (:mod:`gramc.compiler.frontends.lark_parametric`);
- ``%declare`` is refused: declared terminals come from lexer callbacks or a postlexer.

Malformed text raises :class:`~gramc.errors.GrammarSyntaxError` with the position lark
reports; features gramc cannot honour (``%declare``, ``max_tokens=``, ``<[*]>``, some
lookarounds) raise :class:`~gramc.errors.UnsupportedFeatureError`.

>>> print(parse_lark('start: "a" NUM+\\nNUM: /[0-9]/'))
start ::= "a" NUM+
NUM ::= [0-9]
<BLANKLINE>
"""

from __future__ import annotations

import re
import sys
import warnings
from collections import deque
from collections.abc import Sequence
from typing import Any, cast

from lark import Token as LarkToken
from lark import Tree
from lark.exceptions import GrammarError, UnexpectedInput
from lark.grammar import NonTerminal, Terminal
from lark.load_grammar import GrammarBuilder

from gramc.compiler.frontends.language_ops import complement, intersection, substitute
from gramc.compiler.frontends.lark_dialect import Dialect, Op, prepare
from gramc.compiler.frontends.lark_lexemes import Resolution, conflicts, resolve
from gramc.compiler.frontends.lark_terminals import (
    TerminalLowerer,
    char_range,
    repeat_bounds,
    shortest_matches,
)
from gramc.compiler.ir import (
    ALL_BYTES,
    EMPTY,
    NOTHING,
    Alt,
    Bytes,
    Expr,
    Grammar,
    Ref,
    Seq,
    alt,
    optional,
    repeat,
    seq,
)
from gramc.errors import (
    GramcError,
    GramcWarning,
    GrammarSyntaxError,
    LimitExceededError,
    Span,
    UnsupportedFeatureError,
)
from gramc.limits import DEFAULT_LIMITS, Limits

MAX_TEMPLATE_INSTANCES = 10_000
MAX_PARAM_INSTANCES = 10_000  # rules name::value of llguidance's parametric rules
PARAM = "::"  # the template environment's key for the current parametric rule's parameter
ALL_BYTES_EXPR = Bytes(ALL_BYTES)
MAX_LAZY_STATES = 100_000  # DFA states of a lazy lexeme's body·suffix
IGNORE_RULE = "__ignore"
START_RULE = "__start"


def parse_lark(
    text: str,
    source_name: str = "<lark>",
    start: str = "start",
    *,
    import_paths: Sequence[str] = (),
    limits: Limits = DEFAULT_LIMITS,
) -> Grammar:
    """Lower a Lark grammar to an IR :class:`~gramc.compiler.ir.Grammar`.

    Args:
        text: the grammar text (Lark syntax, plus llguidance's special tokens).
        source_name: the name error spans carry; relative ``%import`` resolves against it.
        start: the start rule. With ``%ignore`` the grammar's start is ``__start``, which
            allows ignored text before it.
        import_paths: extra directories for ``%import`` (lark's standard library, e.g.
            ``common``, is always available).
        limits: ``max_repeat`` bounds ``x~n..m`` and the ``{m,n}`` of terminal regexes,
            ``max_nesting`` the nesting of ``( )`` / ``[ ]`` groups and of regex groups.

    Raises:
        GrammarSyntaxError: the text is not a valid Lark grammar.
        UnsupportedFeatureError: ``%declare``, a dialect extension, or a regex feature gramc
            cannot honour.
        LimitExceededError: a repetition bound, template expansion or nesting limit.
    """
    _check_nesting(text, source_name, limits)
    dialect = prepare(text, source_name)
    src = _SourceMap(dialect)
    loaded = _load(dialect.text, src, list(import_paths))
    _check_declare(loaded, dialect, src)
    try:
        return _Lowerer(loaded, src, dialect, limits, list(import_paths)).run(start)
    except RecursionError:
        depth = sys.getrecursionlimit()
        hint = "the grammar nests deeper than Python's recursion limit"
        raise LimitExceededError("expression_depth", depth + 1, depth, hint) from None


# ---------------------------------------------------------------- nesting

#: What the nesting check skips over: string and regex literals and comments (as lark's
#: own lexer reads them), so brackets inside them do not count.
_NESTING_TOKENS = re.compile(
    r'"(?:\\.|[^"\\\n])*"|/(?!/)(?:\\.|[^/\\])*/|//[^\n]*|#[^\n]*|[(\[]|[)\]]|[^"/#()\[\]]+|.',
    re.DOTALL,
)


def _check_nesting(text: str, source_name: str, limits: Limits) -> None:
    """LimitExceededError at the first ``(`` or ``[`` nested deeper than ``max_nesting``
    (before lark's loader, whose tree walks recurse, sees the text)."""
    depth = 0
    for m in _NESTING_TOKENS.finditer(text):
        bracket = m.group()
        if bracket in ("(", "["):
            depth += 1
            limits.check("max_nesting", depth, "nested group", Span.at(text, m.start(), source_name))
        elif bracket in (")", "]"):
            depth = max(depth - 1, 0)


# ---------------------------------------------------------------- positions


class _SourceMap:
    """Spans in the user's text for lark tokens, definitions and error messages. Offsets
    into the rewritten text lark parses (:attr:`prepared`) are mapped back with
    :meth:`Dialect.original`."""

    def __init__(self, dialect: Dialect):
        self.dialect = dialect
        self.text = dialect.source
        self.source_name = dialect.source_name
        self.renames = dialect.names  # placeholder -> original text
        self.prepared = dialect.text

    def at(self, offset: int) -> Span:
        """The span at ``offset`` in the user's text."""
        return Span.at(self.text, offset, self.source_name)

    def at_prepared(self, offset: int) -> Span:
        """The span at ``offset`` in the rewritten text."""
        return self.at(self.dialect.original(offset))

    def token(self, tok: Any) -> Span | None:
        """The span of a lark token when it comes from this text (not from an import)."""
        pos = getattr(tok, "start_pos", None)
        if not isinstance(tok, LarkToken) or pos is None or pos < 0:
            return None
        if self.prepared[pos : pos + len(tok)] == str(tok) and pos < len(self.prepared):
            return self.at_prepared(pos)
        return None

    def definition(self, name: str) -> Span:
        """Where ``name`` is defined (or imported, or first mentioned)."""
        for pattern in (
            rf"^[ \t]*(?:%override[ \t]+)?[!?]*{re.escape(name)}\b",
            rf"%import[^\n]*\b{re.escape(name)}\b",
        ):
            m = re.search(pattern, self.text, re.MULTILINE)
            if m:
                return self.at(m.end() - len(name) if m.group().endswith(name) else m.start())
        return self.mention(name)

    def mention(self, name: str, nth: int = 0) -> Span:
        hits = [m.start() for m in re.finditer(rf"(?<![\w]){re.escape(name)}(?!\w)", self.prepared)]
        return self.at_prepared(hits[min(nth, len(hits) - 1)]) if hits else self.at(0)

    def clean(self, message: str) -> str:
        """A lark message's first line, without its position and with original names."""
        line = message.strip().splitlines()[0] if message.strip() else "invalid grammar"
        line = re.sub(r",? at line \d+,? column \d+.*$", "", line)
        line = re.sub(r"(?:Non)?Terminal\('([^']*)'\)", r"\1", line)
        for placeholder, original in self.renames.items():
            line = line.replace(placeholder, original)
        return line


# ---------------------------------------------------------------- loading and lark's errors


def _load(text: str, src: _SourceMap, import_paths: list[str]) -> Any:
    """lark's loader on ``text``: a ``lark.load_grammar.Grammar`` (rule_defs, term_defs,
    ignore); its exceptions become gramc's."""
    builder = GrammarBuilder(False, list(import_paths))  # lark's list also takes callables
    try:
        builder.load_grammar(text, src.source_name)
        return builder.build()
    except GramcError:
        raise
    except UnexpectedInput as e:
        raise _from_unexpected(e, None, src) from None
    except GrammarError as e:
        raise _from_grammar_error(e, src) from None
    except OSError as e:
        name = getattr(e, "filename", None) or str(e)
        stem = str(name).removesuffix(".lark").replace("/", ".")
        where = re.search(rf"%import\s+\.?{re.escape(stem)}", src.text)
        reason = f"cannot import {name}: no such grammar"
        raise GrammarSyntaxError(reason, src.at(where.start() if where else 0)) from None
    except Exception as e:  # noqa: BLE001  lark's assertions or internal errors: no traceback
        raise GrammarSyntaxError(f"lark could not load the grammar: {e}", src.at(0)) from None


def _from_unexpected(e: UnexpectedInput, message: str | None, src: _SourceMap) -> GramcError:
    offset = getattr(e, "pos_in_stream", None)
    if offset is None or offset < 0:
        offset = _offset_of_line_col(src.prepared, e.line, e.column)
    offset = src.dialect.original(offset)
    extension = _extension_at(src.text, offset)
    if extension:
        return UnsupportedFeatureError(extension, src.at(offset))
    return GrammarSyntaxError(message or _unexpected_reason(e, src.text, offset), src.at(offset))


def _unexpected_reason(e: UnexpectedInput, text: str, offset: int) -> str:
    token = getattr(e, "token", None)
    if token is not None:
        shown = "end of line" if str(token).strip() == "" else repr(str(token))
        return f"unexpected {shown}"
    if offset >= len(text):
        return "unexpected end of input"
    c = text[offset]
    unterminated = {'"': "unterminated string", "/": "unterminated regex"}
    return unterminated.get(c) or f"unexpected character {c!r}"


def _offset_of_line_col(text: str, line: int, col: int) -> int:
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    return starts[min(max(line, 1), len(starts)) - 1] + max(col, 1) - 1


def _from_grammar_error(e: GrammarError, src: _SourceMap) -> GramcError:
    context = e.__context__
    message = src.clean(str(e))
    if isinstance(context, UnexpectedInput):
        generic = message.startswith("Unexpected input")
        return _from_unexpected(context, None if generic else message and message[0].lower() + message[1:], src)
    raw = re.sub(r"(?:Non)?Terminal\('([^']*)'\)", r"\1", str(e))
    return GrammarSyntaxError(message, _guess_span(raw, src))


def _guess_span(message: str, src: _SourceMap) -> Span:
    names = re.findall(r"'([^'\s]+)'", message)
    names += re.findall(r"(?:[Rr]ule|[Tt]erminal|[Tt]emplate|for|[(:])\s*([A-Za-z_]\w*)", message)
    for name in names:
        if "more than once" in message:
            return (
                src.mention(name, nth=1)
                if _count_defs(src.text, name) < 2
                else _nth_def(src, name, 1)
            )
        if message.startswith("Recursion in"):
            return src.definition(name)
        if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", src.prepared):
            return src.mention(name)
    return src.at(0)


def _count_defs(text: str, name: str) -> int:
    return len(re.findall(rf"^[ \t]*[!?]*{re.escape(name)}\b", text, re.MULTILINE))


def _nth_def(src: _SourceMap, name: str, nth: int) -> Span:
    hits = list(re.finditer(rf"^[ \t]*[!?]*({re.escape(name)})\b", src.text, re.MULTILINE))
    return src.at(hits[nth].start(1))


# Text at a lark syntax error that is a known extension of another engine's Lark dialect.
_EXTENSIONS = (
    (re.compile(r"%(json|lark|regex|llguidance)\b"), "%{0} (an llguidance/xgrammar extension)"),
    (re.compile(r"%if\b"), "%if conditions (llguidance parametric rules)"),
    (re.compile(r"::"), "parametric rules name::param (llguidance)"),
    (
        re.compile(r"\[\s*(lazy|stop|suffix|capture|max_tokens|temperature)\b"),
        "rule attribute [{0}] (llguidance/xgrammar)",
    ),
    (re.compile(r"\{\s*-?[0-9]*\s*(?:,\s*-?[0-9]*\s*)?\}"), "{{m,n}} repetition without bounds"),
    (re.compile(r"&"), "terminal intersection & (llguidance)"),
    (re.compile(r"~\s*[/(\"A-Z]"), "terminal negation ~ (llguidance)"),
)


def _extension_at(text: str, offset: int) -> str | None:
    for at in (offset, offset - 1):
        for pattern, feature in _EXTENSIONS:
            m = pattern.match(text, max(at, 0))
            if m:
                return feature.format(*m.groups())
    return None


def _check_declare(loaded: Any, dialect: Dialect, src: _SourceMap) -> None:
    placeholders = set(dialect.placeholders())
    declared = [n for n, (tree, _p) in loaded.term_defs if tree is None]
    declared += [
        n for n, _p, tree, _o in loaded.rule_defs if tree is None and n not in placeholders
    ]
    if not declared:
        return
    where = re.search(r"%declare\b", src.text)
    span = src.at(where.start()) if where else src.definition(declared[0])
    raise UnsupportedFeatureError(
        "%declare",
        span,
        f"%declare {' '.join(declared)}: declared terminals are produced by a lexer callback or "
        "a postlexer (such as lark's Indenter), which gramc cannot run",
    )


# ---------------------------------------------------------------- lowering


class _Lowerer:
    """Lower lark's loaded definitions, reachable from the start rule, to IR rules."""

    def __init__(self, loaded: Any, src: _SourceMap, dialect: Dialect, limits: Limits,
                 import_paths: list[str]):
        self.src = src
        self.rule_defs = {n: (tuple(p), t) for n, p, t, _o in loaded.rule_defs}
        self.term_defs = {n: t for n, (t, _p) in loaded.term_defs}
        self.ignore = list(dict.fromkeys(loaded.ignore))
        self.dialect = dialect
        self.tokens = dialect.tokens
        self.limits = limits
        self.import_paths = import_paths
        self.max_repeat = limits.max_repeat
        self.terms = TerminalLowerer(self._span_of, limits, self._marker_literal)
        self.rules: dict[str, Expr | None] = {}
        self.queue: deque[tuple] = deque()
        self.instances: dict[tuple, str] = {}
        self.gap: Expr = Ref(IGNORE_RULE) if self.ignore else EMPTY
        self.current = ""
        self.lexeme_stack: list[str] = []  # rules being inlined into a lexeme ([lazy] etc.)
        self.sub_starts: dict[str, str] = {}  # %json / %lark placeholder -> its start rule
        self.lazy: dict[str, Expr] = {}  # lazy rule -> its lexeme
        self.captures: dict[str, str] = {}  # [capture] rule -> the capture's name
        self.capture_problems: dict[str, str] = {}  # capture name -> why it is not reported
        self.param_instances = 0
        # With lazy lexemes, literals in rules are lexeme rules until their competition is
        # decided (lark_lexemes needs lexeme boundaries), then inlined again.
        self.literal_rules: dict[Expr, str] | None = (
            {} if any(a.lazy or a.stop or a.suffix for a in dialect.attributes.values()) else None)

    def run(self, start: str) -> Grammar:
        self._check_start(start)
        if self.ignore:
            self.rules[START_RULE] = seq(self.gap, Ref(start))
        self._rule_ref(start)
        if self.ignore:
            self.rules[IGNORE_RULE] = None
            once = self.dialect.options.get("skip_repetition") == "once"
            self.rules[IGNORE_RULE] = repeat(
                alt(*(self._term_ref(t) for t in self.ignore)), 0, 1 if once else None
            )
        while self.queue:
            self._lower_next(*self.queue.popleft())
        self._decide_lazy_competition(START_RULE if self.ignore else start)
        # Every placeholder None is replaced once the queue is empty.
        return Grammar(cast("dict[str, Expr]", self.rules), START_RULE if self.ignore else start,
                       captures=self.captures, uncaptured=self.capture_problems)

    def _span_of(self, tok: Any) -> Span:
        return self.src.token(tok) or self.src.definition(self.current)

    def _check_start(self, start: str) -> None:
        if start in self.term_defs:
            raise GrammarSyntaxError(
                f"the start symbol must be a rule, not the terminal {start}",
                self.src.definition(start),
            )
        if start not in self.rule_defs:
            raise GrammarSyntaxError(f"the start rule {start!r} is not defined", self.src.at(0))
        if self.rule_defs[start][0]:
            raise GrammarSyntaxError(
                f"the start rule {start!r} is a template", self.src.definition(start)
            )
        if start in self.dialect.parametric:
            raise GrammarSyntaxError(
                f"the start rule {start!r} is parametric", self.src.definition(start)
            )

    def _lower_next(self, kind: str, name: str, *rest: Any) -> None:
        self.current = name
        if kind == "term":
            self.rules[name] = self._terminal(name)
        elif kind == "rule" and name in self.dialect.attributes:
            body = self._attributed(name)
            attrs = self.dialect.attributes[name]
            if attrs.capture is not None or attrs.stop_capture is not None:
                body = self._captured(name, body)
            self.rules[name] = seq(body, self.gap)
        elif kind == "rule":
            self.rules[name] = self._expr(self.rule_defs[name][1], {})
        else:
            tree, env, self.current = rest[0], rest[1], rest[2]
            self.rules[name] = self._expr(tree, env)

    def _terminal(self, name: str) -> Expr:
        tree = self.term_defs[name]
        if len(tree.children) == 1 and not tree.children[0].children:
            raise GrammarSyntaxError(f"terminal {name} is empty", self.src.definition(name))
        return self.terms.lower(name, tree)

    def _rule_ref(self, name: str) -> Expr:
        if name not in self.rules:
            self.rules[name] = None
            self.queue.append(("rule", name))
        return Ref(name)

    def _term_ref(self, name: str) -> Expr:
        if name not in self.rules:
            self.rules[name] = None
            self.queue.append(("term", name))
        return Ref(name)

    # ------------------------------------------------------------ rule bodies

    def _expr(self, node: Any, env: dict) -> Expr:
        if not isinstance(node, Tree):
            return self._symbol(node, env)
        return getattr(self, f"_r_{node.data}")(node, env)

    def _r_expansions(self, node: Tree, env: dict) -> Expr:
        return alt(*(self._expr(c, env) for c in node.children))

    def _r_expansion(self, node: Tree, env: dict) -> Expr:
        names = [_symbol_name(c) for c in node.children]
        if any(self._condition(n, env) is NOTHING for n in names if n in self.dialect.conds):
            return NOTHING  # before its references: they would instantiate unreachable rules
        return seq(*(self._expr(c, env) for c in node.children))

    def _r_alias(self, node: Tree, env: dict) -> Expr:
        return self._expr(node.children[0], env)

    def _r_expr(self, node: Tree, env: dict) -> Expr:
        lo, hi = repeat_bounds(node.children[1:], self._span_of, self.max_repeat)
        return repeat(self._expr(node.children[0], env), lo, hi)

    def _r_maybe(self, node: Tree, env: dict) -> Expr:
        return optional(self._expr(node.children[0], env))

    def _r_value(self, node: Tree, env: dict) -> Expr:
        return self._expr(node.children[0], env)

    def _r_literal(self, node: Tree, env: dict) -> Expr:
        token = cast(LarkToken, node.children[0])  # lark's loader: a literal holds its token
        return seq(self._lexeme_leaf(self.terms.lower_literal(token)), self.gap)

    def _r_range(self, node: Tree, env: dict) -> Expr:
        try:
            expr = char_range(*cast("list[LarkToken]", node.children))  # a range's two ends
        except GrammarSyntaxError as e:
            raise GrammarSyntaxError(e.reason, self._span_of(node.children[0])) from None
        except GrammarError as e:
            raise GrammarSyntaxError(
                self.src.clean(str(e)), self._span_of(node.children[0])
            ) from None
        return seq(self._lexeme_leaf(expr), self.gap)

    def _lexeme_leaf(self, expr: Expr) -> Expr:
        """A literal in a rule: itself, or while lazy competition is pending, a lexeme rule."""
        if self.literal_rules is None or self.lexeme_stack:
            return expr
        if expr not in self.literal_rules:
            self.literal_rules[expr] = name = f"{expr}"
            if name in self.rules:  # a rule of that name exists: lark's names have no quotes
                self.literal_rules[expr] = name = f"{expr}#{len(self.literal_rules)}"
            self.rules[name] = expr
        return Ref(self.literal_rules[expr])

    def _symbol(self, sym: Any, env: dict) -> Expr:
        if isinstance(sym, Terminal):
            if self.lexeme_stack:
                return self._terminal(sym.name)
            return seq(self._term_ref(sym.name), self.gap)
        name = sym.name
        if name in env:
            return env[name][0]
        if name in self.dialect.conds or name in self.dialect.param_refs:
            if self.lexeme_stack:
                raise self._not_a_lexeme(f"it uses {self.src.renames[name]}")
            if name in self.dialect.conds:
                return self._condition(name, env)
            return self._param_ref(name, env)
        if name in self.dialect.parametric:
            raise GrammarSyntaxError(
                f"rule {name!r} is parametric, but no parameter is given", self.src.mention(name)
            )
        if name in self.tokens or name in self.dialect.subgrammars:
            if self.lexeme_stack:
                raise self._not_a_lexeme(f"it uses {self.src.renames[name]}")
            if name in self.tokens:
                return seq(self.tokens[name], self.gap)
            return seq(self._subgrammar(name), self.gap)
        if self.lexeme_stack and name in self.rule_defs and not self.rule_defs[name][0]:
            return self._inline_rule(name)
        if name not in self.rule_defs:
            raise GrammarSyntaxError(f"rule {name!r} is not defined", self.src.mention(name))
        if self.rule_defs[name][0]:
            raise GrammarSyntaxError(
                f"template {name} used without arguments", self.src.mention(name)
            )
        return self._rule_ref(name)

    # ------------------------------------------------------------ templates

    def _r_template_usage(self, node: Tree, env: dict) -> Expr:
        name = cast(NonTerminal, node.children[0]).name  # lark's loader: the template's name
        if self.lexeme_stack:
            raise self._not_a_lexeme(f"it uses the template {name}")
        params, tree = self.rule_defs[name]
        args = [(self._expr(a, env), self._display(a, env)) for a in node.children[1:]]
        key = (name, tuple(a[0] for a in args))
        if key not in self.instances:
            if len(self.instances) >= MAX_TEMPLATE_INSTANCES:
                hint = f"template {name} at {self.src.mention(name)}"
                raise LimitExceededError(
                    "max_template_instances", len(self.instances) + 1, MAX_TEMPLATE_INSTANCES, hint
                )
            inst = f"{name}{{{','.join(d for _e, d in args)}}}"
            if inst in self.rules:
                inst = f"{inst}#{len(self.instances)}"
            self.instances[key] = inst
            self.rules[inst] = None
            self.queue.append(("inst", inst, tree, dict(zip(params, args)), name))
        return Ref(self.instances[key])

    def _display(self, node: Any, env: dict) -> str:
        if isinstance(node, Tree) and node.data == "value":
            return self._display(node.children[0], env)
        if isinstance(node, Tree) and node.data == "template_usage":
            inner = ",".join(self._display(a, env) for a in node.children[1:])
            return f"{cast(NonTerminal, node.children[0]).name}{{{inner}}}"
        if isinstance(node, Tree):
            return "..".join(str(c) for c in node.children)
        if isinstance(node, NonTerminal) and node.name in env:
            return env[node.name][1]
        return self.src.renames.get(node.name, node.name)

    # ------------------------------------------------------------ parametric rules

    def _condition(self, placeholder: str, env: dict) -> Expr:
        """``%if cond``: the empty string where the current parameter satisfies it, else
        nothing (the alternative it ends does not exist for this parameter)."""
        cond = self.dialect.conds[placeholder]
        if cond.is_true:
            return EMPTY
        if PARAM not in env:
            raise self._needs_param(placeholder)
        return EMPTY if cond.eval(env[PARAM]) else NOTHING

    def _param_ref(self, placeholder: str, env: dict) -> Expr:
        """``name::expr``: a reference to the rule ``name::<value>``, the instance of the
        parametric rule ``name`` for the value of ``expr`` (lowered once per value)."""
        target, expr = self.dialect.param_refs[placeholder]
        shown = self.src.renames[placeholder]
        if target not in self.dialect.parametric:
            defined = target in self.rule_defs or target in self.term_defs
            reason = f"{target!r} is not parametric" if defined else f"rule {target!r} is not defined"
            raise GrammarSyntaxError(f"{reason}, but {shown} gives it a parameter",
                                     self.src.mention(placeholder))
        if expr.uses_param and PARAM not in env:
            raise self._needs_param(placeholder)
        inst = f"{target}::{expr.eval(env.get(PARAM, 0)):#x}"
        if inst not in self.rules:
            if self.param_instances >= MAX_PARAM_INSTANCES:
                raise LimitExceededError(
                    "max_parametric_instances", self.param_instances + 1, MAX_PARAM_INSTANCES,
                    f"parametric rule {target}", self.src.definition(target))
            if not any(self._uses_param(t) for t in self.rule_defs[target][1].iter_subtrees()):
                raise GrammarSyntaxError(
                    f"rule {target!r} is parametric, but its body does not use the parameter",
                    self.src.definition(target))
            self.param_instances += 1
            self.rules[inst] = None
            self.queue.append(("inst", inst, self.rule_defs[target][1],
                               {PARAM: expr.eval(env.get(PARAM, 0))}, target))
        return Ref(inst)

    def _uses_param(self, tree: Tree) -> bool:
        for c in tree.children:
            name = _symbol_name(c)
            if name in self.dialect.conds and not self.dialect.conds[name].is_true:
                return True
            if name in self.dialect.param_refs and self.dialect.param_refs[name][1].uses_param:
                return True
        return False

    def _needs_param(self, placeholder: str) -> GrammarSyntaxError:
        return GrammarSyntaxError(
            f"rule {self.current!r} is not parametric, but {self.src.renames[placeholder]} "
            "uses the parameter", self.src.mention(placeholder))

    # ------------------------------------------------------------ llguidance extensions

    def _marker_literal(self, value: str) -> Expr | None:
        """The IR a marker literal stands for (None: ``value`` is not a marker)."""
        if value not in self.dialect.markers:
            return None
        return self._marker(self.dialect.markers[value])

    def _marker(self, value: Any) -> Expr:
        """The IR of a marker literal's value: an expression, or an ``&``/``~`` tree."""
        if not isinstance(value, Op):
            return cast(Expr, value)
        if value.kind == "term":
            name = self.terms.name
            try:
                return self._terminal(value.args[0])
            finally:
                self.terms.name = name
        parts = [self._marker(a) for a in value.args if isinstance(a, Op)]
        span = self.src.definition(self.current)
        if value.kind == "and":
            return intersection(parts, span=span, limits=self.limits)
        if value.kind == "not":
            return complement(parts[0], span=span, limits=self.limits)
        if value.kind == "seq":
            return seq(*parts)
        if value.kind == "alt":
            return alt(*parts)
        lo, hi = value.args[1], value.args[2]
        if (hi or lo) > self.max_repeat:
            raise LimitExceededError("max_repeat", hi or lo, self.max_repeat, "repetition", span)
        return repeat(parts[0], lo, hi)

    def _subgrammar(self, name: str) -> Expr:
        """A reference to the start of an inline ``%json`` / ``%lark`` grammar, whose rules
        join the grammar renamed ``<placeholder>.<rule>`` (an independent namespace)."""
        if name not in self.sub_starts:
            sub = self.dialect.subgrammars[name]
            if sub.kind == "json":
                g = _json_schema(sub.body, self.src.source_name, self.limits)
            else:
                g = parse_lark(sub.body, self.src.source_name, import_paths=self.import_paths,
                               limits=self.limits)
            renamed = {r: Ref(f"{name}.{r}") for r in g.rules}
            for r, body in g.rules.items():
                self.rules[f"{name}.{r}"] = substitute(body, renamed)
            self.captures.update((f"{name}.{r}", c) for r, c in g.captures.items())
            self.capture_problems.update(g.uncaptured)
            self.sub_starts[name] = f"{name}.{g.start}"
        return Ref(self.sub_starts[name])

    def _captured(self, name: str, body: Expr) -> Expr:
        """Record rule ``name``'s captures: its text (the rule itself, or without the
        ``%ignore`` gap after it, a rule ``<name>.capture``). The text a ``stop=``/``suffix=``
        matched is part of the lexeme here, so those captures are listed as not reported."""
        attrs = self.dialect.attributes[name]
        if attrs.stop_capture is not None:
            self.capture_problems[attrs.stop_capture or name] = "stop_capture= is not implemented"
        if attrs.capture is None:
            return body
        capture = attrs.capture or name
        if attrs.stop or attrs.suffix:
            self.capture_problems[capture] = ("a [capture] with stop= or suffix= (its text would "
                                              "leave out the stop string) is not implemented")
            return body
        inner = self._without_gap(body)
        if self.gap is EMPTY or inner is None:  # the capture holds the text after the rule's
            self.captures[name] = capture       # last terminal that %ignore skips, if any
            return body
        self.rules[f"{name}.capture"] = inner
        self.captures[f"{name}.capture"] = capture
        return Ref(f"{name}.capture")

    def _without_gap(self, e: Expr) -> Expr | None:
        """``e`` without the ``%ignore`` gap that ends each of its words, or None where one
        does not end in it."""
        if e == self.gap:
            return EMPTY
        if isinstance(e, Seq) and e.items[-1] == self.gap:
            return seq(*e.items[:-1])
        if isinstance(e, Alt):
            parts = [self._without_gap(item) for item in e.items]
            return None if any(p is None for p in parts) else alt(*cast("list[Expr]", parts))
        return None

    def _attributed(self, name: str) -> Expr:
        """A rule with llguidance attributes: its body as one lexeme, made lazy by ``lazy``,
        ``stop=`` or ``suffix=`` (the shortest strings of body·suffix)."""
        attrs = self.dialect.attributes[name]
        if attrs.unsupported:
            feature = f"rule attribute [{attrs.unsupported[0]}]"
            raise UnsupportedFeatureError(
                feature, attrs.span, f"{feature} steers sampling or counts LLM tokens; it does "
                "not define a language over bytes that gramc can compile")
        if attrs.stop_is_empty:
            raise UnsupportedFeatureError(
                'rule attribute [stop=""]', attrs.span, 'stop="" ends the rule at the model\'s EOS '
                "token, which llguidance then hides; that is not a language over bytes")
        if not (attrs.lazy or attrs.stop or attrs.suffix):
            return self._expr(self.rule_defs[name][1], {})  # [capture] only: same language
        body = self._inline_rule(name)
        closing = attrs.stop or attrs.suffix
        if closing:
            body = seq(body, self._terminal(closing))
        shortest = shortest_matches(body, MAX_LAZY_STATES)
        if shortest is None:
            raise LimitExceededError(
                "max_lazy_states", MAX_LAZY_STATES + 1, MAX_LAZY_STATES,
                f"the lazy lexeme {name}", attrs.span)
        self.lazy[name] = shortest
        return shortest

    def _decide_lazy_competition(self, start: str) -> None:
        """Write llguidance's lexer decision between lazy lexemes and the lexemes allowed
        next to them into the rules (:mod:`~gramc.compiler.frontends.lark_lexemes`); warn
        where it cannot be written exactly. Literal lexeme rules are inlined again."""
        literals = {name: expr for expr, name in (self.literal_rules or {}).items()}
        if self.lazy:
            lexemes = {t: e for t in self.term_defs if (e := self.rules.get(t)) is not None}
            lexemes.update(literals)
            lexemes.update(self.lazy)
            rules = cast("dict[str, Expr]", self.rules)
            if self.ignore:  # llguidance's %ignore is another lexer decision: not modelled
                found = conflicts(lexemes, self.lazy, self.limits)
                result = Resolution(rules, sorted((x, h) for x, hs in found.items() for h in hs))
            else:
                result = resolve(rules, start, lexemes, self.lazy,
                                 set(self.sub_starts.values()), self.limits)
            self.rules = cast("dict[str, Expr | None]", result.rules)
            for lexeme, lazy in result.inexact:
                what = literals.get(lexeme, lexeme)
                kind = "terminal" if lexeme in self.term_defs else (
                    "lazy rule" if lexeme in self.lazy else "")
                shown = f"{kind} {what}".strip() if lexeme not in self.sub_starts.values() else \
                    self.src.renames.get(lexeme.split(".")[0], lexeme)
                warnings.warn(
                    f"{self.src.definition(lazy)}: the lazy rule {lazy} can end inside {shown}; "
                    f"llguidance's lexer then ends {lazy} and drops {shown} where both are "
                    "allowed, which gramc cannot decide exactly here: it keeps both and "
                    "accepts more", GramcWarning, stacklevel=5)
        for name in literals:
            del self.rules[name]
        if literals:
            self.rules = {n: substitute(cast(Expr, e), literals) for n, e in self.rules.items()}

    def _inline_rule(self, name: str) -> Expr:
        """The body of rule ``name`` as one lexeme: terminals and rules inlined, no
        ``%ignore`` gaps (llguidance: the body of a lazy rule is a single terminal)."""
        if name in self.lexeme_stack:
            raise self._not_a_lexeme(f"it is recursive through {name}", self.lexeme_stack[0])
        gap, self.gap = self.gap, EMPTY
        self.lexeme_stack.append(name)
        try:
            return self._expr(self.rule_defs[name][1], {})
        finally:
            self.lexeme_stack.pop()
            self.gap = gap

    def _not_a_lexeme(self, why: str, name: str | None = None) -> UnsupportedFeatureError:
        name = name or self.lexeme_stack[0]
        return UnsupportedFeatureError(
            "non-regular body of a lazy rule", self.dialect.attributes[name].span,
            f"rule {name} has [lazy], stop= or suffix=, so its body must be one lexeme, but {why}")


def _symbol_name(node: Any) -> str | None:
    """The rule or terminal name a loader node stands for (a symbol, or a value holding one)."""
    if isinstance(node, Tree) and node.data == "value" and len(node.children) == 1:
        node = node.children[0]
    return getattr(node, "name", None)


def _json_schema(schema: Any, source_name: str, limits: Limits) -> Grammar:
    """The grammar of an inline ``%json`` schema (gramc's JSON Schema frontend, defaults)."""
    from gramc.schemas import schema_to_grammar

    return schema_to_grammar(schema, source_name=source_name, limits=limits)[0]
