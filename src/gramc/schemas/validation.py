"""Checking one known value against atoms with the ``jsonschema`` package.

The walker compiles ``enum``/``const`` exactly by keeping the listed values that satisfy
everything else the schema says there; this module answers "does value v satisfy atom a".
OpenAPI ``nullable: true`` is honoured (``null`` is added to ``type``), as the walker does.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from gramc.schemas.atoms import FALSE, TRUE, Atom, Neg, Node, Synth
from gramc.schemas.refs import Document


class ValueChecker:
    """``is_valid(atom, value)`` for the atoms of one document."""

    def __init__(self, doc: Document):
        self.doc = doc
        self.root = _nullable_patched_copy(doc.root)
        self._validator = _validator_class(self.root)(self.root)
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


def _nullable_patched_copy(value: Any) -> Any:
    """A copy of the JSON value ``value`` in which ``nullable: true`` adds ``null`` to a
    ``type``, made on an explicit stack (schemas nest as deep as their author likes)."""
    def fresh(v: Any) -> Any:
        return {} if isinstance(v, dict) else [] if isinstance(v, list) else v

    root = fresh(value)
    stack = [(value, root)]
    while stack:
        source, copied = stack.pop()
        for key, v in source.items() if isinstance(source, dict) else enumerate(source):
            part = fresh(v)
            if isinstance(copied, dict):
                copied[key] = part
            else:
                copied.append(part)
            if isinstance(v, (dict, list)):
                stack.append((v, part))
        if isinstance(source, dict) and source.get("nullable") is True and "type" in source:
            t = source["type"]
            types = [t] if isinstance(t, str) else list(t) if isinstance(t, list) else None
            if types is not None and "null" not in types:
                copied["type"] = types + ["null"]
    return root


#: Keywords newer than drafts 04-07 that the walker applies in documents of every draft
#: (docs/json-schema.md reads one vocabulary, plus the draft-04 spellings), so the checker
#: must apply them too: a draft-04 validator ignores ``const`` and ``if``, and a value the
#: grammar ruled in by a ``const`` inside an ``if`` was ruled out by the checker's ``not``.
#: (``exclusiveMinimum``/``exclusiveMaximum`` are left to the draft: draft-04's are flags.)
NEWER_KEYWORDS = ("const", "contains", "dependentRequired", "dependentSchemas", "if", "prefixItems",
                  "propertyNames")


def _validator_class(root: Any) -> Any:
    """The validator of ``root``'s draft, extended with :data:`NEWER_KEYWORDS` it lacks."""
    import jsonschema

    return _extended(jsonschema.validators.validator_for(root, default=jsonschema.Draft202012Validator))


@cache
def _extended(cls: Any) -> Any:
    """``cls`` with the :data:`NEWER_KEYWORDS` it lacks (made once per draft's class)."""
    import jsonschema

    newest = jsonschema.Draft202012Validator
    missing = {k: newest.VALIDATORS[k] for k in NEWER_KEYWORDS if k not in cls.VALIDATORS}
    return jsonschema.validators.extend(cls, missing) if missing else cls
