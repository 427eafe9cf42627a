"""Disjunctive keywords: distribution over branches, and negation by rewriting.

For one JSON kind, ``X and (A or B)`` is ``(X and A) or (X and B)``, so every disjunctive
keyword is compiled by letting one branch at a time join the conjunction:

- ``anyOf``: one branch per member.
- ``oneOf``: the same when the members are provably pairwise disjoint for this kind (after
  joining the rest of the conjunction); otherwise member ``i`` joins together with the
  negations of all the others, which is exact wherever those negations are.
- ``if``/``then``/``else``: ``if and then`` or ``not if and else``.
- ``dependentRequired``/``dependentSchemas`` (draft-07 ``dependencies``), objects only: "the
  property is absent" or "it is present, and so are its dependents / the dependent schema".
- ``not`` for objects and arrays: the negated schema fails when one of its keywords fails,
  so ``not X`` is the union of the failures of X's keywords, each written as a positive
  schema (``not {"required": ["a"]}`` is ``{"properties": {"a": false}}``). Failures that have
  no positive form (``uniqueItems``, ``patternProperties``, ...) are over-approximated by "any
  instance of this kind", and reported. For strings and numbers, ``not`` is subtracted as a
  regular language instead (see :meth:`SchemaCompiler.subtract`).
"""

from __future__ import annotations

from collections.abc import Collection
from itertools import combinations
from math import prod
from typing import TYPE_CHECKING, Any, Callable

from gramc.compiler.ir import Expr, alt
from gramc.schemas.atoms import FALSE, TRUE, Atom, Keywords, Neg, Node, Synth, synth
from gramc.schemas.jsontext import kind_of
from gramc.compiler.regular import intersection, is_empty

if TYPE_CHECKING:
    from gramc.schemas.compiler import SchemaCompiler

DISJUNCTIVE = ("anyOf", "oneOf", "if", "dependentRequired", "dependentSchemas", "dependencies")
OBJECT_ONLY = ("dependentRequired", "dependentSchemas", "dependencies")
#: Most branch combinations an exact oneOf over overlapping object/array branches may take.
MAX_ONEOF_COMBINATIONS = 256

#: A conjunction that is one branch of a disjunction (its atoms join the rest).
Branch = tuple[Atom, ...]
#: Atoms as the walker passes them around.
Conj = Collection[Atom]


