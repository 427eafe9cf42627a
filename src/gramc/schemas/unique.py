"""The ``uniqueItems`` plan: which arrays of a document must have unique items.

Uniqueness is not context-free, so the grammar leaves it out and the matcher enforces it
(:mod:`gramc.runtime.unique`). The matcher follows the JSON structure of the output; this
module tells it, for the value at each place of that structure, whether an array there must
have unique items and where the nested values' places lead. A place is a *node*: the
conjunction of atoms the value there must satisfy, as the walker would compile it, after
its disjunctions are resolved by the JSON kind of the value (``anyOf: [{array...}, {null}]``
leaves one branch for arrays). Nodes are made for the values of array positions and of
object members (declared names, and the other names where no ``patternProperties`` could
claim them). Nodes with no unique array at or below them are dropped (-1 in the plan).

Where several branches of a disjunction admit the kind, each branch's node is made: when
they ask compatible things of every value below (``anyOf`` branches that only add
``required`` or bounds beside a ``uniqueItems`` they share, a ``oneOf`` branch that rules a
member out), one merged node stands for all, exactly. Where the place
of a value does not decide whether uniqueness applies (branches that differ below, a
``patternProperties`` value, a ``contains`` schema), the keyword stays over-approximated and
is reported as before.

A plan is JSON-like data (see :class:`gramc.runtime.unique.Plan` for its fields); a document
with no ``uniqueItems: true`` has none, and its grammar and artifact are unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from gramc.compiler.regular import dfa_of
from gramc.errors import SchemaError
from gramc.schemas.atoms import Atom, Neg, Node, Synth
from gramc.schemas.refs import escape_token

if TYPE_CHECKING:
    from gramc.schemas.compiler import SchemaCompiler

#: Keywords whose values are data, not subschemas: never searched for ``uniqueItems``.
DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "$defs", "definitions", "$comment"})

#: Keywords whose values map names (property names, definition names) to subschemas: a key
#: such as "$ref" there is a name, not a reference.
NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                       "dependencies"})

#: The largest pattern DFA (states x byte classes) the plan stores; a larger one leaves the
#: pattern's values unfollowed (reported).
MAX_PATTERN_CELLS = 1 << 16

#: The node of a place no value can fill (a disjunction's branch rules it out): compatible
#: with any node when branches are merged; -1 in the plan.
IMPOSSIBLE = -2


class UniquePlanner:
    """Builds the plan of one compiled document (see the module doc)."""

    def __init__(self, compiler: SchemaCompiler):
        self.c = compiler
        self._ids: dict[frozenset[Atom], int] = {}
        self._nodes: list[dict[str, Any]] = []
        self._values: dict[str, Any] = {}  # the schemas met, by pointer
        self._edges: dict[str, list[str]] = {}  # what applies inside each (children, $ref targets)
        self._mentions: dict[str, str] = {}
        #: objects whose members the matcher checks (SchemaCompiler.seen_objects): then every
        #: place is followed, not only those that lead to a uniqueItems
        self._follow_all = bool(compiler.seen_objects)
        #: the keys of seen_objects that the plan located (a node's "o")
        self.claimed: set[frozenset] = set()
        #: the atoms of the places the plan does not follow (see unplanned)
        self._unfollowed: list[Atom] = []
        #: the pattern DFAs of the plan (see _pattern), and each regex's index among them
        self._patterns: list[dict[str, Any]] = []
        self._pattern_ids: dict[str, int | None] = {}
        #: nodes whose fields are still being filled (a cyclic schema reaches them again)
        self._building: set[int] = set()

    def plan(self) -> dict[str, Any] | None:
        """The plan, or None when no array of the document must be unique and no object's
        members are checked."""
        if self.mentions(Node("")) is None and not self._follow_all:
            return None
        root = self.node(frozenset({Node("")}))
        keep = self._with_unique_below() & self._reachable(root)
        if root not in keep:
            return None
        new = {old: i for i, old in enumerate(sorted(keep))}

        def ref(i: int) -> int:
            return new.get(i, -1)

        def routes(n: dict[str, Any]) -> dict[str, Any]:
            # every region, those with nothing unique below too: a name's region is found
            # by matching all of the object's patterns, and one that matches any of them
            # never takes the other names' node
            return {"m": [[ids, ref(i)] for ids, i in n["m"]]} if n.get("m") else {}

        nodes = [{"u": n["u"], "p": [ref(i) for i in n["p"]], "r": ref(n["r"]),
                  # a declared name with nothing unique below stays where other names lead somewhere
                  "k": {k: ref(i) for k, i in n["k"].items() if ref(i) >= 0 or ref(n["a"]) >= 0 or "m" in n},
                  "a": ref(n["a"]), **({"o": n["o"]} if "o" in n else {}), **routes(n)}
                 for old, n in enumerate(self._nodes) if old in keep]
        used = sorted({i for n in nodes for ids, _ in n.get("m", ()) for i in ids})
        if not used:
            return {"root": new[root], "nodes": nodes}
        renumber = {old: i for i, old in enumerate(used)}
        for n in nodes:
            for route in n.get("m", ()):
                route[0] = [renumber[i] for i in route[0]]
        return {"root": new[root], "nodes": nodes, "patterns": [self._patterns[i] for i in used]}

    def unplanned(self) -> frozenset:
        """The objects of ``SchemaCompiler.seen_objects`` whose members the plan cannot be
        sure to check wherever the grammar writes them: not located by any node, or made of
        a schema that a place the plan does not follow (several branches admitting objects,
        listed values, ``contains``, ``patternProperties``) reaches. Call after :meth:`plan`."""
        reach: set[str] = set()
        todo = [ptr for a in self._unfollowed for ptr in _pointers(a)]
        while todo:
            ptr = todo.pop()
            if ptr in reach:
                continue
            reach.add(ptr)
            if ptr not in self._edges:
                try:
                    self._discover(ptr)
                except SchemaError:  # a made-up schema's pointer to no value: nothing below it
                    continue
            todo.extend(self._edges.get(ptr, ()))
        return frozenset(k for k in self.c.seen_objects
                         if k not in self.claimed or any(ptr in reach for a in k for ptr in _pointers(a)))

    def _edges_of(self, i: int) -> tuple[int, ...]:
        n = self._nodes[i]
        return (*n["p"], n["r"], *n["k"].values(), n["a"], *(j for _, j in n.get("m", ())))

    def _reachable(self, root: int) -> set[int]:
        """The nodes the plan's root leads to (a disjunction's branches that turned out
        different are made but not used)."""
        seen: set[int] = set()
        todo = [root]
        while todo:
            i = todo.pop()
            if i >= 0 and i not in seen:
                seen.add(i)
                todo.extend(self._edges_of(i))
        return seen

    def _merge(self, branches: list[int], kind: str) -> int | None:
        """One node asking of a value of ``kind`` what each of ``branches`` (the nodes of a
        disjunction's branches that admit it) asks, where they are compatible at every place
        below: the same flags (a uniqueness that holds anyway, at most one item, is
        compatible with either), the same members condition, and a value impossible in a
        branch compatible with anything. None where they differ (or a node still being made
        is met)."""
        keep: set[int] = set()  # remade before each branch: merged nodes of earlier ones count
        memo: dict[tuple[int, int], int] = {}
        nodes = self._nodes

        def member(x: int, name: str) -> int:
            return nodes[x]["k"].get(name, nodes[x]["a"])

        def item(x: int, i: int) -> int:
            p = nodes[x]["p"]
            return p[i] if i < len(p) else nodes[x]["r"]

        def pair(x: int, y: int, only: str | None = None) -> int | None:
            if x == IMPOSSIBLE:
                return y
            if y == IMPOSSIBLE or x == y:
                return x
            if x == -1 or y == -1:  # no node: nothing asked of the value, so nothing may be below the other
                return -1 if (y if x == -1 else x) not in keep else None
            if x not in keep and y not in keep:
                return -1
            if x in self._building or y in self._building:
                return None
            if (x, y) in memo:
                return memo[(x, y)]
            nx, ny = nodes[x], nodes[y]
            z = memo[(x, y)] = len(nodes)
            n: dict[str, Any] = {"u": False, "p": [], "r": -1, "k": {}, "a": -1}
            nodes.append(n)
            if only in (None, "array"):
                if nx["u"] != ny["u"] and not (nx.get("_free") if ny["u"] else ny.get("_free")):
                    return None
                n["u"], n["_free"] = nx["u"] or ny["u"], nx.get("_free", False) and ny.get("_free", False)
                for i in range(max(len(nx["p"]), len(ny["p"])) + 1):
                    last = i == max(len(nx["p"]), len(ny["p"]))
                    m = pair(nx["r"], ny["r"]) if last else pair(item(x, i), item(y, i))
                    if m is None:
                        return None
                    if last:
                        n["r"] = m
                    else:
                        n["p"].append(m)
            if only in (None, "object"):
                if nx.get("o") != ny.get("o") or "m" in nx or "m" in ny:  # routes by pattern: not merged
                    return None
                if "o" in nx:
                    n["o"] = nx["o"]
                for name in sorted({*nx["k"], *ny["k"]}):
                    m = pair(member(x, name), member(y, name))
                    if m is None:
                        return None
                    n["k"][name] = m
                m = pair(nx["a"], ny["a"])
                if m is None:
                    return None
                n["a"] = m
            return z

        out: int | None = branches[0]
        for j in branches[1:]:
            if out is None:
                break
            keep.clear()
            keep.update(self._with_unique_below())
            memo.clear()
            out = pair(out, j, kind)
        return out

    def _with_unique_below(self) -> set[int]:
        """Nodes with a unique array or a members condition at or below them (a fixpoint:
        plans may be cyclic)."""
        keep = {i for i, n in enumerate(self._nodes) if n["u"] or "o" in n}
        changed = True
        while changed:
            changed = False
            for i in range(len(self._nodes)):
                if i not in keep and any(j in keep for j in self._edges_of(i)):
                    keep.add(i)
                    changed = True
        return keep

    # ------------------------------------------------------------ nodes

    def node(self, conj: frozenset[Atom] | None) -> int:
        """The node of a value that must satisfy ``conj`` (-1: none needed; IMPOSSIBLE: no
        value can, or ``conj`` is None: no value may be there; written -1 in the plan)."""
        if conj is None:  # a forbidden name, a position past the last item
            return IMPOSSIBLE
        if not (self._follow_all or any(self.mentions(a) for a in conj)):
            return -1
        c = self.c
        flat = c.flatten(conj)
        if flat.false:
            return IMPOSSIBLE
        key = frozenset(flat.parts)
        if key in self._ids:
            return self._ids[key]
        i = self._ids[key] = len(self._nodes)
        n: dict[str, Any] = {"u": False, "p": [], "r": -1, "k": {}, "a": -1}
        self._nodes.append(n)
        self._building.add(i)
        kinds = c.kinds(c.types(flat.parts))
        if "array" in kinds:
            self._array(flat.parts, n)
        if "object" in kinds:
            self._object(flat.parts, n)
        self._building.discard(i)
        return i

    def _array(self, parts: tuple[Atom, ...], n: dict[str, Any]) -> None:
        c = self.c
        resolved = self._resolve(parts, "array")
        if isinstance(resolved, int):
            merged = self._nodes[resolved]
            n["u"], n["p"], n["r"], n["_free"] = merged["u"], merged["p"], merged["r"], merged.get("_free", False)
            return
        if resolved is None:
            return
        positive = c.positive(resolved)
        view = c.arrays.view(positive)
        #: uniqueness holds anyway (at most one item, or no array at all): compatible with either
        n["_free"] = view.hi is not None and view.hi <= 1
        if view.hi is not None and view.lo > view.hi:
            return
        n["u"] = bool(view.unique) and (view.hi is None or view.hi > 1)
        for atom, *_, where in view.contains:
            self._unfollowed.append(atom)
            site = self.mentions(atom)
            if site is not None:
                c.approx("uniqueItems", site, f"an array item that may or may not match the 'contains' at {where} "
                         "cannot be told apart while it is written; uniqueness below it is not enforced")
        k = view.prefix_len
        n["p"] = [self.node(view.position_atoms(i)) for i in range(k)]
        n["r"] = self.node(view.position_atoms(k))

    def _object(self, parts: tuple[Atom, ...], n: dict[str, Any]) -> None:
        c = self.c
        resolved = self._resolve(parts, "object")
        if isinstance(resolved, int):
            merged = self._nodes[resolved]
            n["k"], n["a"] = merged["k"], merged["a"]
            if "o" in merged:
                n["o"] = merged["o"]
            return
        if resolved is None:
            return
        key = frozenset(c.positive(resolved))
        seen = c.seen_objects.get(key)
        if seen is not None:
            n["o"] = [seen[0], seen[1]]
            self.claimed.add(key)
        view = c.objects.view(resolved)
        for name in view.names:
            n["k"][name] = self.node(view.value_atoms(c, name))
        patterns = [(rx, atom) for p in view.parts for rx, atom, _ in p.patterns]
        other = view.region_atoms(c, frozenset())
        if patterns and self._route(view, n):
            n["a"] = self.node(other)
            return
        for _, atom in patterns:
            self._unfollowed.append(atom)
            site = self.mentions(atom)
            if site is not None:
                c.approx("uniqueItems", site, "values of patternProperties are not followed by the runtime "
                         "check; uniqueness is not enforced there")
        if patterns:
            self._unfollowed.extend(other or ())
            site = next((s for a in other or () if (s := self.mentions(a)) is not None), None)
            if site is not None:
                c.approx("uniqueItems", site, "values of undeclared names next to patternProperties are not "
                         "followed by the runtime check; uniqueness is not enforced there")
            return
        n["a"] = self.node(other)

    def _route(self, view: Any, n: dict[str, Any]) -> bool:
        """Give node ``n`` the nodes of its undeclared names by the patterns they match (a
        node's ``m``: the region of names matching exactly those patterns, and its node),
        each pattern's DFA stored once in the plan; False (nothing done) where the
        patterns cannot be told apart exactly or a DFA is too large to store."""
        c = self.c
        with c.quiet():
            regions = c.objects.regions(view)
        if any(region is None for region, _ in regions):
            return False
        routes = []
        for region, _ in regions:
            if not region:
                continue
            ids = []
            for rx in sorted(region):
                i = self._pattern(rx)
                if i is None:
                    return False
                ids.append(i)
            routes.append((sorted(ids), self.node(view.region_atoms(c, region))))
        n["m"] = routes
        return True

    def _pattern(self, rx: str) -> int | None:
        """The index in the plan's ``patterns`` of the DFA of the JSON string literals whose
        value matches ``rx`` (None: not exact, or larger than :data:`MAX_PATTERN_CELLS`)."""
        if rx in self._pattern_ids:
            return self._pattern_ids[rx]
        lang = self.c.scalars.pattern_lang(rx)
        table = None if lang is None else dfa_of(lang, self.c.limits)
        if table is None or table.delta.size > MAX_PATTERN_CELLS:
            self._pattern_ids[rx] = None
            return None
        n_classes = table.n_byte_classes
        self._pattern_ids[rx] = len(self._patterns)
        self._patterns.append({"c": table.byte_class.tolist(), "d": table.delta[:, :n_classes].tolist(),
                               "f": [int(q) for q in np.flatnonzero(table.accept)], "s": int(table.start)})
        return self._pattern_ids[rx]

    def _resolve(self, parts: tuple[Atom, ...], kind: str) -> tuple[Atom, ...] | int | None:
        """``parts`` with its disjunctions resolved for ``kind``: the one branch that admits
        the kind, while there is one; where several do, the node merging theirs (an int)
        when they are compatible; None when no branch does, or when the branches differ and
        the place no longer decides uniqueness (reported), or when the values are listed
        (``enum``/``const``: the grammar writes only valid ones, uniqueness included)."""
        c = self.c
        while True:
            if any("const" in c.part(p) or "enum" in c.part(p) for p in c.positive(parts)):
                self._unfollowed.extend(parts)
                return None
            split = c.combinators.disjunction(parts, kind)
            if split is None:
                return parts
            with c.quiet():
                branches = c.combinators.branches(parts, split, kind, 0)
            live = []
            for b in branches:
                flat = c.flatten(b)
                if not flat.false and kind in c.kinds(c.types(flat.parts)):
                    live.append(flat.parts)
            if not live:
                return None
            if len(live) > 1:
                merged = self._merge([self.node(frozenset(b)) for b in live], kind)
                if merged is not None:
                    return merged
            if len(live) > 1:
                self._unfollowed.extend(a for b in live for a in b)
                sites = [s for b in live for a in b if (s := self.mentions(a)) is not None]
                if sites:
                    c.approx("uniqueItems", sites[0], f"several branches of the {split[1]!r} at "
                             f"{split[0].where} admit {kind}s, so where a value is does not say "
                             "whether its arrays must be unique; uniqueness is not enforced there")
                return None
            parts = live[0]

    # ------------------------------------------------------------ where uniqueItems is

    def mentions(self, atom: Atom) -> str | None:
        """Where a ``uniqueItems: true`` reachable from ``atom`` is (None: nowhere)."""
        if isinstance(atom, Neg):
            return self.mentions(atom.inner)
        if isinstance(atom, Synth):
            for key, value in atom.items:
                if key == "uniqueItems" and value is True:
                    return atom.where
                for v in value if isinstance(value, (list, tuple)) else (value,):
                    if isinstance(v, (Node, Synth, Neg)) and (site := self.mentions(v)) is not None:
                        return site
            return None
        return self._mentions_at(atom.pointer)

    def _mentions_at(self, pointer: str) -> str | None:
        if pointer not in self._values:
            self._discover(pointer)
            self._mentions = self._reaching()
        return self._mentions.get(pointer)

    def _discover(self, pointer: str) -> None:
        """Add the schemas reachable from ``pointer`` (children, ``$ref`` targets, and the
        ``$defs`` a reference may lead into) to the graph."""
        doc = self.c.doc
        todo: list[tuple[str, Any, bool]] = [(pointer, doc.get(pointer), False)]  # (where, value, a name map)
        while todo:
            where, value, names = todo.pop()
            if where in self._values:
                continue
            self._values[where] = value
            out = self._edges[where] = []
            if isinstance(value, list):
                items = [(f"{where}/{i}", v, False) for i, v in enumerate(value)]
                out.extend(w for w, _, _ in items)
                todo.extend(items)
                continue
            if not isinstance(value, dict):
                continue
            if not names and ("$ref" in value or "$dynamicRef" in value):
                target = doc.resolve(where)
                if target is not None:
                    out.append(target)
                    todo.append((target, doc.get(target), False))
            for k, v in value.items():
                if not isinstance(v, (dict, list)) or k in ("enum", "const", "default", "examples"):
                    continue
                child = f"{where}/{escape_token(str(k))}"
                if k not in DATA_KEYWORDS:
                    out.append(child)
                todo.append((child, v, not names and k in NAME_MAPS))

    def _reaching(self) -> dict[str, str]:
        """Per schema, the ``uniqueItems: true`` it reaches (backwards from each one)."""
        back: dict[str, list[str]] = {}
        for src, outs in self._edges.items():
            for dst in outs:
                back.setdefault(dst, []).append(src)
        found = {w: f"#{w}/uniqueItems" for w, v in self._values.items()
                 if isinstance(v, dict) and v.get("uniqueItems") is True}
        todo = list(found)
        while todo:
            w = todo.pop()
            for src in back.get(w, ()):
                if src not in found:
                    found[src] = found[w]
                    todo.append(src)
        return found


def _pointers(atom: Atom) -> list[str]:
    """The schema pointers an atom is made of (a made-up schema's own, and its subschemas')."""
    if isinstance(atom, Neg):
        return _pointers(atom.inner)
    if isinstance(atom, Node):
        return [atom.pointer]
    out = [atom.pointer] if atom.items else []
    for _, value in atom.items:
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], (Node, Synth, Neg)):
                v = v[1]  # (name, atom) of an object of subschemas
            if isinstance(v, (Node, Synth, Neg)):
                out += _pointers(v)
    return out


__all__ = ["UniquePlanner"]
