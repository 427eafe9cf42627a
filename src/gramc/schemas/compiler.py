"""The schema walker: conjunctions of atoms -> IR, one JSON kind at a time.

The language of a conjunction is the union, over the six JSON kinds (object, array, string,
number, boolean, null), of the instances of that kind that satisfy every atom. For one kind:

1. ``$ref`` and ``allOf`` are expanded in place (:meth:`flatten`); ``not`` becomes a
   :class:`~gramc.schemas.atoms.Neg` atom.
2. ``enum``/``const`` make the language finite: the listed values of that kind that satisfy
   the whole conjunction (checked with ``jsonschema``) are written out.
3. Disjunctive keywords (``anyOf``, ``oneOf``, ``if``/``then``/``else``, dependencies, and for
   objects and arrays ``not``) are distributed: one branch at a time joins the conjunction
   (:mod:`gramc.schemas.combinators`).
4. What is left is a plain conjunction of keywords, built by kind: strings, numbers, booleans
   and null by :mod:`gramc.schemas.scalars` (``not`` subtracted as a regular language),
   objects by :mod:`gramc.schemas.objects`, arrays by :mod:`gramc.schemas.arrays`.

Those three and :mod:`gramc.schemas.combinators` (step 3) are the walker's collaborators:
each an object holding the compiler and its own caches, asking the walker for the
languages of what lies inside (:meth:`SchemaCompiler.value`, :meth:`SchemaCompiler.lang`).

Values inside arrays and objects are compiled through :meth:`value`, which memoises by
conjunction; meeting a conjunction again while it is being compiled makes it a grammar rule,
which is how recursive schemas become recursive grammars.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from gramc.compiler.ir import NOTHING, Expr, Grammar, Ref, alt
from gramc.compiler.stackless import LEVELS_PER_STACK, on_fresh_stack
from gramc.errors import GramcWarning, LimitExceededError, SchemaError
from gramc.limits import DEFAULT_LIMITS, Limits
from gramc.schemas.arrays import Arrays
from gramc.schemas.atoms import FALSE, TRUE, Atom, Keywords, Neg, Node, Synth
from gramc.schemas.combinators import Combinators
from gramc.schemas.jsontext import Whitespace, canonical_text, kind_of, listed_ir
from gramc.compiler.regular import difference, intersection
from gramc.schemas.objects import Objects, any_order_body
from gramc.schemas.options import Approximation, Restriction, SchemaOptions
from gramc.schemas.refs import Document, display
from gramc.schemas.rules import Rules
from gramc.schemas.scalars import Scalars
from gramc.schemas.validation import ValueChecker

KINDS = ("object", "array", "string", "number", "boolean", "null")
TYPE_SETS = {"null": {"null"}, "boolean": {"boolean"}, "object": {"object"}, "array": {"array"},
             "string": {"string"}, "number": {"int", "num"}, "integer": {"int"}}
ALL_TYPES = frozenset({"null", "boolean", "object", "array", "string", "int", "num"})

#: Keywords the walker acts on; a part with none of them constrains nothing.
MEANINGFUL = frozenset({
    "type", "enum", "const", "nullable", "$false", "$ref", "$dynamicRef", "allOf", "anyOf", "oneOf",
    "not", "if", "$evaluated", "dependentRequired", "dependentSchemas", "dependencies",
    "properties", "patternProperties", "additionalProperties", "required", "propertyNames",
    "minProperties", "maxProperties", "unevaluatedProperties",
    "items", "prefixItems", "additionalItems", "contains", "minItems", "maxItems", "uniqueItems",
    "unevaluatedItems", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
})


@dataclass(frozen=True)
class Flat:
    """A flattened conjunction: positive parts and Neg atoms, in a stable order."""

    parts: tuple[Atom, ...]
    false: bool = False


FALSE_FLAT = Flat((), True)


class SchemaCompiler:
    """Compiles one schema document; see the module docstring."""

    def __init__(self, doc: Document, options: SchemaOptions = SchemaOptions(),
                 limits: Limits = DEFAULT_LIMITS, runtime_unique: bool = False,
                 unplanned: frozenset = frozenset()):
        self.doc = doc
        self.runtime_unique = runtime_unique  # uniqueItems left to the matcher (schemas.unique)
        #: objects whose members the matcher checks (Objects._seen_body): by their parts,
        #: (declared names, required names); and the parts an earlier compile could not plan
        self.seen_objects: dict[frozenset, tuple[list[str], list[str]]] = {}
        self.unplanned = unplanned
        self.options = options
        self.limits = limits
        self.ws = Whitespace(options.whitespace, options.max_whitespace)
        self.approximations: list[Approximation] = []
        self.restrictions: list[Restriction] = []
        self.notes: list[str] = []
        self.rules = Rules()
        self.lexemes: set[Expr] = set()  # see Grammar.lexemes
        self.branches = 0
        self.objects = Objects(self)
        self.arrays = Arrays(self)
        self.scalars = Scalars(self)
        self.combinators = Combinators(self)
        self._checker: ValueChecker | None = None
        self._listed: dict[Node | Synth, dict[str, list[Any]]] = {}  # see finite
        self._keywords: dict[Node | Synth, Keywords | bool] = {}
        self._flat: dict[frozenset[Atom], Flat] = {}
        self._lang: dict[tuple, tuple[Expr, bool]] = {}
        self._values: dict[tuple, Expr] = {}
        self._value_active: set[tuple] = set()
        self._needs_rule: dict[tuple, str] = {}
        self._levels: list[set[tuple]] = [set()]
        self._nesting = 0  # lang() calls in progress (see _nested)
        self._frames: list[list[bool]] = []
        self._quiet = 0

    # ------------------------------------------------------------ entry point

    def compile(self) -> Grammar:
        """The grammar of the whole document (start rule ``root``)."""
        return self.rules.grammar(self.value(frozenset({Node("")}), 0), self.lexemes)

    # ------------------------------------------------------------ reporting

    def approx(self, keyword: str, where: str, reason: str) -> None:
        """Record an over-approximation (or, in strict mode, refuse the schema)."""
        if self._quiet:
            return
        if self.options.strict:
            raise SchemaError(f"{keyword!r} cannot be enforced exactly: {reason} "
                              "(strict mode refuses over-approximations)", where)
        for frame in self._frames:
            frame[0] = False
        item = Approximation(keyword, where, reason)
        if item not in self.approximations:
            self.approximations.append(item)

    def restrict(self, keyword: str, where: str, reason: str) -> None:
        """Record a restriction of the output language beyond what the options ask for (a
        subset of the valid documents: reported, never refused, never marks work inexact)."""
        if self._quiet:
            return
        item = Restriction(keyword, where, reason)
        if item not in self.restrictions:
            self.restrictions.append(item)

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """Work whose approximations are not reported (an estimate that may be discarded)."""
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1

    @contextmanager
    def frame(self) -> Iterator[list[bool]]:
        """Tracks whether the work done inside was exact (no approximation recorded)."""
        f = [True]
        self._frames.append(f)
        try:
            yield f
        finally:
            self._frames.pop()

    def _mark_inexact(self) -> None:
        for frame in self._frames:
            frame[0] = False

    def counted(self, kw: Keywords, key: str) -> int | None:
        """The count ``key`` (``minItems``...) of ``kw``, which becomes a counted repetition:
        checked against ``max_repeat``."""
        n = kw.count(key)
        if n is not None:
            self.limits.check("max_repeat", n, f"{key} at {kw.where(key)}")
        return n

    def note(self, message: str) -> None:
        """A warning that is not an approximation (an unknown format, an annotation)."""
        if message not in self.notes:
            self.notes.append(message)

    def count_branches(self, n: int, where: str) -> None:
        self.branches += n
        if self.branches > self.options.max_branches:
            raise SchemaError(f"the schema expands into more than {self.options.max_branches} combinations "
                              "of anyOf/oneOf/if/not/dependency branches", where)

    # ------------------------------------------------------------ atoms

    def keywords(self, atom: Node | Synth) -> Keywords | bool:
        """The keyword view of a positive atom (True/False for boolean schemas)."""
        kw = self._keywords.get(atom)
        if kw is None:
            if isinstance(atom, Synth):
                raw = dict(atom.items)
            else:
                raw = self.doc.get(atom.pointer)
                if isinstance(raw, bool):
                    self._keywords[atom] = raw
                    return raw
                if not isinstance(raw, dict):
                    raise SchemaError(f"a schema must be an object or a boolean, not {type(raw).__name__}",
                                      atom.where)
                if atom.omit:
                    raw = {k: v for k, v in raw.items() if k not in atom.omit}
            kw = self._keywords[atom] = Keywords(atom, raw, self.doc)
        return kw

    def part(self, atom: Atom) -> Keywords:
        """The keywords of a positive part of a flattened conjunction (never a boolean
        schema: :meth:`flatten` drops ``true`` and turns ``false`` into a false Flat)."""
        kw = self.keywords(atom) if not isinstance(atom, Neg) else None
        if not isinstance(kw, Keywords):
            raise TypeError(f"{atom.where} is not a positive part of a flattened conjunction")
        return kw

    @staticmethod
    def positive(parts: Iterable[Atom]) -> list[Node | Synth]:
        """The parts that are not negations, in their order."""
        return [p for p in parts if not isinstance(p, Neg)]

    def checker(self) -> ValueChecker:
        if self._checker is None:
            self._checker = ValueChecker(self.doc)
        return self._checker

    def flatten(self, conj: Collection[Atom]) -> Flat:
        """Expand ``$ref``/``allOf``, turn ``not`` into Neg atoms, drop empty parts."""
        key = frozenset(conj)
        flat = self._flat.get(key)
        if flat is None:
            flat = self._flat[key] = self._flatten(key)
        return flat

    @staticmethod
    def order(atoms: Iterable[Atom]) -> list[Atom]:
        """Atoms in the order the compiler met them (see :attr:`Node.order`; then a stable
        tie-break): this order decides the order of declared properties from several parts."""
        rank: dict[type, int] = {Node: 0, Synth: 1, Neg: 2}
        return sorted(atoms, key=lambda a: (a.order, rank[type(a)], a.sort_key))

    def _flatten(self, conj: frozenset[Atom]) -> Flat:
        parts: dict[Atom, None] = {}  # insertion-ordered: discovery order
        stack = self.order(conj)[::-1]
        seen: set[Atom] = set()
        while stack:
            atom = stack.pop()
            if atom in seen:
                continue
            seen.add(atom)
            if isinstance(atom, Neg):
                inner = self.flatten({atom.inner})
                if inner.false:
                    continue
                if not inner.parts:
                    return FALSE_FLAT
                if len(inner.parts) == 1 and isinstance(inner.parts[0], Neg):
                    stack.append(inner.parts[0].inner)
                else:
                    parts[atom] = None
                continue
            kw = self.keywords(atom)
            if kw is True:
                continue
            if kw is False or "$false" in kw:
                return FALSE_FLAT
            stack.extend(reversed(self._expand(atom, kw, parts)))
        return Flat(tuple(parts))

    def _expand(self, atom: Node | Synth, kw: Keywords, parts: dict[Atom, None]) -> list[Atom]:
        """Add the rest of ``atom`` to ``parts``; return the atoms it expands into (in order)."""
        out: list[Atom] = []
        if isinstance(atom, Node):
            target = self.doc.resolve(atom.pointer) if ("$ref" in kw or "$dynamicRef" in kw) else None
            if target is not None and "$ref" not in kw and self._dynamic(kw, target):
                target = None  # resolved only at validation time: not enforced (reported) ...
                if kw._child_group:  # ... and whatever it would evaluate counts as evaluated
                    out.append(Synth((("$evaluated", "all"),), atom.pointer + "/$dynamicRef",
                                     kw._child_group, kw.order_of("$dynamicRef")))
            if target is not None:
                site = "$ref" if "$ref" in kw else "$dynamicRef"
                out.append(Node(target, frozenset(), kw._child_group, kw.order_of(site)))
                if self.doc.draft <= 7:
                    return out
            out.extend(kw.subs("allOf"))
            drop = [k for k in ("$ref", "$dynamicRef", "allOf") if k in kw]
            negated = kw.sub("not")
            if negated is not None:
                out.append(Neg(negated, atom.pointer + "/not"))
                drop.append("not")
            if "if" not in kw:
                drop.extend(k for k in ("then", "else") if k in kw)
            if drop:
                atom = atom.without(*drop)
                kw = self.part(atom)
        if any(k in MEANINGFUL for k in kw.raw):
            parts[atom] = None
        return out

    def _dynamic(self, kw: Keywords, target: str) -> bool:
        """True when a ``$dynamicRef`` may resolve to another schema than its static target
        (its target has a ``$dynamicAnchor`` whose name more than one schema uses)."""
        value = self.doc.get(target)
        name = value.get("$dynamicAnchor") if isinstance(value, dict) else None
        if name is None or self.doc.dynamic_anchors.get(name, 0) <= 1:
            return False
        self.approx("$dynamicRef", kw.where("$dynamicRef"), f"it resolves through the dynamic scope among "
                    f"{self.doc.dynamic_anchors[name]} schemas with $dynamicAnchor {name!r}; not enforced")
        return True

    def types(self, parts: Iterable[Atom]) -> frozenset[str]:
        """The JSON types every positive part allows (``int``/``num`` for numbers)."""
        allowed = ALL_TYPES
        for part in self.positive(parts):
            kw = self.part(part)
            if "type" not in kw:
                continue
            t = kw.get("type")
            names = [t] if isinstance(t, str) else t
            if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
                raise kw.fail("type", "a type name or an array of type names")
            own: set[str] = set()
            for name in names:
                if name == "any":  # draft-03
                    own |= ALL_TYPES
                elif name not in TYPE_SETS:
                    raise SchemaError(f"unknown type {name!r}", kw.where("type"))
                else:
                    own |= TYPE_SETS[name]
            if kw.get("nullable") is True:
                own.add("null")
            allowed = allowed & own
        return allowed

    @staticmethod
    def kinds(types: frozenset[str]) -> list[str]:
        return [k for k in KINDS if (k in types) or (k == "number" and types & {"int", "num"})]

    # ------------------------------------------------------------ values (memoised, rules)

    def _depth_key(self, depth: int) -> int | None:
        return depth if self.options.max_depth is not None else None

    def too_deep(self, depth: int) -> bool:
        return self.options.max_depth is not None and depth >= self.options.max_depth

    def value(self, conj: Collection[Atom], depth: int) -> Expr:
        """The language of a conjunction in value position (memoised; recursive -> rule)."""
        flat = self.flatten(conj)
        if flat.false:
            return NOTHING
        key = (flat.parts, self._depth_key(depth))
        if key in self._values:
            return self._values[key]
        if key in self._value_active:
            if key not in self._needs_rule:
                self._needs_rule[key] = self._rule_name(flat.parts, key[1])
            self._mark_inexact()  # a recursive language is never subtracted
            return Ref(self._needs_rule[key])
        self._value_active.add(key)
        self._levels.append(set())
        try:
            expr = self.lang_all(flat, depth)
        finally:
            self._levels.pop()
            self._value_active.discard(key)
        if key in self._needs_rule:
            expr = self.rules.define(self._needs_rule[key], expr)
        self._values[key] = expr
        return expr

    def _rule_name(self, parts: tuple[Atom, ...], depth: int | None) -> str:
        if not parts:
            base = "any_value"
        elif len(parts) == 1 and isinstance(parts[0], Node) and not parts[0].omit:
            tokens = [t for t in parts[0].pointer.split("/") if t and t not in ("$defs", "definitions")]
            base = "_".join(tokens[-2:]) or "document"
            base = "".join(c if c.isalnum() or c == "_" else "_" for c in base).strip("_") or "schema"
            if base[0].isdigit():
                base = "s_" + base
        else:
            base = "schema"
        if depth is not None:
            base = f"{base}_d{depth}"
        return self.rules.fresh(base)

    def lang_all(self, flat: Flat, depth: int) -> Expr:
        """The language of a flattened conjunction over all JSON kinds."""
        types = self.types(flat.parts)
        return alt(*(self.lang(flat.parts, kind, depth) for kind in self.kinds(types)))

    # ------------------------------------------------------------ one kind

    def lang(self, conj: Collection[Atom], kind: str, depth: int) -> Expr:
        """The instances of JSON kind ``kind`` that satisfy every atom of ``conj``."""
        flat = self.flatten(conj)
        if flat.false or kind not in self.kinds(self.types(flat.parts)):
            return NOTHING
        if kind in ("object", "array") and self.too_deep(depth):
            return NOTHING
        key = (flat.parts, kind, self._depth_key(depth))
        hit = self._lang.get(key)
        if hit is not None:
            if not hit[1]:
                self._mark_inexact()
            return hit[0]
        level = self._levels[-1]
        if key in level:
            where = next((p.where for p in flat.parts), "#")
            raise SchemaError("a $ref cycle that never enters an array or object (the schema refers "
                              "to itself without consuming any input)", where)
        level.add(key)
        self._nesting += 1
        try:
            with self.frame() as f:
                expr = self._nested(self._lang_one, flat.parts, kind, depth)
        finally:
            self._nesting -= 1
            level.discard(key)
        if not f[0]:
            self._mark_inexact()
        self._lang[key] = (expr, f[0])
        return expr

    def _nested(self, step: Callable[..., Expr], parts: tuple[Atom, ...], *args: object) -> Expr:
        """``step(parts, *args)`` one level deeper into the schema (a value inside an array
        or object, a subschema of ``anyOf``...). The walk recurses once per level: deeper than
        ``limits.max_nesting`` is an error, and every :data:`LEVELS_PER_STACK` levels it goes
        on on a fresh stack (see :func:`on_fresh_stack`), so Python's recursion limit never
        stops it (nor is changed)."""
        if self._nesting > self.limits.max_nesting:
            where = next((p.where for p in parts), "#")
            raise LimitExceededError("max_nesting", self._nesting, self.limits.max_nesting,
                                     f"the JSON Schema nests {self._nesting} deep at {where}")
        if self._nesting % LEVELS_PER_STACK == 0:
            return on_fresh_stack(step, parts, *args)
        return step(parts, *args)

    def _lang_one(self, parts: tuple[Atom, ...], kind: str, depth: int) -> Expr:
        finite = self.finite(parts, kind)
        if finite is not None:
            return finite
        split = self.combinators.disjunction(parts, kind)
        if split is not None:
            return self.combinators.distribute(parts, split, kind, depth)
        positive = self.positive(parts)
        if kind == "object":
            return self.objects.build(positive, depth)
        if kind == "array":
            return self.arrays.build(positive, depth)
        expr = self.scalars.build(positive, kind)
        for neg in (p for p in parts if isinstance(p, Neg)):
            expr = self.subtract(expr, neg, kind, depth)
        return expr

    def subtract(self, expr: Expr, neg: Neg, kind: str, depth: int) -> Expr:
        """``expr`` less the instances of ``neg.inner`` (scalar kinds: regular languages)."""
        if expr is NOTHING:
            return expr
        with self.frame() as f:
            other = self.lang(frozenset({neg.inner}), kind, depth)
        if not f[0]:
            self.approx("not", neg.where, f"the negated schema is itself approximated for {kind}s, "
                        "so it is not subtracted")
            return expr
        return difference(intersection(expr, self.scalars.universe(kind)), other)

    # ------------------------------------------------------------ enum / const

    def finite(self, parts: tuple[Atom, ...], kind: str) -> Expr | None:
        """The listed values of ``kind`` that satisfy every part, or None without a list."""
        listing = next((p for p in self.positive(parts) if "const" in self.part(p) or "enum" in self.part(p)), None)
        if listing is None:
            return None
        source = self.part(listing)
        if "enum" in source and "const" not in source and isinstance(listing, Node):
            # Each candidate is in its own enum: checking that again is a scan of the whole
            # list per value, quadratic in the enum's size.
            parts = tuple(listing.without("enum") if p is listing else p for p in parts)
        out = []
        checker = self.checker()
        checks = [checker.predicate(p) for p in parts]
        members = None
        if self.options.property_order == "any":
            members = partial(self._listed_members, where=source.where("const" if "const" in source else "enum"))
        for value in self._listed_of_kind(listing, source).get(kind, []):
            if all(check(value) for check in checks):
                out.append(value)
        return listed_ir(out, self.ws, members)

    def _listed_of_kind(self, listing: Node | Synth, source: Keywords) -> dict[str, list[Any]]:
        """The distinct values ``source`` lists (``const`` or ``enum``) by JSON kind, in their
        order (sorted once: the walker asks once per kind)."""
        by_kind = self._listed.get(listing)
        if by_kind is None:
            if "const" in source:
                candidates = [source.get("const")]
            else:
                candidates = source.get("enum")
                if not isinstance(candidates, list):
                    raise source.fail("enum", "an array")
            by_kind = self._listed[listing] = {}
            seen: set[str] = set()
            for value in candidates:
                text = canonical_text(value)
                if text not in seen:
                    seen.add(text)
                    by_kind.setdefault(kind_of(value), []).append(value)
        return by_kind

    def _listed_members(self, items: list[Expr], where: str) -> Expr:
        """The members of a listed object in any order (``property_order="any"``), or in the
        listed order (reported) when there are more than the option allows."""
        k = self.options.any_order_max_properties
        if len(items) > k:
            self.restrict("enum", where, f"a listed object with {len(items)} members, more than "
                          f"json_any_order_max_properties={k}, is accepted in its listed member order only")
            return self.ws.separated(items)
        body = any_order_body(items, [True] * len(items), None, self.ws.comma)
        assert body is not None  # no bound on its states was given
        return body[1]


def warn_approximations(items: list[Approximation], source_name: str) -> None:
    """Issue one GramcWarning per approximation."""
    for item in items:
        warnings.warn(GramcWarning(f"{source_name}: {item}"), stacklevel=3)


__all__ = ["SchemaCompiler", "KINDS", "Flat", "warn_approximations", "display", "TRUE", "FALSE"]
