"""The shared IR: named rules whose bodies are expression trees over byte-level leaves.

Every frontend (regex, GBNF, Lark, EBNF, JSON Schema) lowers into this IR, and every
backend (NFA, DFA, PDA) starts from it. Nodes are immutable and hash-consed: building the
same node twice gives the same object, so equality and hashing are cheap and shared
sub-expressions are stored once.

Leaves are byte classes (:class:`Bytes`, a 256-bit set), :data:`EMPTY`, :data:`NOTHING`,
rule references (:class:`Ref`) and special-token terminals (:class:`Token`, matched by token
id, never by bytes; :class:`TokenName` until the name is resolved against a vocabulary).
Unicode is lowered to UTF-8 byte sequences before it reaches the IR.

Build nodes with the smart constructors (:func:`seq`, :func:`alt`, :func:`repeat`,
:func:`byte_class`, :func:`literal`), which flatten and simplify as they go:

>>> print(seq(literal(b"ab"), optional(byte_class(b"0123456789")), repeat(literal(b"c"), 1, None)))
"ab" [0-9]? "c"+
>>> alt(literal(b"x"), NOTHING) is literal(b"x")
True
"""

from __future__ import annotations

import weakref
from collections.abc import Collection, Iterable, Mapping
from functools import lru_cache
from typing import Any, ClassVar, TypeGuard, TypeVar, cast

from gramc.compiler import stackless
from gramc.compiler.stackless import Call

ALL_BYTES = (1 << 256) - 1
_INTERN: "weakref.WeakValueDictionary[tuple, Expr]" = weakref.WeakValueDictionary()
_E = TypeVar("_E", bound="Expr")


class Expr:
    """Base of all IR nodes: immutable, interned, with a cached structural hash."""

    __slots__ = ("_key", "_hash", "__weakref__")
    _fields: ClassVar[tuple[str, ...]] = ()
    _key: tuple[Any, ...]
    _hash: int

    def __new__(cls: type[_E], *args: Any) -> _E:
        key = (cls, *args)
        node = _INTERN.get(key)
        if node is None:
            fresh = object.__new__(cls)
            object.__setattr__(fresh, "_key", key)
            object.__setattr__(fresh, "_hash", hash(key))
            _INTERN[key] = fresh
            return fresh
        return cast(_E, node)  # the key starts with cls, so the interned node is a cls

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for i, name in enumerate(cls.__dict__.get("_fields", ())):
            setattr(cls, name, _field(i + 1))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Expr) and self._key == other._key)

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        return (type(self), self._key[1:])

    def __repr__(self) -> str:
        args = ", ".join(repr(a) for a in self._key[1:])
        return f"{type(self).__name__}({args})"

    def __str__(self) -> str:
        return format_expr(self)

    def children(self) -> tuple["Expr", ...]:
        """The direct sub-expressions."""
        return ()


def _field(index: int) -> property:
    """The read-only property of a node's field: item ``index`` of its intern key."""
    return property(lambda self: self._key[index])


class Bytes(Expr):
    """One byte from a set, given as a 256-bit mask (bit b set = byte b allowed)."""

    __slots__ = ()
    _fields = ("mask",)
    mask: int

    def __new__(cls, mask: int) -> "Bytes":
        if not 0 < mask <= ALL_BYTES:
            raise ValueError("a Bytes mask must be a non-empty subset of 0..255")
        return super().__new__(cls, mask)

    def byte_values(self) -> list[int]:
        """The bytes in the class, ascending."""
        m, out = self.mask, []
        while m:
            low = m & -m
            out.append(low.bit_length() - 1)
            m ^= low
        return out


