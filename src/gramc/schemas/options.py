"""Options of the JSON Schema frontend, and the record of an over-approximation.

>>> SchemaOptions(whitespace="compact").whitespace
'compact'
>>> str(Approximation("uniqueItems", "#/properties/tags", "not enforced"))
"over-approximated 'uniqueItems' at #/properties/tags: not enforced"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

WHITESPACE_MODES = ("flexible", "compact")
PROPERTY_ORDERS = ("schema", "any")
#: Default of :attr:`SchemaOptions.any_order_max_properties` (see docs/json-schema.md,
#: "Property order": measured compile times and automaton sizes).
ANY_ORDER_MAX_PROPERTIES = 8


@dataclass(frozen=True)
class SchemaOptions:
    """How a JSON Schema becomes a grammar (every field changes the compiled language).

    Attributes:
        whitespace: ``"flexible"`` (default): any JSON whitespace (space, tab, LF, CR) between
            the tokens inside arrays and objects; ``"compact"``: none at all
            (``{"a":1,"b":[1,2]}``). No whitespace before or after the top-level value.
        max_whitespace: in flexible mode, the longest run of whitespace between two tokens
            (None: unbounded). Bounding it stops a model from padding forever.
        additional_properties_default: what an absent ``additionalProperties`` means. True is
            the JSON Schema default (extra properties allowed); False treats every object schema
            that declares ``properties`` or ``patternProperties`` but (all of its ``allOf``
            parts together) says nothing about additional or unevaluated properties as if it
            said ``"additionalProperties": false``. Schemas that declare no properties (``{}``,
            ``{"type": "object"}``) still allow any object.
        strict: refuse (:class:`~gramc.errors.SchemaError`) every keyword that cannot be
            enforced exactly, instead of over-approximating it with a warning.
        max_depth: the deepest nesting of arrays and objects the output may have (None:
            unbounded; recursive schemas then compile to a PDA). A bound turns recursive
            schemas into regular ones (a DFA), and forbids deeper documents.
        max_branches: how many combinations of ``anyOf``/``oneOf``/``if``/``not``/dependency
            branches one schema may expand into before the compile is refused.
        property_order: ``"schema"`` (default): the declared properties of an object appear
            in schema order, undeclared ones after them; ``"any"``: the members may appear in
            any order (declared ones at most once each, undeclared ones anywhere between
            them). See docs/json-schema.md, "Property order".
        any_order_max_properties: in ``"any"`` mode, an object with more declared
            properties than this (or whose member counting would need more states than
            ``2 ** any_order_max_properties``) keeps schema order, with a warning: the
            automaton over "which properties were seen" has ``2 ** n`` states.
    """

    whitespace: str = "flexible"
    max_whitespace: int | None = None
    additional_properties_default: bool = True
    strict: bool = False
    max_depth: int | None = None
    max_branches: int = 20_000
    property_order: str = "schema"
    any_order_max_properties: int = ANY_ORDER_MAX_PROPERTIES

    def __post_init__(self) -> None:
        if self.whitespace not in WHITESPACE_MODES:
            raise ValueError(f"whitespace must be one of {WHITESPACE_MODES}, got {self.whitespace!r}")
        if self.property_order not in PROPERTY_ORDERS:
            raise ValueError(f"property_order must be one of {PROPERTY_ORDERS}, got {self.property_order!r}")
        n = self.any_order_max_properties
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 20:
            raise ValueError(f"any_order_max_properties must be an integer in 0..20, got {n!r}")
        for name in ("max_whitespace", "max_depth"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"{name} must be a non-negative integer or None, got {value!r}")

    @classmethod
    def from_compile_options(cls, meta: Mapping[str, Any]) -> "SchemaOptions":
        """The schema options held by a :meth:`CompileOptions.to_meta` dictionary
        (``json_*`` keys; absent keys take their defaults)."""
        d = cls()
        return cls(
            whitespace=meta.get("json_whitespace", d.whitespace),
            max_whitespace=meta.get("json_max_whitespace", d.max_whitespace),
            additional_properties_default=meta.get("json_additional_properties_default",
                                                   d.additional_properties_default),
            strict=meta.get("json_strict", d.strict),
            max_depth=meta.get("json_max_depth", d.max_depth),
            property_order=meta.get("json_property_order", d.property_order),
            any_order_max_properties=meta.get("json_any_order_max_properties", d.any_order_max_properties),
        )


@dataclass(frozen=True)
class Approximation:
    """A keyword compiled as an over-approximation: the output language accepts every
    valid document, and also some that violate ``keyword`` at ``pointer``."""

    keyword: str
    pointer: str
    reason: str

    def __str__(self) -> str:
        return f"over-approximated {self.keyword!r} at {self.pointer}: {self.reason}"


@dataclass(frozen=True)
class Restriction:
    """A place where the output language is smaller than the set of valid documents
    beyond what the options ask for (``json_property_order="any"`` falling back to schema
    order for one object): every document it accepts is valid, and some valid ones that the
    options would have allowed are not generated. Issued as a GramcWarning, never refused in
    strict mode (strict mode refuses over-approximations only)."""

    keyword: str
    pointer: str
    reason: str

    def __str__(self) -> str:
        return f"restricted {self.keyword!r} at {self.pointer}: {self.reason}"
