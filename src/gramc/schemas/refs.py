"""The schema document: JSON pointers, ``$id`` base URIs, ``$anchor``\\ s and ``$ref`` resolution.

Every subschema is named by its JSON pointer from the document root (``""`` for the root,
``"/$defs/node"``), which is also how errors and warnings locate it (``#/$defs/node``).
A ``$ref`` is resolved against the base URI in force where it appears (the nearest enclosing
``$id``; draft-04 ``id`` in draft-04 documents) to a resource of this document, then to a
JSON pointer or an anchor (``$anchor``, ``$dynamicAnchor``, or a draft-07 ``"$id": "#name"``)
inside it. References to other documents are refused: gramc compiles one document.

>>> doc = Document({"$defs": {"a~b": {"$anchor": "x"}}, "items": {"$ref": "#/$defs/a~0b"}})
>>> doc.resolve("/items")
'/$defs/a~0b'
>>> doc.resolve_ref("#x", "/items")
'/$defs/a~0b'
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from gramc.errors import SchemaError

DEFAULT_BASE = "https://gramc.invalid/schema.json"

#: Keywords whose value is one subschema.
SCHEMA_KEYWORDS = ("additionalProperties", "additionalItems", "contains", "propertyNames", "not",
                   "if", "then", "else", "unevaluatedItems", "unevaluatedProperties", "items")
#: Keywords whose value is an array of subschemas.
SCHEMA_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
#: Keywords whose value is an object of subschemas.
SCHEMA_MAP_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                       "dependencies")

_DRAFTS = (("draft-04", 4), ("draft-03", 4), ("draft-06", 6), ("draft-07", 7), ("2019-09", 2019),
           ("2020-12", 2020))


def join_uri(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (also for schemes urljoin does not know, such as
    ``urn:``: a fragment-only reference keeps the base, an absolute one replaces it)."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if urlsplit(ref).scheme:
        return ref
    return urljoin(base, ref)


def escape_token(token: str) -> str:
    """A JSON pointer reference token for ``token``."""
    return token.replace("~", "~0").replace("/", "~1")


def unescape_token(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def display(pointer: str) -> str:
    """How messages write a pointer: ``#`` plus the JSON pointer."""
    return "#" + pointer


def detect_draft(root: Any) -> int:
    """The draft a document declares in ``$schema`` (4, 6, 7, 2019 or 2020; 2020 when none)."""
    uri = root.get("$schema") if isinstance(root, dict) else None
    if isinstance(uri, str):
        for marker, draft in _DRAFTS:
            if marker in uri:
                return draft
    return 2020


