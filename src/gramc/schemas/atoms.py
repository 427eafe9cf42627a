"""Atoms: the schemas the compiler combines, and typed access to their keywords.

The compiler works on *conjunctions*: sets of atoms an instance must all satisfy. An atom is

- a :class:`Node`: the schema at a JSON pointer of the document, optionally with some
  keywords set aside (``omit``) once the compiler has dealt with them (an ``anyOf`` that was
  distributed, a ``$ref`` that was expanded);
- a :class:`Neg`: an instance must *not* satisfy the inner atom (``not``, the else-branch of
  ``if``, the other branches of ``oneOf``);
- a :class:`Synth`: a small schema gramc made up while rewriting (``{"required": ["a"]}``
  for the "a is present" branch of ``dependentRequired``); its subschemas are atoms.

``group`` records which enclosing schemas with ``unevaluatedProperties``/``unevaluatedItems``
an in-place subschema belongs to, since those keywords see the annotations of their whole
in-place subtree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from gramc.errors import SchemaError
from gramc.schemas.refs import Document, display, escape_token

#: Keywords that apply their subschemas to the same instance (they inherit ``group``).
IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "if", "then", "else", "dependentSchemas",
                      "dependencies", "$ref", "$dynamicRef"})  # not "not": it never annotates
UNEVALUATED = ("unevaluatedProperties", "unevaluatedItems")


@dataclass(frozen=True)
class Node:
    """The schema at ``pointer``, less the keywords in ``omit``."""

    pointer: str
    omit: frozenset = frozenset()
    group: tuple = ()
    #: where the compiler met this schema (positions along the path of keywords, through
    #: ``$ref`` sites): the order of declared properties follows it. Not part of identity.
    order: tuple = field(default=(), compare=False)

    def without(self, *keywords: str) -> "Node":
        return Node(self.pointer, self.omit | frozenset(keywords), self.group, self.order)

    @property
    def where(self) -> str:
        return display(self.pointer)

    @property
    def sort_key(self) -> str:
        return f"N{self.pointer}\x00{','.join(sorted(self.omit))}\x00{'|'.join(self.group)}"


@dataclass(frozen=True)
class Neg:
    """An instance must not satisfy ``inner``; ``pointer`` is where the negation was written."""

    inner: "Atom"
    pointer: str = ""

    @property
    def where(self) -> str:
        return display(self.pointer)

    @property
    def order(self) -> tuple:
        return self.inner.order

    @property
    def sort_key(self) -> str:
        return f"X{self.pointer}\x00{self.inner.sort_key}"


@dataclass(frozen=True)
class Synth:
    """A made-up schema: ``items`` are (keyword, value) pairs, subschema values are atoms,
    object-of-subschema values are tuples of (name, atom) pairs."""

    items: tuple = ()
    pointer: str = ""
    group: tuple = ()
    order: tuple = field(default=(), compare=False)
    _key: str = field(default="", compare=False, repr=False)

    @property
    def where(self) -> str:
        return display(self.pointer)

    @property
    def sort_key(self) -> str:
        if not self._key:
            object.__setattr__(self, "_key", f"S{self.pointer}\x00{_render(self.items)}\x00{'|'.join(self.group)}")
        return self._key


Atom = Union[Node, Neg, Synth]
TRUE = Synth((), "")
FALSE = Synth((("$false", True),), "")


def synth(pointer: str, order: tuple = (), **keywords: Any) -> Synth:
    """A made-up schema from keyword arguments (``properties`` given as a dict of atoms);
    ``order`` places it among the parts (see :attr:`Node.order`)."""
    items = []
    for key, value in sorted(keywords.items()):
        if isinstance(value, dict):
            value = tuple(value.items())
        elif isinstance(value, list):
            value = tuple(value)
        items.append((key, value))
    return Synth(tuple(items), pointer, (), order)


def _render(value: Any) -> str:
    if isinstance(value, (Node, Neg, Synth)):
        return "<" + value.sort_key + ">"
    if isinstance(value, tuple):
        return "(" + ",".join(_render(v) for v in value) + ")"
    return repr(value)


class Keywords:
    """Typed access to the keywords of one positive atom (a Node or a Synth)."""

    __slots__ = ("atom", "raw", "doc", "pointer", "_child_group", "_positions")

    def __init__(self, atom: Node | Synth, raw: dict, doc: Document):
        self.atom, self.raw, self.doc = atom, raw, doc
        self.pointer = atom.pointer
        self._positions: dict[tuple, dict] = {}  # see _position
        if isinstance(atom, Node):
            own = tuple(atom.pointer for k in UNEVALUATED if k in raw)[:1]
            self._child_group = atom.group + own
        else:
            self._child_group = ()

    def __contains__(self, key: str) -> bool:
        return key in self.raw

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    def where(self, *path: str) -> str:
        return display(self.pointer + "".join("/" + escape_token(str(p)) for p in path))

    def fail(self, key: str, expected: str) -> SchemaError:
        return SchemaError(f"{key!r} must be {expected}, not {type(self.raw[key]).__name__} "
                           f"{_short(self.raw[key])}", self.where(key))

    # ------------------------------------------------------------ subschemas

    def _child(self, key: str, *path: Any) -> "Atom":
        if isinstance(self.atom, Synth):
            value = self.raw[key]
            for p in path:
                value = dict(value)[p] if isinstance(p, str) else value[p]
            return value
        pointer = self.pointer + "".join("/" + escape_token(str(p)) for p in (key, *path))
        value = self.doc.get(pointer)
        if not isinstance(value, (dict, bool)):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(value).__name__} "
                              f"{_short(value)}", display(pointer))
        return Node(pointer, frozenset(), self._child_group if key in IN_PLACE else (), self.order_of(key, *path))

    def order_of(self, key: str, *path: Any) -> tuple:
        """The :attr:`Node.order` of the subschema at ``key`` (and ``path``) of this atom."""
        if isinstance(self.atom, Synth):
            return self.atom.order + (0,)
        full = self.doc.get(self.pointer)
        names = full if isinstance(full, dict) else {}
        rel = [self._position((), names, key) if key in names else len(names)]
        value = names.get(key)
        for i, p in enumerate(path):
            if isinstance(value, dict) and p in value:
                rel.append(self._position((key, *path[:i]), value, p))
                value = value[p]
            elif isinstance(value, list) and isinstance(p, int) and p < len(value):
                rel.append(p)
                value = value[p]
        return self.atom.order + tuple(rel)

    def _position(self, where: tuple, mapping: dict, key: Any) -> int:
        """The position of ``key`` in ``mapping`` (the dict at ``where`` below this atom),
        from an index made once: the n names of a ``properties`` each ask."""
        positions = self._positions.get(where)
        if positions is None:
            positions = self._positions[where] = {k: i for i, k in enumerate(mapping)}
        return positions[key]

    def sub(self, key: str) -> Atom | None:
        """The subschema of a single-schema keyword (None when absent)."""
        if key not in self.raw:
            return None
        value = self.raw[key]
        if isinstance(self.atom, Synth):
            return value
        if not isinstance(value, (dict, bool)):
            raise self.fail(key, "a schema (an object or a boolean)")
        return self._child(key)

    def subs(self, key: str) -> list[Atom]:
        """The subschemas of an array-of-schemas keyword ([] when absent)."""
        if key not in self.raw:
            return []
        value = self.raw[key]
        if not isinstance(value, (list, tuple)):
            raise self.fail(key, "an array of schemas")
        return [self._child(key, i) for i in range(len(value))]

    def submap(self, key: str) -> dict[str, Atom]:
        """The subschemas of an object-of-schemas keyword, in document order."""
        if key not in self.raw:
            return {}
        value = self.raw[key]
        if isinstance(self.atom, Synth):
            return dict(value)
        if not isinstance(value, dict):
            raise self.fail(key, "an object of schemas")
        return {name: self._child(key, name) for name in value}

    # ------------------------------------------------------------ plain values

    def number(self, key: str) -> int | float | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, "a number")
        return value

    def count(self, key: str) -> int | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(key, "a non-negative integer")
        return value

    def names(self, key: str) -> list[str]:
        value = self.raw.get(key, [])
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, "an array of strings")
        return list(value)

    def string(self, key: str) -> str | None:
        value = self.raw.get(key)
        if value is not None and not isinstance(value, str):
            raise self.fail(key, "a string")
        return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