class Combinators:
    """Distributes disjunctions and negates for a :class:`~gramc.schemas.compiler.SchemaCompiler`."""

    def __init__(self, compiler: SchemaCompiler):
        self.compiler = compiler
        self._branches: dict[str, Callable[[Keywords, frozenset[Atom], str, int], list[Branch]]] = {
            "anyOf": self._branches_anyOf, "oneOf": self._branches_oneOf, "if": self._branches_if,
            "dependentRequired": self._branches_dependentRequired,
            "dependentSchemas": self._branches_dependentSchemas, "dependencies": self._branches_dependencies,
        }

    # ------------------------------------------------------------ picking a keyword

    def disjunction(self, parts: tuple[Atom, ...], kind: str) -> tuple[Atom, str] | None:
        """The first disjunctive keyword to distribute for ``kind``: (part, keyword) or None."""
        for part in self.compiler.positive(parts):
            kw = self.compiler.part(part)
            for key in DISJUNCTIVE:
                if key in kw:
                    return part, key
        if kind in ("object", "array"):
            for neg in parts:
                if isinstance(neg, Neg):
                    return neg, "not"
        return None

    def distribute(self, parts: tuple[Atom, ...], split: tuple[Atom, str], kind: str, depth: int) -> Expr:
        """The union, over the branches of the keyword ``split`` names, of the rest of the
        conjunction with that branch."""
        c = self.compiler
        branches = self.branches(parts, split, kind, depth)
        c.count_branches(len(branches), split[0].where)
        return alt(*(c.lang(b, kind, depth) for b in branches))

    def branches(self, parts: tuple[Atom, ...], split: tuple[Atom, str], kind: str, depth: int) -> list[frozenset[Atom]]:
        """The conjunctions whose union :meth:`distribute` takes: the rest of ``parts``
        with each branch of the keyword ``split`` names."""
        c = self.compiler
        part, key = split
        rest = frozenset(parts) - {part}
        if isinstance(part, Neg):
            branches = [rest | set(d) for d in self.negate(part.inner, kind)]
        else:
            if not isinstance(part, Node):
                raise TypeError(f"only a schema of the document has a disjunctive keyword to distribute: {part.where}")
            kw = c.part(part)
            base = rest | {part.without(*_consumed(key))}
            if key in OBJECT_ONLY and kind != "object":
                branches = [base]
            else:
                branches = [base | set(b) for b in self._branches[key](kw, base, kind, depth)]
        return branches

    # ------------------------------------------------------------ branches per keyword

    def _branches_anyOf(self, kw: Keywords, base: frozenset[Atom], kind: str, depth: int) -> list[Branch]:
        members = kw.subs("anyOf")
        if not kw._child_group or kind not in ("object", "array") or len(members) < 2:
            return [(b,) for b in members]
        # unevaluated* sees the annotations of every branch that matches, not only of the one
        # taken here: let the others' properties/items count as evaluated (a superset)
        self.compiler.approx("anyOf", kw.where("anyOf"), "unevaluatedProperties/unevaluatedItems are not "
                    "checked on what only another matching anyOf branch evaluates")
        return [(b, Synth((("$evaluated", tuple(o for o in members if o is not b)),), kw.pointer + "/anyOf/-",
                          kw._child_group, kw.order_of("anyOf", len(members)) + (len(members),)))
                for b in members]

    def _branches_oneOf(self, kw: Keywords, base: frozenset[Atom], kind: str, depth: int) -> list[Branch]:
        members = [b for b in kw.subs("oneOf") if self.lang_possible(base | {b}, kind)]
        if len(members) <= 1:
            return [(b,) for b in members]
        if all(self.disjoint(base | {a}, base | {b}, kind, depth)
               for a, b in combinations(members, 2)):
            return [(b,) for b in members]
        if kind in ("object", "array"):
            with self.compiler.quiet():
                sizes = [max(1, len(self.negate(b, kind))) for b in members]
            cost = sum(prod(sizes) // s for s in sizes)
            if cost > MAX_ONEOF_COMBINATIONS:
                self.compiler.approx("oneOf", kw.where("oneOf"), f"the branches overlap for {kind}s and excluding the "
                            f"others would take {cost} combinations; compiled as anyOf")
                return [(b,) for b in members]
        return [(b, *(Neg(o, kw.pointer + "/oneOf") for o in members if o is not b)) for b in members]

    def _branches_if(self, kw: Keywords, base: frozenset[Atom], kind: str, depth: int) -> list[Branch]:
        cond = kw.sub("if") or TRUE
        if "then" not in kw and "else" not in kw and not kw._child_group:
            return [()]  # (with unevaluated* around, the annotations of "if" still count)
        then, else_ = kw.sub("then") or TRUE, kw.sub("else") or TRUE
        return [(cond, then), (Neg(cond, kw.pointer + "/if"), else_)]

    def _branches_dependentRequired(self, kw: Keywords, base: frozenset[Atom], kind: str,
                                    depth: int) -> list[Branch]:
        raw = kw.get("dependentRequired")
        if not isinstance(raw, dict):
            raise kw.fail("dependentRequired", "an object of arrays of property names")
        return self._required_branches(kw, raw, "dependentRequired", {})

    def _branches_dependentSchemas(self, kw: Keywords, base: frozenset[Atom], kind: str,
                                   depth: int) -> list[Branch]:
        return self._required_branches(kw, {}, "dependentSchemas", kw.submap("dependentSchemas"))

    def _branches_dependencies(self, kw: Keywords, base: frozenset[Atom], kind: str, depth: int) -> list[Branch]:
        raw = kw.get("dependencies")
        if not isinstance(raw, dict):
            raise kw.fail("dependencies", "an object")
        names = {k: v for k, v in raw.items() if isinstance(v, list)}
        schemas = {k: kw._child("dependencies", k) for k, v in raw.items() if isinstance(v, (dict, bool))}
        bad = [k for k, v in raw.items() if not isinstance(v, (list, dict, bool))]
        if bad:
            raise kw.fail("dependencies", "an object of arrays or schemas")
        return self._required_branches(kw, names, "dependencies", schemas)

    def _required_branches(self, kw: Keywords, names: dict[str, Any], key: str,
                           schemas: dict[str, Atom]) -> list[Branch]:
        """Every combination of "trigger absent" / "trigger present and its dependents"."""
        out: list[Branch] = [()]
        triggers = sorted(set(names) | set(schemas))
        for trigger in triggers:
            deps = names.get(trigger, [])
            if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
                raise kw.fail(key, "an object of arrays of property names")
            order = kw.order_of(key)  # before the dependent schema: the trigger name comes first
            absent = synth(kw.pointer + "/" + key, order, properties={trigger: FALSE})
            present: list[Atom] = [synth(kw.pointer + "/" + key, order, required=[trigger, *deps])]
            if trigger in schemas:
                present.append(schemas[trigger])
            out = [o + (absent,) for o in out] + [o + tuple(present) for o in out]
        return out

    # ------------------------------------------------------------ possibility / disjointness

    def lang_possible(self, conj: Conj, kind: str) -> bool:
        """False when the conjunction certainly has no instance of ``kind`` (cheap checks)."""
        c = self.compiler
        flat = c.flatten(conj)
        return not flat.false and kind in c.kinds(c.types(flat.parts))

    def disjoint(self, a: Conj, b: Conj, kind: str, depth: int, budget: int = 3) -> bool:
        """True when no instance of ``kind`` satisfies both conjunctions (False: unknown)."""
        c = self.compiler
        fa, fb = c.flatten(a), c.flatten(b)
        if not self.lang_possible(fa.parts, kind) or not self.lang_possible(fb.parts, kind):
            return True
        for x, y in ((fa, fb), (fb, fa)):
            values = self._listed(x.parts, kind)
            if values is not None:
                checker = c.checker()
                return not any(all(checker.is_valid(p, v) for p in x.parts + y.parts) for v in values)
        if kind in ("string", "number", "boolean", "null"):
            with c.frame():
                la, lb = c.lang(fa.parts, kind, depth), c.lang(fb.parts, kind, depth)
            return is_empty(intersection(la, lb))
        if kind == "object" and budget > 0:
            return self._objects_disjoint(fa.parts, fb.parts, depth, budget)
        if kind == "array":
            return self._arrays_disjoint(fa.parts, fb.parts)
        return False

    def _listed(self, parts: tuple[Atom, ...], kind: str) -> list[Any] | None:
        """The values of ``kind`` the first ``const``/``enum`` lists (None: no list)."""
        for part in self.compiler.positive(parts):
            kw = self.compiler.part(part)
            if "const" in kw:
                return [v for v in [kw.get("const")] if kind_of(v) == kind]
            if "enum" in kw and isinstance(kw.get("enum"), list):
                return [v for v in kw.get("enum") if kind_of(v) == kind]
        return None

    def _objects_disjoint(self, pa: tuple[Atom, ...], pb: tuple[Atom, ...], depth: int, budget: int) -> bool:
        c = self.compiler
        va, vb = c.objects.view(pa), c.objects.view(pb)
        for name in sorted(va.required | vb.required):
            xa, xb = va.value_atoms(c, name), vb.value_atoms(c, name)
            if xa is None or xb is None:
                if (xa is None and name in va.required) or (xb is None and name in vb.required):
                    return True
                continue
            if name in va.required and name in vb.required:
                fa, fb = c.flatten(xa), c.flatten(xb)
                ka = set(c.kinds(c.types(fa.parts))) if not fa.false else set()
                kb = set(c.kinds(c.types(fb.parts))) if not fb.false else set()
                if all(self.disjoint(xa, xb, k, depth + 1, budget - 1) for k in ka & kb):
                    return True
        return False

    def _arrays_disjoint(self, pa: tuple[Atom, ...], pb: tuple[Atom, ...]) -> bool:
        (la, ha), (lb, hb) = self.compiler.arrays.length_bounds(pa), self.compiler.arrays.length_bounds(pb)
        return (ha is not None and ha < lb) or (hb is not None and hb < la)

    # ------------------------------------------------------------ negation (objects, arrays)

    def negate(self, atom: Atom, kind: str) -> list[Branch]:
        """``not atom`` for instances of ``kind``, as a list of conjunctions (a union)."""
        c = self.compiler
        flat = c.flatten({atom})
        if flat.false or kind not in c.kinds(c.types(flat.parts)):
            return [()]
        out: list[Branch] = []
        for part in flat.parts:
            if isinstance(part, Neg):
                out.append((part.inner,))
                continue
            got = self._negate_part(part, kind)
            if got is None:
                return [()]
            out.extend(got)
        return out

    def _negate_part(self, part: Node | Synth, kind: str) -> list[Branch] | None:
        """The failures of one part's keywords (None: it fails on everything of ``kind``,
        or a failure could not be written and "anything" stands in for it)."""
        kw = self.compiler.part(part)
        p = part.pointer
        values = self._listed((part,), kind)
        if values is not None:
            if not values:
                return None
            if kind in ("object", "array"):
                self.compiler.approx("not", part.where, f"'not' of an enum/const listing {kind}s is not "
                            f"enforced for {kind}s")
                return None
        out: list[Branch] = []
        for key in DISJUNCTIVE:
            if key in kw:
                out.extend(self._negate_disjunctive(kw, key, kind))
        handler = self._negate_object if kind == "object" else self._negate_array
        got = handler(kw, p)
        if got is None:
            return None
        return out + got

    def _negate_disjunctive(self, kw: Keywords, key: str, kind: str) -> list[Branch]:
        p = kw.pointer
        out: list[Branch] = []
        if key == "anyOf":
            return [tuple(Neg(b, p + "/anyOf") for b in kw.subs("anyOf"))]
        if key == "oneOf":
            members = kw.subs("oneOf")
            none = tuple(Neg(b, p + "/oneOf") for b in members)
            return [none, *((a, b) for a, b in combinations(members, 2))]
        if key == "if":
            cond, then, else_ = kw.sub("if") or TRUE, kw.sub("then"), kw.sub("else")
            if then is not None:
                out.append((cond, Neg(then, p + "/then")))
            if else_ is not None:
                out.append((Neg(cond, p + "/if"), Neg(else_, p + "/else")))
            return out
        if kind != "object":
            return []
        raw = kw.get(key)
        for trigger, dep in (raw.items() if isinstance(raw, dict) else ()):
            if isinstance(dep, list):
                out.extend((synth(p, kw.atom.order, required=[trigger], properties={d: FALSE}),) for d in dep)
            else:
                sub = kw._child(key, trigger)
                out.append((synth(p, kw.atom.order, required=[trigger]), Neg(sub, p + "/" + key)))
        return out

    def _negate_object(self, kw: Keywords, p: str) -> list[Branch] | None:
        out: list[Branch] = []
        for name in kw.names("required"):
            out.append((synth(p + "/required", kw.atom.order, properties={name: FALSE}),))
        for name, sub in kw.submap("properties").items():
            if self.compiler.flatten({sub}).parts or self.compiler.flatten({sub}).false:
                out.append((synth(p + "/properties", kw.atom.order, required=[name], properties={name: Neg(sub, p)}),))
        n = kw.count("minProperties")
        if n:
            out.append((synth(p, kw.atom.order, maxProperties=n - 1),))
        n = kw.count("maxProperties")
        if n is not None:
            out.append((synth(p, kw.atom.order, minProperties=n + 1),))
        for key in ("additionalProperties", "patternProperties", "propertyNames", "unevaluatedProperties"):
            if key in kw and not _trivially_true(kw.raw[key], key):
                self.compiler.approx("not", kw.where(key), f"the failure of {key!r} inside 'not' has no "
                                     "grammar form; any object stands in for it")
                return None
        return out

    def _negate_array(self, kw: Keywords, p: str) -> list[Branch] | None:
        out: list[Branch] = []
        n = kw.count("minItems")
        if n:
            out.append((synth(p, kw.atom.order, maxItems=n - 1),))
        n = kw.count("maxItems")
        if n is not None:
            out.append((synth(p, kw.atom.order, minItems=n + 1),))
        prefix, rest = self.compiler.arrays.items(kw)
        for i, sub in enumerate(prefix):
            out.append((synth(p, kw.atom.order, minItems=i + 1, prefixItems=[TRUE] * i + [Neg(sub, p)]),))
        if rest is not None:
            out.append((synth(p, kw.atom.order, prefixItems=[TRUE] * len(prefix), **{"$containsRest": Neg(rest, p)}),))
        c = kw.sub("contains")
        if c is not None:
            lo = kw.count("minContains")
            lo = 1 if lo is None else lo
            hi = kw.count("maxContains")
            if lo > 0:
                out.append((synth(p, kw.atom.order, contains=c, minContains=0, maxContains=lo - 1),))
            if hi is not None:
                out.append((synth(p, kw.atom.order, contains=c, minContains=hi + 1),))
        for key in ("uniqueItems", "unevaluatedItems"):
            if key in kw and not _trivially_true(kw.raw[key], key):
                self.compiler.approx("not", kw.where(key), f"the failure of {key!r} inside 'not' has no "
                                     "grammar form; any array stands in for it")
                return None
        return out


def _consumed(key: str) -> tuple[str, ...]:
    return ("if", "then", "else") if key == "if" else (key,)


def _trivially_true(value: Any, key: str) -> bool:
    if key == "uniqueItems":
        return value is not True
    return value is True or value == {}


__all__ = ["Combinators", "DISJUNCTIVE"]