class Document:
    """One JSON Schema document: pointer lookups, base URIs and reference resolution."""

    def __init__(self, root: Any):
        self.root = root
        self.draft = detect_draft(root)
        self._id_keys = ("id",) if self.draft == 4 else ("$id",)  # draft-04 knows only "id"
        self.notes: list[str] = []
        self._values: dict[str, Any] = {"": root}
        self._bases: dict[str, str] = {}
        self.resources: dict[str, str] = {}
        self.anchors: dict[tuple[str, str], str] = {}
        self.dynamic_anchors: dict[str, int] = {}
        self._index()

    # ------------------------------------------------------------ lookups

    def get(self, pointer: str) -> Any:
        """The JSON value at ``pointer`` (SchemaError when there is none)."""
        if pointer in self._values:
            return self._values[pointer]
        parent, _, token = pointer.rpartition("/")
        container = self.get(parent)
        key = unescape_token(token)
        if isinstance(container, dict) and key in container:
            value = container[key]
        elif isinstance(container, list) and key.isdigit() and int(key) < len(container) \
                and (key == "0" or not key.startswith("0")):
            value = container[int(key)]
        else:
            raise SchemaError(f"the JSON pointer {display(pointer)} points to nothing", display(pointer))
        self._values[pointer] = value
        return value

    def position(self, pointer: str) -> tuple:
        """Where ``pointer`` is in document order (member and item indexes), for sorting."""
        out = []
        container = self.root
        for token in pointer.split("/")[1:]:
            key = unescape_token(token)
            if isinstance(container, dict) and key in container:
                out.append(list(container).index(key))
                container = container[key]
            elif isinstance(container, list) and key.isdigit() and int(key) < len(container):
                out.append(int(key))
                container = container[int(key)]
            else:
                out.append(1 << 30)
                break
        return tuple(out)

    def exists(self, pointer: str) -> bool:
        try:
            self.get(pointer)
        except SchemaError:
            return False
        return True

    def base(self, pointer: str) -> str:
        """The base URI in force at ``pointer``."""
        if pointer in self._bases:
            return self._bases[pointer]
        if pointer == "":
            result = self._own_base(DEFAULT_BASE, self.root)
        else:
            parent = pointer.rpartition("/")[0]
            result = self._own_base(self.base(parent), self.get(pointer))
        self._bases[pointer] = result
        return result

    def _own_base(self, parent_base: str, value: Any) -> str:
        if isinstance(value, dict):
            for key in self._id_keys:
                ident = value.get(key)
                if isinstance(ident, str) and not ident.startswith("#"):
                    return urldefrag(join_uri(parent_base, ident))[0]
        return parent_base

    # ------------------------------------------------------------ indexing

    def _index(self) -> None:
        """Record every resource (``$id``) and anchor reachable through schema keywords."""
        stack = [""]
        while stack:
            pointer = stack.pop()
            value = self.get(pointer)
            if not isinstance(value, dict):
                continue
            base = self.base(pointer)
            self.resources.setdefault(base, pointer)
            for key in self._id_keys:
                ident = value.get(key)
                if isinstance(ident, str) and "#" in ident and urldefrag(ident)[1]:
                    self.anchors.setdefault((base, urldefrag(ident)[1]), pointer)
            for key in ("$anchor", "$dynamicAnchor"):
                if isinstance(value.get(key), str):
                    self.anchors.setdefault((base, value[key]), pointer)
            if isinstance(value.get("$dynamicAnchor"), str):
                name = value["$dynamicAnchor"]
                self.dynamic_anchors[name] = self.dynamic_anchors.get(name, 0) + 1
            stack.extend(reversed(list(_children(pointer, value))))

    # ------------------------------------------------------------ references

    def resolve(self, pointer: str) -> str | None:
        """The target of the ``$ref`` (or ``$dynamicRef``) of the schema at ``pointer``."""
        value = self.get(pointer)
        for key in ("$ref", "$dynamicRef"):
            if isinstance(value, dict) and key in value:
                ref = value[key]
                if not isinstance(ref, str):
                    raise SchemaError(f"{key} must be a string", display(f"{pointer}/{key}"))
                return self.resolve_ref(ref, pointer, key)
        return None

    def resolve_ref(self, ref: str, pointer: str, key: str = "$ref") -> str:
        """The pointer a reference written at ``pointer`` leads to."""
        where = display(f"{pointer}/{key}")
        uri, fragment = urldefrag(join_uri(self.base(pointer), ref))
        resource = self.resources.get(uri)
        if resource is None:
            raise SchemaError(f"cannot resolve {key} {ref!r}: {uri} is not a schema in this document "
                              "(gramc compiles one document; references to others are not fetched)", where)
        fragment = unquote(fragment)
        if fragment == "" or fragment.startswith("/"):
            target = resource + fragment
            if not self.exists(target):
                if resource and fragment and self.exists(fragment) and ref.startswith("#"):
                    # a tool-generated relative "$id" ("/properties/x") that was not meant as a
                    # new base: what the author meant is the pointer from the document root
                    self.notes.append(f"{key} {ref!r} at {where} points to nothing inside the resource "
                                      f"{uri}; it was resolved from the document root")
                    return fragment
                raise SchemaError(f"cannot resolve {key} {ref!r}: the JSON pointer {display(target)} "
                                  "points to nothing", where)
            return target
        anchored = self.anchors.get((uri, fragment))
        if anchored is None:
            raise SchemaError(f"cannot resolve {key} {ref!r}: no anchor {fragment!r} in {uri}", where)
        return anchored


def _children(pointer: str, value: dict) -> list[str]:
    """Pointers of the subschemas of the schema object ``value`` at ``pointer``."""
    out = []
    for key in SCHEMA_KEYWORDS:
        if isinstance(value.get(key), (dict, bool)):
            out.append(f"{pointer}/{escape_token(key)}")
    for key in SCHEMA_LIST_KEYWORDS:
        if isinstance(value.get(key), list):
            out.extend(f"{pointer}/{escape_token(key)}/{i}" for i in range(len(value[key])))
    for key in SCHEMA_MAP_KEYWORDS:
        if isinstance(value.get(key), dict):
            out.extend(f"{pointer}/{escape_token(key)}/{escape_token(name)}"
                       for name, sub in value[key].items() if isinstance(sub, (dict, bool)))
    return out
