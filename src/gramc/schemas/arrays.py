"""Arrays: positional items, length bounds and ``contains`` counting.

Element ``i`` must satisfy, from every part, ``prefixItems[i]`` (draft-07: ``items[i]``) when
the part has one there, else its ``items`` (draft-07: ``additionalItems``), plus
``unevaluatedItems`` where nothing evaluated position ``i``. Elements past the longest prefix
are uniform, so the language is a finite sequence of element languages followed by a
repetition, with ``minItems``/``maxItems`` as bounds.

``contains`` (with ``minContains``/``maxContains``) is exact: each element is either one that
satisfies the ``contains`` schema (counted) or one that does not (when ``maxContains`` is
given; otherwise any element), and a small automaton over (position, count) is turned into
an expression. ``uniqueItems`` is not expressible by a grammar of reasonable size and is
over-approximated (reported).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from gramc.compiler.ir import NOTHING, Expr, alt, optional, repeat, seq
from gramc.schemas.atoms import TRUE, Atom, Keywords, Neg, Node, Synth
from gramc.schemas.jsontext import canonical_text
from gramc.schemas.numbers import expanded_size

if TYPE_CHECKING:
    from gramc.schemas.compiler import SchemaCompiler

#: Largest expanded expression a ``contains`` automaton may produce before it is
#: over-approximated.
MAX_CONTAINS_SIZE = 400_000


#: A ``contains`` to count: (atom, at least, at most, first position it applies to, where).
Contains = tuple[Atom, int, Union[int, None], int, str]
#: (can be empty, the non-empty bodies) of an array or object.
Body = tuple[bool, Expr]


@dataclass
class ArrayPart:
    """What one part says about the items of an array."""

    atom: Node | Synth
    prefix: list[Atom]
    rest: Atom | None


@dataclass
class ArrayView:
    """What a conjunction of positive parts says about arrays."""

    parts: list[ArrayPart] = field(default_factory=list)
    lo: int = 0
    hi: int | None = None
    contains: list[Contains] = field(default_factory=list)
    unique: str | None = None
    unevaluated: list[tuple[str, Atom]] = field(default_factory=list)  # (owner pointer, atom)
    has_contains: str | None = None  # where a contains is (it evaluates the items it matches)

    @property
    def prefix_len(self) -> int:
        return max((len(p.prefix) for p in self.parts), default=0)

    def position_atoms(self, i: int) -> frozenset[Atom]:
        """The atoms item ``i`` must satisfy."""
        atoms: list[Atom] = []
        evaluated: set[int] = set()
        for k, p in enumerate(self.parts):
            if i < len(p.prefix):
                atoms.append(p.prefix[i])
            elif p.rest is not None:
                atoms.append(p.rest)
            else:
                continue
            evaluated.add(k)
        owners = {o for o, _ in self.unevaluated}
        for owner, atom in self.unevaluated:
            members = {k for k, p in enumerate(self.parts)
                       if (isinstance(p.atom, Node) and p.atom.pointer == owner) or owner in p.atom.group}
            inner = {k for k, p in enumerate(self.parts)  # own unevaluatedItems: evaluates all
                     if isinstance(p.atom, Node) and p.atom.pointer in owners - {owner}}
            if not (evaluated | inner) & members:
                atoms.append(atom)
        return frozenset(atoms)


class Arrays:
    """Builds arrays for a :class:`~gramc.schemas.compiler.SchemaCompiler`."""

    def __init__(self, compiler: SchemaCompiler):
        self.compiler = compiler

    @staticmethod
    def items(kw: Keywords) -> tuple[list[Atom], Atom | None]:
        """(positional subschemas, the subschema of the positions after them)."""
        if "prefixItems" in kw:
            rest = kw.sub("items") if "items" in kw and not isinstance(kw.get("items"), (list, tuple)) else None
            return kw.subs("prefixItems"), rest
        if isinstance(kw.get("items"), list):
            return kw.subs("items"), kw.sub("additionalItems")
        return [], kw.sub("items")

    def _evaluated_items(self, marker: Node | Synth, atoms: object) -> ArrayPart:
        """A part that evaluates (without constraining) the positions ``atoms`` (an iterable
        of atoms, or ``"all"``) evaluate."""
        n, rest = 0, None
        if atoms == "all" or not isinstance(atoms, Iterable):
            return ArrayPart(marker, [], TRUE)
        c = self.compiler
        for part in c.positive(c.flatten(frozenset(atoms)).parts):
            prefix, r = self.items(c.part(part))
            n, rest = max(n, len(prefix)), rest or (TRUE if r is not None else None)
        return ArrayPart(marker, [TRUE] * n, rest)

    def length_bounds(self, parts: Iterable[Atom]) -> tuple[int, int | None]:
        """The tightest ``minItems`` and ``maxItems`` of the positive parts."""
        c = self.compiler
        lo, hi = 0, None
        for part in c.positive(parts):
            kw = c.part(part)
            n = c.counted(kw, "minItems")
            lo = max(lo, n or 0)
            n = c.counted(kw, "maxItems")
            if n is not None:
                hi = n if hi is None else min(hi, n)
        return lo, hi

    def view(self, parts: list[Node | Synth]) -> ArrayView:
        """What the positive parts say about arrays, together."""
        c = self.compiler
        view = ArrayView()
        view.lo, view.hi = self.length_bounds(parts)
        for part in parts:
            kw = c.part(part)
            if "$evaluated" in kw:
                view.parts.append(self._evaluated_items(part, kw.get("$evaluated")))
                continue
            prefix, rest = self.items(kw)
            view.parts.append(ArrayPart(part, prefix, rest))
            contains = kw.sub("contains")
            if contains is not None:
                view.has_contains = view.has_contains or kw.where("contains")
                lo: int | None = 1
                hi: int | None = None
                if c.doc.draft >= 2019 or not isinstance(part, Node):
                    lo = c.counted(kw, "minContains")
                    hi = c.counted(kw, "maxContains")
                lo = 1 if lo is None else lo
                if lo > 0 or hi is not None:
                    view.contains.append((contains, lo, hi, 0, kw.where("contains")))
            if "$containsRest" in kw:
                view.contains.append((kw.get("$containsRest"), 1, None, len(prefix), kw.where()))
            if kw.get("uniqueItems") is True:
                view.unique = view.unique or kw.where("uniqueItems")
            unevaluated = kw.sub("unevaluatedItems")
            if unevaluated is not None and c.doc.draft >= 2019 and isinstance(part, Node):
                view.unevaluated.append((part.pointer, unevaluated))
        return view

    def build(self, parts: list[Node | Synth], depth: int) -> Expr:
        """The arrays that satisfy every (positive) part."""
        c = self.compiler
        view = self.view(parts)
        if view.unevaluated and view.has_contains:
            c.approx("unevaluatedItems", f"#{view.unevaluated[0][0]}/unevaluatedItems",
                        "items evaluated by 'contains' are not tracked; unevaluatedItems is not enforced")
            view.unevaluated = []
        lo, hi = view.lo, view.hi
        if hi is not None and lo > hi:
            return NOTHING
        n_pos = view.prefix_len
        elems = []
        for i in range(n_pos + 1):
            e = c.value(view.position_atoms(i), depth + 1)
            elems.append(e)
            if e is NOTHING:  # no element can be at position i: the array ends before it
                hi = i if hi is None else min(hi, i)
                break
        if hi is not None and lo > hi:
            return NOTHING
        if view.unique and (hi is None or hi > 1):
            if not c.runtime_unique:
                c.approx("uniqueItems", view.unique, "uniqueness of array items is not enforced")
            elif not n_pos:  # the items are uniform: no more of them than distinct values
                k = self._distinct_values(view.position_atoms(0))
                if k is not None:
                    if lo > k:
                        return NOTHING
                    hi = k if hi is None else min(hi, k)
        contains = view.contains
        if len(contains) > 1:
            for extra in contains[1:]:
                c.approx("contains", extra[4], "only one 'contains' per array is enforced")
            contains = contains[:1]
        if contains:
            got = self._contains_body(view, elems, lo, hi, contains[0], depth)
            if got is not None:
                return c.ws.wrap(b"[", b"]", *got)
            c.approx("contains", contains[0][4], "counting 'contains' matches under these length "
                     "bounds would make the grammar too large; it is not enforced")
        nullable, body = self._plain_body(elems, lo, hi)
        return c.ws.wrap(b"[", b"]", nullable, body)

    def _distinct_values(self, atoms: frozenset[Atom]) -> int | None:
        """How many distinct values satisfy ``atoms`` when they are listed (``enum``,
        ``const``) or only booleans and null; None otherwise."""
        c = self.compiler
        flat = c.flatten(atoms)
        if flat.false:
            return 0
        listing = next((p for p in c.positive(flat.parts) if "const" in c.part(p) or "enum" in c.part(p)), None)
        if listing is None:
            types = c.types(flat.parts)
            if not types <= {"boolean", "null"} or any(isinstance(p, Neg) for p in flat.parts) or \
                    c.combinators.disjunction(flat.parts, "boolean") is not None:
                return None
            return 2 * ("boolean" in types) + ("null" in types)
        checks = [c.checker().predicate(p) for p in flat.parts]
        values = {canonical_text(v) for vs in c._listed_of_kind(listing, c.part(listing)).values() for v in vs
                  if all(check(v) for check in checks)}
        return len(values)

    def _label(self, i: int, elem: Expr) -> Expr:
        return elem if i == 0 else seq(self.compiler.ws.comma, elem)

    def _plain_body(self, elems: list[Expr], lo: int, hi: int | None) -> Body:
        """Positions 0..len(elems)-2 are positional; the last element repeats."""
        n_pos = len(elems) - 1
        rest = elems[-1] if elems else NOTHING
        top = n_pos if hi is None else min(n_pos, hi)
        # the tail after ``top`` positional elements
        if hi is not None and hi <= top or rest is NOTHING:
            tail = (lo <= top, NOTHING)
        else:
            k_lo = max(lo - top, 0)
            k_hi = None if hi is None else hi - top
            more = repeat(seq(self.compiler.ws.comma, rest), max(k_lo - 1, 0), None if k_hi is None else k_hi - 1)
            tail = (k_lo == 0, seq(self._label(top, rest), more))
        for i in reversed(range(top)):
            nullable, ne = tail
            take = seq(self._label(i, elems[i]), optional(ne) if nullable else ne)
            tail = (i >= lo, alt(take))
        return tail

    def _contains_body(self, view: ArrayView, elems: list[Expr], lo: int, hi: int | None, contains: Contains,
                       depth: int) -> Body | None:
        """The body with ``contains`` counted (None: too large to count)."""
        c = self.compiler
        atom, k_min, k_max, start, _ = contains
        n_pos = len(elems) - 1
        i_cap = hi if hi is not None else max(n_pos, lo, start, 1)
        k_cap = k_max if k_max is not None else k_min
        if k_max is not None and k_min > k_max:
            return False, NOTHING

        def options(i: int) -> tuple[Expr, Expr]:
            pos = view.position_atoms(min(i, n_pos))
            marked = c.value(pos | {atom}, depth + 1) if i >= start else NOTHING
            if k_max is None:
                plain = elems[min(i, n_pos)]
            else:
                plain = c.value(pos | {Neg(atom, atom.pointer)}, depth + 1)
            return plain, marked

        memo: dict[tuple[int, int], Body] = {}
        for i in reversed(range(i_cap + 1)):
            plain, marked = options(i) if hi is None or i < hi else (NOTHING, NOTHING)
            for k in reversed(range(k_cap + 1)):
                memo[(i, k)] = self._contains_state(i, k, i_cap, k_cap, k_min, k_max, lo, hi,
                                                    plain, marked, memo)
        result = memo[(0, 0)]
        if expanded_size(result[1]) > MAX_CONTAINS_SIZE:
            return None
        return result

    def _contains_state(self, i: int, k: int, i_cap: int, k_cap: int, k_min: int, k_max: int | None, lo: int,
                        hi: int | None, plain: Expr, marked: Expr, memo: dict[tuple[int, int], Body]) -> Body:
        """State (position ``i``, ``k`` matches counted) of the ``contains`` automaton."""
        final = i >= lo and k >= k_min
        if hi is not None and i >= hi:
            return final, NOTHING
        ni = i + 1 if hi is not None else min(i + 1, i_cap)
        edges = [(plain, (ni, k))]
        if k_max is None:
            edges.append((marked, (ni, min(k + 1, k_cap))))
        elif k + 1 <= k_max:
            edges.append((marked, (ni, k + 1)))
        loops, outs = [], []
        for elem, target in edges:
            if elem is NOTHING:
                continue
            label = self._label(i, elem)
            if target == (i, k):
                loops.append(label)
            else:
                nullable, ne = memo[target]
                outs.append(seq(label, optional(ne) if nullable else ne))
        rest = alt(*outs)
        if not loops:
            return final, rest
        loop = repeat(alt(*loops), 1, None)
        after = optional(rest) if final else rest
        return final, alt(seq(loop, after), rest)


__all__ = ["Arrays", "ArrayView"]
