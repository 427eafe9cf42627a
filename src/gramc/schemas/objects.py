"""Objects: declared properties in schema order, then the other properties.

The output language of an object schema (see docs/json-schema.md, "Objects"):

- The *declared* names (every name in ``properties`` of any part, then names that are only
  ``required``) appear at most once each, in that order; required ones must appear. This is a
  restriction of the output language: a document whose members are in another order is
  valid JSON Schema-wise but not generated.
- Every other member comes after the declared ones. Its name is any string that is not a
  declared name (every spelling of the declared names is excluded, escapes included), and
  its value must satisfy exactly what the schema says about that name: the
  ``patternProperties`` it matches, else ``additionalProperties``, plus
  ``unevaluatedProperties`` where nothing evaluated it. Names are split into regions by
  which patterns they match, so this is exact.
- ``propertyNames`` restricts both kinds of names; ``minProperties``/``maxProperties`` are
  counted over both.

With ``property_order="any"`` (:func:`any_order_body`) the members may come in any order:
a subset automaton over "which declared properties were seen" (``2 ** n`` states for ``n``
declared properties, times the member counts when ``minProperties``/``maxProperties`` must
be counted), undeclared members allowed between any two members. Each member expression is
one shared IR node, written once however many states use it. Objects that would need more
than ``2 ** any_order_max_properties`` states keep schema order, reported as a
:class:`~gramc.schemas.options.Restriction`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gramc.compiler.ir import EMPTY, NOTHING, Expr, alt, optional, repeat, seq
from gramc.schemas.atoms import FALSE, TRUE, Atom, Keywords, Node, Synth
from gramc.schemas.jsontext import string_literal_ir
from gramc.compiler.regular import difference, intersection, is_empty, matches
from gramc.schemas.numbers import expanded_size
from gramc.schemas.strings import json_key_excluding

if TYPE_CHECKING:
    from gramc.schemas.compiler import SchemaCompiler

#: Largest expanded expression (tree size) an object body may have before counting
#: constraints (minProperties/maxProperties) are over-approximated.
MAX_BODY_SIZE = 400_000
#: Most optional declared properties an uncounted object body writes as one expression;
#: more become a chain of rules (``_chained_body``): at least ``CHAIN_LINKS`` links of at
#: most ``CHAIN_BLOCK`` properties each.
MAX_INLINE_OPTIONAL = 128
CHAIN_LINKS = 16
CHAIN_BLOCK = 32
#: Most distinct overlapping patternProperties regexes split into exact regions.
MAX_OVERLAPPING_PATTERNS = 6


#: Object members as (member expression, required) slots, in schema order.
Slot = tuple[Expr, bool]
#: The key regions of undeclared names: (region, (languages to intersect, languages to
#: subtract)); a region None when the patterns could not be told apart.
Region = tuple[frozenset[str] | None, tuple[tuple[Expr, ...], tuple[Expr, ...]]]


@dataclass
class ObjPart:
    """What one part says about the members of an object."""

    atom: Node | Synth
    props: dict[str, Atom]
    patterns: list[tuple[str, Atom, str]]  # (regex, atom, where)
    additional: Atom | None
    annotates: bool


@dataclass
class ObjectView:
    """What a conjunction of positive parts says about objects."""

    parts: list[ObjPart] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    required: set[str] = field(default_factory=set)
    lo: int = 0
    hi: int | None = None
    property_names: list[Atom] = field(default_factory=list)
    unevaluated: list[tuple[str, Atom]] = field(default_factory=list)  # (owner pointer, atom)
    default_false: bool = False
    inexact_patterns: bool = False

    def members_of(self, owner: str) -> set[int]:
        return {i for i, p in enumerate(self.parts)
                if (isinstance(p.atom, Node) and p.atom.pointer == owner) or owner in p.atom.group}

    def inner_owners(self, owner: str) -> set[int]:
        """Parts with their own unevaluatedProperties (other than ``owner``): they evaluate
        every name, for the enclosing schemas."""
        others = {o for o, _ in self.unevaluated if o != owner}
        return {i for i, p in enumerate(self.parts) if isinstance(p.atom, Node) and p.atom.pointer in others}

    def value_atoms(self, compiler: SchemaCompiler, name: str) -> frozenset[Atom] | None:
        """The atoms the value of member ``name`` must satisfy (None: the name is forbidden)."""
        atoms: list[Atom] = []
        evaluated: set[int] = set()
        for i, p in enumerate(self.parts):
            hit = name in p.props
            if hit:
                atoms.append(p.props[name])
            for rx, atom, _ in p.patterns:
                found = compiler.scalars.pattern_matches(rx, name)
                if found is None:  # an inexact pattern: neither applied nor "not matched"
                    hit = True
                elif found:
                    atoms.append(atom)
                    hit = True
            if not hit and p.additional is not None:
                atoms.append(p.additional)
                hit = True
            if hit and p.annotates:
                evaluated.add(i)
        return self._finish(compiler, atoms, evaluated)

    def _finish(self, compiler: SchemaCompiler, atoms: list[Atom], evaluated: set[int]) -> frozenset[Atom] | None:
        for owner, atom in self.unevaluated:
            if not (evaluated | self.inner_owners(owner)) & self.members_of(owner):
                atoms.append(atom)
        if self.default_false and not evaluated:
            return None
        conj = frozenset(atoms)
        return None if compiler.flatten(conj).false else conj

    def region_atoms(self, compiler: SchemaCompiler, region: frozenset[str]) -> frozenset[Atom] | None:
        """The atoms the value of an undeclared name must satisfy when it matches exactly
        the patterns in ``region``."""
        atoms: list[Atom] = []
        evaluated: set[int] = set()
        for i, p in enumerate(self.parts):
            hits = [atom for rx, atom, _ in p.patterns if rx in region]
            if hits:
                atoms.extend(hits)
            elif p.additional is not None:
                atoms.append(p.additional)
            else:
                continue
            if p.annotates:
                evaluated.add(i)
        return self._finish(compiler, atoms, evaluated)


class Objects:
    """Builds objects for a :class:`~gramc.schemas.compiler.SchemaCompiler`."""

    def __init__(self, compiler: SchemaCompiler):
        self.compiler = compiler

    # ------------------------------------------------------------ the view

    def view(self, parts: Iterable[Atom]) -> ObjectView:
        """What the positive parts say about objects, together."""
        c = self.compiler
        view = ObjectView()
        seen_names: dict[str, None] = {}
        required: dict[str, None] = {}
        any_additional = False
        for part in c.positive(parts):
            kw = c.part(part)
            if "$evaluated" in kw:
                view.parts.append(self._evaluated_part(part, kw.get("$evaluated")))
                seen_names.update(dict.fromkeys(view.parts[-1].props))
                continue
            annotates = isinstance(part, Node)
            props = kw.submap("properties")
            patterns = [(rx, atom, kw.where("patternProperties", rx))
                        for rx, atom in kw.submap("patternProperties").items()]
            additional = kw.sub("additionalProperties")
            any_additional |= additional is not None
            view.parts.append(ObjPart(part, props, patterns, additional, annotates))
            seen_names.update(dict.fromkeys(props))
            names = self._draft3_required(kw) if isinstance(kw.get("required"), bool) else kw.names("required")
            required.update(dict.fromkeys(names))
            n = c.counted(kw, "minProperties")
            view.lo = max(view.lo, n or 0)
            n = c.counted(kw, "maxProperties")
            if n is not None:
                view.hi = n if view.hi is None else min(view.hi, n)
            property_names = kw.sub("propertyNames")
            if property_names is not None:
                view.property_names.append(property_names)
            unevaluated = kw.sub("unevaluatedProperties")
            if unevaluated is not None and c.doc.draft >= 2019 and isinstance(part, Node):
                view.unevaluated.append((part.pointer, unevaluated))
                any_additional = True
        view.names = list({**seen_names, **required})
        view.required = set(required)
        declares = any(p.props or p.patterns for p in view.parts)
        view.default_false = declares and not any_additional and not c.options.additional_properties_default
        return view

    def _evaluated_part(self, marker: Node | Synth, atoms: object) -> ObjPart:
        """A part that evaluates (without constraining) what ``atoms`` (an iterable of atoms,
        or ``"all"``) declare."""
        props: dict[str, Atom] = {}
        patterns: list[tuple[str, Atom, str]] = []
        additional = None
        if atoms == "all" or not isinstance(atoms, Iterable):
            return ObjPart(marker, props, patterns, TRUE, True)
        for part in self.compiler.positive(self.compiler.flatten(frozenset(atoms)).parts):
            kw = self.compiler.part(part)
            props.update(dict.fromkeys(kw.submap("properties"), TRUE))
            patterns += [(rx, TRUE, "") for rx in kw.submap("patternProperties")]
            if "additionalProperties" in kw:
                additional = TRUE
        return ObjPart(marker, props, patterns, additional, True)

    def _draft3_required(self, kw: Keywords) -> list[str]:
        self.compiler.approx("required", kw.where("required"), "a boolean 'required' (draft-03) is ignored")
        return []

    # ------------------------------------------------------------ building

    def build(self, parts: list[Node | Synth], depth: int) -> Expr:
        """The objects that satisfy every (positive) part."""
        view = self.view(parts)
        if view.hi is not None and view.lo > view.hi:
            return NOTHING
        c = self.compiler
        names_lang = self._names_lang(view, depth)
        slots: list[Slot] = []
        slot_names: list[str] = []
        for name in view.names:
            member = self._declared_member(view, name, names_lang, depth)
            if member is NOTHING:
                if name in view.required:
                    return NOTHING
                continue
            slots.append((member, name in view.required))
            slot_names.append(name)
        extra = self._other_members(view, names_lang, depth)
        lo, hi = view.lo, view.hi
        n_required = sum(r for _, r in slots)
        if lo <= n_required:
            lo = 0
        if hi is not None and extra is None and hi >= len(slots):
            hi = None
        if c.options.property_order == "any" and (len(slots) > 1 or (slots and extra is not None)):
            where = parts[0].where if parts else "#"
            got = self._any_order(slots, slot_names, extra, lo, hi, where, frozenset(parts))
            if got is not None:
                return c.ws.wrap(b"{", b"}", *got)
        nullable, body = self._body(slots, extra, lo, hi)
        if (lo or hi is not None) and expanded_size(body) > MAX_BODY_SIZE:
            where = parts[0].where if parts else "#"
            c.approx("minProperties" if lo else "maxProperties", where,
                     "counting members over this many optional properties would make the grammar "
                     "too large; the count is not enforced")
            nullable, body = self._body(slots, extra, 0, None)
        return c.ws.wrap(b"{", b"}", nullable, body)

    def _names_lang(self, view: ObjectView, depth: int) -> Expr | None:
        if not view.property_names:
            return None
        return self.compiler.lang(frozenset(view.property_names), "string", depth)

    def _declared_member(self, view: ObjectView, name: str, names_lang: Expr | None, depth: int) -> Expr:
        if names_lang is not None and not matches(names_lang, json.dumps(name).encode()):
            return NOTHING
        atoms = view.value_atoms(self.compiler, name)
        if atoms is None:
            return NOTHING
        value = self.compiler.value(atoms, depth + 1)
        if value is NOTHING:
            return NOTHING
        return self.compiler.ws.member(string_literal_ir(name), value)

    def _other_members(self, view: ObjectView, names_lang: Expr | None, depth: int) -> Expr | None:
        """One undeclared member (any region), or None when none is allowed."""
        regions = self.regions(view)
        out = []
        for region, key_parts in regions:
            # region None: the patterns could not be told apart; any value stands in
            atoms = frozenset() if region is None else view.region_atoms(self.compiler, region)
            if atoms is None:
                continue
            value = self.compiler.value(atoms, depth + 1)
            if value is NOTHING:
                continue
            key = self._region_key(view, names_lang, key_parts)
            if key is not None:
                out.append(self.compiler.ws.member(key, value))
        return alt(*out) if out else None

    def _region_key(self, view: ObjectView, names_lang: Expr | None,
                    key_parts: tuple[tuple[Expr, ...], tuple[Expr, ...]]) -> Expr | None:
        """The names of one region: intersected with its patterns and ``propertyNames``,
        less the other patterns and the declared names (products only where needed: they
        are exact but their expressions can be deep); None when there are none."""
        key = names_lang
        for lang in key_parts[0]:
            key = lang if key is None else intersection(key, lang)
        if key_parts[1]:
            key = difference(self.compiler.scalars.any_string() if key is None else key, alt(*key_parts[1]))
        if key is None:  # any name but the declared ones: one automaton, kept whole
            key = json_key_excluding(view.names)
            self.compiler.lexemes.add(key)
            return key
        inside = [n for n in view.names if matches(key, json.dumps(n).encode())]
        if inside:
            spellings = alt(*(string_literal_ir(n, all_spellings=True) for n in inside))
            key = difference(key, spellings)
        return None if is_empty(key) else key

    def regions(self, view: ObjectView) -> list[Region]:
        """The regions of undeclared names (see :data:`Region`)."""
        c = self.compiler
        patterns: dict[str, str] = {}
        for p in view.parts:
            for rx, _, where in p.patterns:
                patterns.setdefault(rx, where)
        found = {rx: c.scalars.pattern_lang(rx, patterns[rx]) for rx in patterns}
        inexact = [rx for rx, lang in found.items() if lang is None]
        for rx in inexact:
            c.approx("patternProperties", patterns[rx], f"the pattern {rx!r} cannot be matched "
                     "exactly, so the names it governs are not checked against it")
        langs = {rx: lang for rx, lang in found.items() if lang is not None}
        if inexact:
            return [(None, ((), ()))]
        rxs = sorted(patterns)
        overlap = {(a, b) for i, a in enumerate(rxs) for b in rxs[i + 1:]
                   if not is_empty(intersection(langs[a], langs[b]))}
        regions: list[Region] = [(frozenset(), ((), tuple(langs[r] for r in rxs)))]
        if not overlap:
            regions += [(frozenset({r}), ((langs[r],), ())) for r in rxs]
            return regions
        if len(rxs) > MAX_OVERLAPPING_PATTERNS:
            c.approx("patternProperties", patterns[rxs[0]], f"{len(rxs)} overlapping patterns; names "
                     "matching several of them are not checked against all of their schemas")
            return [(None, ((), ()))]
        for mask in range(1, 1 << len(rxs)):
            chosen = [r for i, r in enumerate(rxs) if mask >> i & 1]
            if any((a, b) not in overlap for i, a in enumerate(chosen) for b in chosen[i + 1:]):
                continue
            others = tuple(langs[r] for r in rxs if r not in chosen)
            regions.append((frozenset(chosen), (tuple(langs[r] for r in chosen), others)))
        return regions

    # ------------------------------------------------------------ any order

    def _any_order(self, slots: list[Slot], names: list[str], extra: Expr | None, lo: int, hi: int | None,
                   where: str, key: frozenset[Node | Synth]) -> tuple[bool, Expr] | None:
        """(can be empty, the non-empty bodies) with the members in any order, or None (with
        a reported restriction) when that needs more states than the option allows and the
        matcher cannot check the members instead (:meth:`_seen_body`)."""
        c = self.compiler
        k = c.options.any_order_max_properties
        if len(slots) > k and self._seen_allowed(key, lo, hi):
            return self._seen_body(slots, names, extra, key)
        if len(slots) > k:
            c.restrict("properties", where, f"{len(slots)} declared properties are more than "
                          f"json_any_order_max_properties={k} (any order needs 2^{len(slots)} states) "
                          f"and {self._why_not_seen(key, lo, hi)}; this object's members are accepted "
                          "in schema order only")
            return None
        required = [r for _, r in slots]
        if any_order_body([m for m, _ in slots], required, extra, c.ws.comma, lo, hi, max_states=1 << k) is None:
            c.restrict("minProperties" if lo else "maxProperties", where,
                          f"counting the members of {len(slots)} declared properties in any order needs "
                          f"more than 2^{k} states (json_any_order_max_properties={k}); this object's "
                          "members are accepted in schema order only")
            return None
        # Every member (and the undeclared-member alternative) becomes a rule of its own: the
        # DFA path inlines them again, and when the grammar is compiled as a PDA instead,
        # each subset state then costs a few nodes (one call per member) rather than a copy
        # of every remaining member's name.
        members: list[Expr] = [c.rules.helper(m, f"member_{_rule_base(name)}") for (m, _), name in zip(slots, names)]
        extra = None if extra is None else c.rules.helper(extra, "other_member")
        return any_order_body(members, required, extra, c.ws.comma, lo, hi)

    def _seen_allowed(self, key: frozenset[Node | Synth], lo: int, hi: int | None) -> bool:
        """May this object's members be checked by the matcher (a members condition in the
        runtime plan) rather than by the grammar? Only where a matcher follows the output's
        JSON structure, nothing is counted, no depth bound makes the same schema compile
        differently by depth, and an earlier compile of this document did not find the
        object at a place the plan cannot locate (``SchemaCompiler.unplanned``)."""
        c = self.compiler
        return (c.runtime_unique and lo == 0 and hi is None and c.options.max_depth is None
                and key not in c.unplanned)

    def _why_not_seen(self, key: frozenset[Node | Synth], lo: int, hi: int | None) -> str:
        """Why :meth:`_seen_allowed` said no (for the restriction's message)."""
        c = self.compiler
        if not c.runtime_unique:
            return "no matcher follows this schema's JSON structure to check the members"
        if lo or hi is not None:
            return "the matcher does not count members (minProperties/maxProperties)"
        if c.options.max_depth is not None:
            return "the matcher does not check members with json_max_depth set"
        return ("the matcher cannot tell which schema governs this object where it is written (branches "
                "admitting objects that differ below, contains, inexact patternProperties or listed values "
                "reach it)")

    def _seen_body(self, slots: list[Slot], names: list[str], extra: Expr | None,
                   key: frozenset[Node | Synth]) -> tuple[bool, Expr]:
        """Any declared member or undeclared one, any number of times: what the matcher's
        members condition leaves of it (each declared name at most once, every required one
        before ``}``) is exactly the members in any order. Recorded in
        ``SchemaCompiler.seen_objects`` for the plan (:mod:`gramc.schemas.unique`)."""
        c = self.compiler
        required = [n for (_, r), n in zip(slots, names) if r]
        c.seen_objects[key] = (list(names), required)
        members: list[Expr] = [c.rules.helper(m, f"member_{_rule_base(name)}") for (m, _), name in zip(slots, names)]
        if extra is not None:
            members.append(c.rules.helper(extra, "other_member"))
        member = c.rules.helper(alt(*members), "any_member")
        return not required, seq(member, repeat(seq(c.ws.comma, member), 0, None))

    # ------------------------------------------------------------ the member sequence

    def _body(self, slots: list[Slot], extra: Expr | None, lo: int, hi: int | None) -> tuple[bool, Expr]:
        """(can be empty, the non-empty bodies) for declared slots then other members, with
        between ``lo`` and ``hi`` members in all: one expression (:meth:`_inline_body`), or
        past :data:`MAX_INLINE_OPTIONAL` optional slots, uncounted, a chain of rules
        (:meth:`_chained_body`)."""
        if lo == 0 and hi is None and sum(not required for _, required in slots) > MAX_INLINE_OPTIONAL:
            return self._chained_body(slots, extra)
        return self._inline_body(slots, extra, lo, hi)

    def _inline_body(self, slots: list[Slot], extra: Expr | None, lo: int, hi: int | None) -> tuple[bool, Expr]:
        """:meth:`_body` as one expression.

        Built from the left: ``runs[c]`` holds the non-empty member sequences over the slots
        seen so far with ``c`` members (``c`` saturates at ``cap`` when there is no upper
        bound). Extending a run by an optional slot is ``run ("," member)?``, so without
        counting every member occurs twice in the expression (alone as the first member,
        and after a comma): linear size, which a right-nested form ("no comma before the
        first member") cannot achieve."""
        sep = self.compiler.ws.comma
        cap = hi if hi is not None else max(lo, 1)
        runs = {c: NOTHING for c in range(1, cap + 1)}
        first_ok = True  # no member yet is still possible (no required slot seen)
        for member, required in slots:
            new = {}
            for c in range(1, cap + 1):
                options = [member] if c == 1 and first_ok else []
                saturated = hi is None and c == cap
                if c > 1:
                    options.append(seq(runs[c - 1], sep, member))
                if saturated:
                    tail = seq(sep, member) if required else optional(seq(sep, member))
                    options.append(seq(runs[c], tail))
                elif not required:
                    options.append(runs[c])
                new[c] = alt(*options)
            runs = new
            first_ok = first_ok and not required
        out = [seq(runs[c], self._tail(extra, c, lo, hi)) for c in range(1, cap + 1)]
        nullable = first_ok and lo == 0
        if first_ok:
            out.append(self._first_tail(extra, lo, hi)[1])
        return nullable, alt(*out)

    def _chained_body(self, slots: list[Slot], extra: Expr | None) -> tuple[bool, Expr]:
        """:meth:`_body` without counting, as two chains of rules, a link per block of
        slots. Inlined, a run of ``n`` optional slots makes every DFA state after a member
        hold the ``n`` ways on: quadratic time and memory in the subset construction. As
        rules, each rule's automaton holds one block.

        For block ``j``, ``own`` is its non-empty member sequences (:meth:`_inline_body`);
        ``after[j]``, the rest once a member was written before the block, is
        ``"," own after[j+1] | after[j+1]``, and ``first[j]``, a body whose first member is
        in the block or a later one, is ``own after[j+1] | first[j+1]`` (without the second
        branch when the block has a required slot). Written out, a link repeats the rest
        of the chain twice, so the compiler keeps these rules as rules (a PDA) rather than
        inlining them into a DFA of the quadratic construction (``build_automaton``); there
        are at least :data:`CHAIN_LINKS` links."""
        rules, sep = self.compiler.rules, self.compiler.ws.comma
        last = repeat(seq(sep, extra), 0, None) if extra is not None else EMPTY
        nullable = not any(required for _, required in slots)
        after, first = last, seq(extra, last) if nullable and extra is not None else NOTHING
        size = min(CHAIN_BLOCK, -(-len(slots) // CHAIN_LINKS))
        for start in range(size * ((len(slots) - 1) // size), -1, -size):
            skippable, own = self._inline_body(slots[start:start + size], None, 0, None)
            body = rules.helper(seq(own, after), f"members_{start}")
            more = seq(sep, body)
            first = rules.helper(alt(body, first), f"members_from_{start}") if skippable else body
            after = rules.helper(alt(more, after) if skippable else more, f"more_members_{start}")
        return nullable, first

    def _tail(self, extra: Expr | None, c: int, lo: int, hi: int | None) -> Expr:
        """The other members after ``c >= 1`` members (NOTHING when the count cannot end well)."""
        if extra is None:
            return EMPTY if c >= lo else NOTHING
        k_lo, k_hi = max(lo - c, 0), (None if hi is None else hi - c)
        if k_hi is not None and k_hi < 0:
            return NOTHING
        return repeat(seq(self.compiler.ws.comma, extra), k_lo, k_hi)

    def _first_tail(self, extra: Expr | None, lo: int, hi: int | None) -> tuple[bool, Expr]:
        """(empty allowed, non-empty) other members when no member was written before."""
        if extra is None or (hi is not None and hi < 1):
            return lo == 0, NOTHING
        more = repeat(seq(self.compiler.ws.comma, extra), max(lo - 1, 0), None if hi is None else hi - 1)
        return lo == 0, seq(extra, more)


def _rule_base(name: str) -> str:
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in name)[:40].strip("_")
    return base or "property"


class _TooManyStates(Exception):
    pass


def any_order_body(members: list[Expr], required: list[bool], extra: Expr | None, comma: Expr,
                   lo: int = 0, hi: int | None = None,
                   max_states: int | None = None) -> tuple[bool, Expr] | None:
    """(can be empty, the non-empty member sequences) of an object whose declared
    ``members`` may come in any order, each at most once (the ``required`` ones exactly
    once), with any number of ``extra`` (undeclared) members anywhere between them, and
    between ``lo`` and ``hi`` members in all. None when more than ``max_states`` states
    would be needed.

    ``after(S, c)`` is the rest of the body once the declared members in the set ``S`` and
    ``c`` members in all have been written (``c`` saturates at ``max(lo, 1)`` when there is
    no upper bound, and is exactly ``|S|`` when there are no extra members): it may end when
    every required member is in ``S`` and ``c >= lo``, or continue with a comma and a member
    not in ``S``, or an extra one. Every ``after`` node and every member is one hash-consed
    node, so the expression is a DAG of ``O(states * n)`` nodes.

    >>> from gramc.compiler.ir import literal
    >>> from gramc.compiler.regular import matches
    >>> a, b = literal(b"a"), literal(b"b")
    >>> _, body = any_order_body([a, b], [True, False], None, literal(b","))
    >>> [matches(body, t) for t in (b"a", b"a,b", b"b,a", b"b", b"a,a")]
    [True, True, True, False, False]
    """
    n = len(members)
    req = sum(1 << i for i, r in enumerate(required) if r)
    nullable = req == 0 and lo == 0
    if hi is not None and hi < 1:
        return nullable, NOTHING
    saturating = hi is None
    cap = hi if hi is not None else max(lo, 1)
    loop = repeat(seq(comma, extra), 0, None) if extra is not None else EMPTY
    memo: dict[tuple[int, int], Expr] = {}

    def after(seen: int, c: int) -> Expr:
        key = (seen, c)
        got = memo.get(key)
        if got is not None:
            return got
        if max_states is not None and len(memo) >= max_states:
            raise _TooManyStates
        options = []
        if seen & req == req and c >= lo:
            options.append(EMPTY)
        self_loop = saturating and c == cap
        if hi is None or c < hi:
            nc = min(c + 1, cap) if saturating else c + 1
            for i in range(n):
                if not seen >> i & 1:
                    options.append(seq(comma, members[i], after(seen | 1 << i, nc)))
            if extra is not None and not self_loop:
                options.append(seq(comma, extra, after(seen, nc)))
        body = alt(*options)
        if extra is not None and self_loop:
            body = seq(loop, body)
        memo[key] = body
        return body

    try:
        first = [seq(members[i], after(1 << i, 1)) for i in range(n)]
        if extra is not None:
            first.append(seq(extra, after(0, 1)))
    except _TooManyStates:
        return None
    return nullable, alt(*first)


__all__ = ["Objects", "ObjectView", "FALSE", "any_order_body"]
