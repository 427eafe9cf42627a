"""Checking one known value against atoms with the ``jsonschema`` package.

The walker compiles ``enum``/``const`` exactly by keeping the listed values that satisfy
everything else the schema says there; this module answers "does value v satisfy atom a".
OpenAPI ``nullable: true`` is honoured (``null`` is added to ``type``), as the walker does.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from gramc.schemas.atoms import FALSE, TRUE, Atom, Neg, Node, Synth
from gramc.schemas.refs import Document


class ValueChecker:
    """``is_valid(atom, value)`` for the atoms of one document."""

    def __init__(self, doc: Document):
        import jsonschema

        self.doc = doc
        self.root = _patch_nullable(copy.deepcopy(doc.root))
        cls = jsonschema.validators.validator_for(self.root, default=jsonschema.Draft202012Validator)
        self._validator = cls(self.root)
        self._node_cache: dict[str, Any] = {}

    def is_valid(self, atom: Atom, value: Any) -> bool:
        """True when ``value`` satisfies ``atom`` (errors inside jsonschema count as valid:
        the caller keeps the value, the safe side for an over-approximation)."""
        return self.predicate(atom)(value)

    def predicate(self, atom: Atom) -> Callable[[Any], bool]:
        """``is_valid`` for one atom, its schema converted and its validator made once (an
        ``enum`` of n values checks n values against the same atoms)."""
        try:
            validator = self._validator.evolve(schema=self.schema_of(atom))
        except Exception:  # noqa: BLE001 - a broken subschema must not forbid a value
            return lambda value: True

        def check(value: Any) -> bool:
            try:
                return validator.is_valid(value)
            except Exception:  # noqa: BLE001 - as above
                return True

        return check

    def schema_of(self, atom: Atom) -> Any:
        """A plain JSON Schema for an atom (subschemas of made-up atoms are inlined)."""
        if atom == TRUE:
            return True
        if atom == FALSE:
            return False
        if isinstance(atom, Neg):
            return {"not": self.schema_of(atom.inner)}
        if isinstance(atom, Node):
            value = self._at(atom.pointer)
            if isinstance(value, dict) and atom.omit:
                value = {k: v for k, v in value.items() if k not in atom.omit}
            return value
        out = {k: self._convert(v) for k, v in atom.items if k != "$containsRest"}
        if "$containsRest" in out or any(k == "$containsRest" for k, _ in atom.items):
            rest = dict(atom.items)["$containsRest"]
            n = len(dict(atom.items).get("prefixItems", ()))
            out = {"not": {"prefixItems": [True] * n, "items": {"not": self.schema_of(rest)}}}
        return out

    def _convert(self, value: Any) -> Any:
        if isinstance(value, (Node, Neg, Synth)):
            return self.schema_of(value)
        if isinstance(value, tuple) and value and all(isinstance(v, tuple) and len(v) == 2
                                                      and isinstance(v[0], str) for v in value):
            return {k: self._convert(v) for k, v in value}
        if isinstance(value, tuple):
            return [self._convert(v) for v in value]
        return value

    def _at(self, pointer: str) -> Any:
        if pointer not in self._node_cache:
            from gramc.schemas.refs import unescape_token

            value = self.root
            for token in pointer.split("/")[1:]:
                key = unescape_token(token)
                value = value[int(key)] if isinstance(value, list) else value[key]
            self._node_cache[pointer] = value
        return self._node_cache[pointer]


def _patch_nullable(value: Any) -> Any:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if v.get("nullable") is True and "type" in v:
                t = v["type"]
                types = [t] if isinstance(t, str) else list(t) if isinstance(t, list) else None
                if types is not None and "null" not in types:
                    v["type"] = types + ["null"]
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return value
