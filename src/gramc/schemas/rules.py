"""The rules of a schema's grammar besides ``root``, and their names.

The walker makes two kinds: a *value* rule for a conjunction met again while it is being
compiled (how a recursive schema becomes a recursive grammar), named after its schema, and
*helper* rules for parts of object bodies (members in any order, links of a long chain of
optional properties), one per distinct expression. A helper whose object body ended up
unused (beside a NOTHING) is dropped from the grammar.
"""

from __future__ import annotations

from gramc.compiler.ir import Expr, Grammar, Ref, walk

__all__ = ["Rules"]


class Rules:
    """Rule bodies by name, unique names, and the helper rules made so far."""

    def __init__(self) -> None:
        self.bodies: dict[str, Expr] = {}
        self._names: set[str] = {"root"}
        self._next: dict[str, int] = {}  # per base: the suffix to try next
        self._helpers: dict[Expr, Ref] = {}

    def fresh(self, base: str) -> str:
        """A name not given before: ``base``, else ``base_2``, ``base_3``..."""
        name, i = base, self._next.get(base, 2)
        while name in self._names:
            name, i = f"{base}_{i}", i + 1
        self._next[base] = i
        self._names.add(name)
        return name

    def define(self, name: str, body: Expr) -> Ref:
        """The rule ``name`` (from :meth:`fresh`) with ``body``."""
        self.bodies[name] = body
        return Ref(name)

    def helper(self, body: Expr, base: str) -> Ref:
        """A reference to a helper rule whose body is ``body`` (one rule per distinct
        expression, named from ``base``)."""
        ref = self._helpers.get(body)
        if ref is None:
            ref = self._helpers[body] = self.define(self.fresh(base), body)
        return ref

    def grammar(self, root: Expr, lexemes: set[Expr]) -> Grammar:
        """The grammar with start rule ``root``: every rule, less the helpers it never
        reaches."""
        rules = {"root": root, **self.bodies}
        helpers = {ref.name for ref in self._helpers.values()}
        if helpers:
            reached, todo = {"root"}, ["root"]
            while todo:
                for node in walk(rules[todo.pop()]):
                    if isinstance(node, Ref) and node.name not in reached and node.name in rules:
                        reached.add(node.name)
                        todo.append(node.name)
            rules = {n: b for n, b in rules.items() if n in reached or n not in helpers}
        return Grammar(rules, "root", lexemes)