class Seq(Expr):
    """The concatenation of two or more expressions."""

    __slots__ = ()
    _fields = ("items",)
    items: tuple[Expr, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.items


class Alt(Expr):
    """A choice between two or more expressions (order is kept for stable printing)."""

    __slots__ = ()
    _fields = ("items",)
    items: tuple[Expr, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.items


class Repeat(Expr):
    """``item`` repeated between ``min`` and ``max`` times (``max=None``: unbounded)."""

    __slots__ = ()
    _fields = ("item", "min", "max")
    item: Expr
    min: int
    max: int | None

    def children(self) -> tuple[Expr, ...]:
        return (self.item,)


class Ref(Expr):
    """A reference to the rule ``name`` (a nonterminal)."""

    __slots__ = ()
    _fields = ("name",)
    name: str


class Token(Expr):
    """A special-token terminal, matched by token id (never by bytes)."""

    __slots__ = ()
    _fields = ("id",)
    id: int


class TokenName(Expr):
    """A special-token terminal named by its full text (``<|eot_id|>``, brackets included),
    resolved to a :class:`Token` against the vocabulary's special tokens before automata are
    built."""

    __slots__ = ()
    _fields = ("name",)
    name: str


class Machine(Expr):
    """A regular language given by a small DFA over bytes, kept as one leaf.

    For languages whose automaton is small but whose regular expression is not: the numbers
    divisible by 7 take 7 states and a regular expression of millions of nodes. The Thompson
    construction copies the states (one split and one byte edge per transition), so every
    backend reads it like any other sub-expression.

    ``edges[q]`` lists state ``q``'s transitions as (byte mask, target) with disjoint masks;
    ``accept[q]`` says whether ``q`` is final; ``start`` is the initial state. Build it with
    :func:`machine`, which keeps only the states on a path from ``start`` to acceptance, so
    a Machine (and every Machine reached by reading a prefix of it) is never empty.
    """

    __slots__ = ()
    _fields = ("edges", "accept", "start")
    edges: tuple[tuple[tuple[int, int], ...], ...]
    accept: tuple[bool, ...]
    start: int

    @property
    def n_states(self) -> int:
        return len(self.accept)

    def weight(self) -> int:
        """States plus transitions: what one copy of it costs in a Thompson NFA."""
        return self.n_states + sum(len(row) for row in self.edges)

    def step(self, state: int, byte: int) -> int | None:
        """The state after ``byte`` from ``state`` (None: no transition)."""
        for mask, target in self.edges[state]:
            if mask >> byte & 1:
                return target
        return None

    def longest(self) -> int | None:
        """The most bytes a string of it has; None when a cycle makes it unbounded."""
        return _machine_longest(self)


@lru_cache(maxsize=1024)
def _machine_longest(m: Machine) -> int | None:
    depth: dict[int, int | None] = {}  # None while on the current path
    order: list[tuple[int, bool]] = [(m.start, False)]
    while order:
        q, done = order.pop()
        if done:
            depth[q] = max((1 + cast(int, depth[t]) for _, t in m.edges[q]), default=0)
            continue
        if q in depth:
            if depth[q] is None:
                return None  # a cycle
            continue
        depth[q] = None
        order.append((q, True))
        for _, t in m.edges[q]:
            if t in depth and depth[t] is None:
                return None
            if t not in depth:
                order.append((t, False))
    return depth[m.start]


class _Empty(Expr):
    """The empty string."""

    __slots__ = ()


class _Nothing(Expr):
    """The empty language (matches nothing)."""

    __slots__ = ()


EMPTY: Expr = _Empty()
NOTHING: Expr = _Nothing()


# ---------------------------------------------------------------- smart constructors


def byte_class(values: Iterable[int] | bytes) -> Expr:
    """A class of the given byte values (:data:`NOTHING` when empty)."""
    mask = 0
    for b in values:
        mask |= 1 << b
    return Bytes(mask) if mask else NOTHING


def byte_range(lo: int, hi: int) -> Expr:
    """The class of bytes ``lo..hi`` inclusive."""
    if lo > hi:
        return NOTHING
    return Bytes(((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1))


def any_byte() -> Expr:
    """Any single byte."""
    return Bytes(ALL_BYTES)


def literal(data: bytes) -> Expr:
    """The exact byte string ``data``."""
    return seq(*(Bytes(1 << b) for b in data))


def text(s: str) -> Expr:
    """The UTF-8 encoding of ``s``."""
    return literal(s.encode("utf-8"))


def seq(*items: Expr) -> Expr:
    """Concatenation, flattened; :data:`EMPTY` is dropped, :data:`NOTHING` absorbs."""
    flat: list[Expr] = []
    for item in items:
        if item is NOTHING:
            return NOTHING
        if isinstance(item, Seq):
            flat.extend(item.items)
        elif item is not EMPTY:
            flat.append(item)
    if not flat:
        return EMPTY
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*items: Expr) -> Expr:
    """Choice, flattened and de-duplicated; :data:`NOTHING` is dropped.

    Single-byte alternatives are merged into one byte class (kept at the position of the
    first of them), so ``a|b|c`` becomes ``[a-c]``.
    """
    flat: list[Expr] = []
    seen: set[Expr] = set()
    class_at, class_mask = -1, 0
    for item in _flatten_alt(items):
        if isinstance(item, Bytes):
            if class_at < 0:
                class_at = len(flat)
                flat.append(item)
            class_mask |= item.mask
        elif item not in seen:
            seen.add(item)
            flat.append(item)
    if class_at >= 0:
        flat[class_at] = Bytes(class_mask)
    if not flat:
        return NOTHING
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def _flatten_alt(items: Iterable[Expr]) -> Iterable[Expr]:
    for item in items:
        if isinstance(item, Alt):
            yield from item.items
        elif item is not NOTHING:
            yield item


def repeat(item: Expr, min: int, max: int | None) -> Expr:
    """``item{min,max}`` (``max=None`` for no upper bound), simplified where trivial."""
    if min < 0 or (max is not None and max < min):
        raise ValueError(f"bad repetition bounds {{{min},{max}}}")
    if max == 0 or item is EMPTY:
        return EMPTY
    if item is NOTHING:
        return EMPTY if min == 0 else NOTHING
    if min == 1 and max == 1:
        return item
    return Repeat(item, min, max)


def optional(item: Expr) -> Expr:
    """``item?``."""
    return repeat(item, 0, 1)


def machine(edges: Iterable[Iterable[tuple[int, int]]], accept: Iterable[bool], start: int = 0) -> Expr:
    """The :class:`Machine` of a DFA (``edges[q]``: (byte mask, target) pairs, disjoint per
    state), trimmed to the states reachable from ``start`` that can still reach acceptance and
    numbered breadth-first from it; :data:`NOTHING` when it accepts nothing, a byte class or
    :data:`EMPTY` when that is all it is."""
    rows = [tuple((mask, t) for mask, t in row if mask) for row in edges]
    final = list(accept)
    alive = {q for q, f in enumerate(final) if f}
    preds: dict[int, list[int]] = {}
    for q, row in enumerate(rows):
        for _, t in row:
            preds.setdefault(t, []).append(q)
    todo = list(alive)
    while todo:
        for p in preds.get(todo.pop(), ()):
            if p not in alive:
                alive.add(p)
                todo.append(p)
    if start not in alive:
        return NOTHING
    number = {start: 0}
    queue = [start]
    for q in queue:  # breadth-first: grows while iterated
        for _, t in rows[q]:
            if t in alive and t not in number:
                number[t] = len(number)
                queue.append(t)
    new_rows: list[tuple[tuple[int, int], ...]] = []
    for q in queue:
        by_target: dict[int, int] = {}
        for mask, t in rows[q]:
            if t in alive:
                by_target[number[t]] = by_target.get(number[t], 0) | mask
        new_rows.append(tuple(sorted(((m, t) for t, m in by_target.items()), key=lambda e: e[0] & -e[0])))
    new_accept = tuple(final[q] for q in queue)
    if len(queue) == 1 and not new_rows[0]:
        return EMPTY
    if len(queue) == 2 and new_rows[0] and len(new_rows[0]) == 1 and not new_rows[1] \
            and not new_accept[0] and new_accept[1]:
        return Bytes(new_rows[0][0][0])
    return Machine(tuple(new_rows), new_accept, 0)


# ---------------------------------------------------------------- grammars


class Grammar:
    """A set of named rules and a start rule.

    Rules keep their insertion order, which the printer follows (start rule first).
    ``lexemes`` are sub-expressions without rule references that are words of the language
    (a JSON key that is none of an object's declared names): the rule-keeping compilation
    keeps each whole (see :func:`gramc.compiler.passes.outline_shared`). They are found as
    nodes of the rule bodies, so one must be built to stay a node: an alternation inside a
    sequence (a sequence is flattened into the sequence around it). A lexeme that a pass
    rewrites is no longer one; the language never depends on them.

    ``unique`` is a JSON Schema's ``uniqueItems`` plan (:mod:`gramc.schemas.unique`): a
    condition the matcher enforces beside the language, kept in the artifact. Passes never
    change it; the compiler reads it from the frontend's grammar.
    """

    __slots__ = ("rules", "start", "lexemes", "captures", "uncaptured", "unique")

    def __init__(self, rules: Mapping[str, Expr], start: str, lexemes: Iterable[Expr] = (),
                 captures: Mapping[str, str] | None = None, uncaptured: Mapping[str, str] | None = None,
                 unique: dict[str, Any] | None = None):
        if start not in rules:
            raise ValueError(f"start rule {start!r} is not defined")
        self.rules: dict[str, Expr] = dict(rules)
        self.start = start
        self.lexemes: frozenset[Expr] = frozenset(lexemes)
        #: Rules whose text is reported as a capture, and the capture's name (the language
        #: does not depend on them; see :mod:`gramc.compiler.captures`).
        self.captures: dict[str, str] = dict(captures or {})
        #: Captures the source names that gramc does not report, and why.
        self.uncaptured: dict[str, str] = dict(uncaptured or {})
        self.unique = unique

    @classmethod
    def single(cls, expr: Expr, name: str = "root") -> "Grammar":
        """A grammar with one rule."""
        return cls({name: expr}, name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Grammar) and (self.start, self.rules) == (other.start, other.rules)

    def __hash__(self) -> int:
        return hash((self.start, tuple(self.rules.items())))

    def __str__(self) -> str:
        return format_grammar(self)

    def __repr__(self) -> str:
        return f"Grammar(start={self.start!r}, rules={len(self.rules)})"

    def refs(self, name: str) -> frozenset[str]:
        """The rule names referenced by rule ``name``."""
        return rule_refs(self.rules[name])

    def is_recursive(self) -> bool:
        """True when some rule reachable from the start can reach itself (depth-first, on an
        explicit stack: a chain of rules is as deep as it is long)."""
        state: dict[str, int] = {self.start: 1}  # 1 = on the DFS path, 2 = done
        path = [(self.start, iter(self.refs(self.start)))]
        while path:
            name, pending = path[-1]
            ref = next(pending, None)
            if ref is None:
                state[name] = 2
                path.pop()
            elif ref in self.rules:
                if state.get(ref) == 1:
                    return True
                if ref not in state:
                    state[ref] = 1
                    path.append((ref, iter(self.refs(ref))))
        return False


@lru_cache(maxsize=4096)
def rule_refs(expr: Expr) -> frozenset[str]:
    """The rule names ``expr`` references (memoised: the passes ask again for the same
    bodies, a walk of the whole body each time)."""
    return frozenset(n.name for n in walk(expr) if isinstance(n, Ref))


def walk(expr: Expr, stop: Collection[Expr] = ()) -> Iterable[Expr]:
    """Every node of ``expr`` once (pre-order, shared sub-trees visited once), except the
    nodes in ``stop`` and those only found inside them."""
    seen: set[int] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if id(node) in seen or node in stop:
            continue
        seen.add(id(node))
        yield node
        stack.extend(reversed(node.children()))


def postorder(expr: Expr) -> list[Expr]:
    """Every distinct node of ``expr``, each after all of its children (no recursion)."""
    out: list[Expr] = []
    seen: set[Expr] = set()
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, done = stack.pop()
        if done:
            out.append(node)
        elif node not in seen:
            seen.add(node)
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(node.children()))
    return out


# ---------------------------------------------------------------- printer

_PREC_ALT, _PREC_SEQ, _PREC_POSTFIX = 0, 1, 2
_CLASS_SPECIAL = frozenset(b"]\\^-")


def _byte_text(b: int, special: frozenset[int]) -> str:
    if b in special:
        return "\\" + chr(b)
    if b == 0x0A:
        return "\\n"
    if b == 0x09:
        return "\\t"
    if b == 0x0D:
        return "\\r"
    if 0x20 <= b < 0x7F:
        return chr(b)
    return f"\\x{b:02x}"


@lru_cache(maxsize=4096)  # a JSON grammar writes the same few classes thousands of times
def _format_class(mask: int) -> str:
    negate = bin(mask).count("1") > 128
    if negate:
        mask ^= ALL_BYTES
    values = Bytes(mask).byte_values() if mask else []
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        lo, hi = values[i], values[j]
        if hi - lo >= 2:
            parts.append(f"{_byte_text(lo, _CLASS_SPECIAL)}-{_byte_text(hi, _CLASS_SPECIAL)}")
        else:
            parts.extend(_byte_text(v, _CLASS_SPECIAL) for v in range(lo, hi + 1))
        i = j + 1
    return "[" + ("^" if negate else "") + "".join(parts) + "]"


def _is_single_byte(e: Expr) -> TypeGuard[Bytes]:
    return isinstance(e, Bytes) and e.mask & (e.mask - 1) == 0


def _quote(run: list[Bytes]) -> str:
    special = frozenset(b'"\\')
    return '"' + "".join(_byte_text(e.mask.bit_length() - 1, special) for e in run) + '"'


def format_expr(e: Expr, prec: int = _PREC_ALT) -> str:
    """The stable text form of an expression (used by tests and ``gramc inspect --ir``)."""
    return stackless.run(_format(e, prec, {}))


def _format(e: Expr, prec: int, memo: dict) -> Call[str]:
    """:func:`format_expr` with the text of each compound node kept by identity in ``memo``:
    the IR is hash-consed, so a shared part (a JSON string's character class, written at
    every string) is formatted once per call, not once per use. A :mod:`stackless` call:
    the IR can nest as deep as the source."""
    leaf = _format_leaf(e)
    if leaf is not None:
        return leaf
    key = (id(e), prec)
    out = memo.get(key)
    if out is not None:
        return out
    if isinstance(e, Repeat):
        out = (yield _format(e.item, _PREC_POSTFIX, memo)) + _repeat_suffix(e.min, e.max)
    elif isinstance(e, Seq):
        out = " ".join((yield _seq_parts(e.items, memo)))
        out = f"({out})" if prec > _PREC_SEQ else out
    elif isinstance(e, Alt):
        parts = []
        for item in e.items:
            parts.append((yield _format(item, _PREC_SEQ, memo)))
        out = " | ".join(parts)
        out = f"({out})" if prec > _PREC_ALT else out
    else:
        raise TypeError(f"not an IR node: {e!r}")
    memo[key] = out
    return out


def _format_leaf(e: Expr) -> str | None:
    """The text of a leaf node; None for a compound one."""
    if e is EMPTY:
        return '""'
    if e is NOTHING:
        return "[]"
    if isinstance(e, Bytes):
        return _quote([e]) if _is_single_byte(e) else _format_class(e.mask)
    if isinstance(e, Ref):
        return e.name
    if isinstance(e, Token):
        return f"<[{e.id}]>"
    if isinstance(e, TokenName):
        return e.name
    if isinstance(e, Machine):
        return _format_machine(e)
    return None


@lru_cache(maxsize=256)
def _format_machine(m: Machine) -> str:
    """``dfa{0: [1-9] 1, "0" 2; 1 final: [0-9] 1; 2 final}``: each state's transitions, ``start
    q;`` first when the start is not state 0."""
    states = []
    for q, row in enumerate(m.edges):
        moves = ", ".join(f"{_format_leaf(Bytes(mask))} {t}" for mask, t in row)
        states.append(f"{q}{' final' if m.accept[q] else ''}{': ' + moves if moves else ''}")
    return "dfa{" + (f"start {m.start}; " if m.start else "") + "; ".join(states) + "}"


def _seq_parts(items: tuple[Expr, ...], memo: dict) -> Call[list[str]]:
    parts: list[str] = []
    run: list[Bytes] = []
    for item in items:
        if _is_single_byte(item):
            run.append(item)
            continue
        if run:
            parts.append(_quote(run))
            run = []
        parts.append((yield _format(item, _PREC_POSTFIX, memo)))
    if run:
        parts.append(_quote(run))
    return parts


def _repeat_suffix(lo: int, hi: int | None) -> str:
    if (lo, hi) == (0, None):
        return "*"
    if (lo, hi) == (1, None):
        return "+"
    if (lo, hi) == (0, 1):
        return "?"
    if hi is None:
        return f"{{{lo},}}"
    return f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"


def format_grammar(g: Grammar) -> str:
    """The stable text form of a grammar: ``name ::= expr`` lines, start rule first."""
    names = [g.start] + [n for n in g.rules if n != g.start]
    memo: dict = {}  # shared by the rules: they share parts too
    return "\n".join(f"{n} ::= {stackless.run(_format(g.rules[n], _PREC_ALT, memo))}" for n in names) + "\n"
