"""Unicode property escapes ``\\p{...}`` / ``\\P{...}``: their code-point sets, with ECMA-262's names.

ECMA-262 (with the ``u`` flag, the JSON Schema ``pattern`` dialect) names a property in one of
three ways, case-sensitively and without loose matching:

- a General_Category value alone: ``\\p{L}``, ``\\p{Lu}``, ``\\p{Uppercase_Letter}``;
- ``Name=Value`` for General_Category (``gc``), Script (``sc``) or Script_Extensions
  (``scx``): ``\\p{gc=Nd}``, ``\\p{Script=Greek}``, ``\\p{sc=Hani}``;
- a binary property alone: ``\\p{Alphabetic}``, ``\\p{White_Space}``, ``\\p{ASCII}``.

Which code points have a property comes from the Unicode database of the ``regex`` package
(Python's ``re`` has no property escapes and ``unicodedata`` has no scripts; ``regex`` has
both, from one Unicode version). Each set is computed once per process by scanning every code
point with ``regex`` and kept in a bounded cache. Names are checked here against ECMA-262's
tables before ``regex`` sees them, so a name ECMA-262 rejects (``\\p{letter}``, ``\\p{IsGreek}``)
is an error rather than ``regex``'s looser reading.
"""

from __future__ import annotations

from functools import lru_cache

from gramc.compiler.unicode import MAX_CODEPOINT, SURROGATE_HI, SURROGATE_LO, CodepointSet
from gramc.errors import BackendUnavailableError

#: General_Category values, short and long names (ECMA-262 table "Value aliases and canonical
#: values for the Unicode property General_Category").
GENERAL_CATEGORIES: dict[str, str] = {
    "C": "Other", "Cc": "Control", "Cf": "Format", "Cn": "Unassigned", "Co": "Private_Use",
    "Cs": "Surrogate", "L": "Letter", "LC": "Cased_Letter", "Ll": "Lowercase_Letter",
    "Lm": "Modifier_Letter", "Lo": "Other_Letter", "Lt": "Titlecase_Letter", "Lu": "Uppercase_Letter",
    "M": "Mark", "Mc": "Spacing_Mark", "Me": "Enclosing_Mark", "Mn": "Nonspacing_Mark", "N": "Number",
    "Nd": "Decimal_Number", "Nl": "Letter_Number", "No": "Other_Number", "P": "Punctuation",
    "Pc": "Connector_Punctuation", "Pd": "Dash_Punctuation", "Pe": "Close_Punctuation",
    "Pf": "Final_Punctuation", "Pi": "Initial_Punctuation", "Po": "Other_Punctuation",
    "Ps": "Open_Punctuation", "S": "Symbol", "Sc": "Currency_Symbol", "Sk": "Modifier_Symbol",
    "Sm": "Math_Symbol", "So": "Other_Symbol", "Z": "Separator", "Zl": "Line_Separator",
    "Zp": "Paragraph_Separator", "Zs": "Space_Separator",
}
#: Other names ECMA-262 accepts for some General_Category values.
_CATEGORY_ALIASES = {"Combining_Mark": "M", "digit": "Nd", "punct": "P"}
_CATEGORY_OF = {**{long: short for short, long in GENERAL_CATEGORIES.items()},
                **{short: short for short in GENERAL_CATEGORIES}, **_CATEGORY_ALIASES}

#: Binary properties ECMA-262 allows alone (table "Binary Unicode property aliases"), by their
#: canonical names and aliases.
BINARY_PROPERTIES = frozenset("""
ASCII ASCII_Hex_Digit AHex Alphabetic Alpha Any Assigned Bidi_Control Bidi_C Bidi_Mirrored Bidi_M
Case_Ignorable CI Cased Changes_When_Casefolded CWCF Changes_When_Casemapped CWCM
Changes_When_Lowercased CWL Changes_When_NFKC_Casefolded CWKCF Changes_When_Titlecased CWT
Changes_When_Uppercased CWU Dash Default_Ignorable_Code_Point DI Deprecated Dep Diacritic Dia
Emoji Emoji_Component EComp Emoji_Modifier EMod Emoji_Modifier_Base EBase Emoji_Presentation EPres
Extended_Pictographic ExtPict Extender Ext Grapheme_Base Gr_Base Grapheme_Extend Gr_Ext Hex_Digit Hex
IDS_Binary_Operator IDSB IDS_Trinary_Operator IDST ID_Continue IDC ID_Start IDS Ideographic Ideo
Join_Control Join_C Logical_Order_Exception LOE Lowercase Lower Math Noncharacter_Code_Point NChar
Pattern_Syntax Pat_Syn Pattern_White_Space Pat_WS Quotation_Mark QMark Radical Regional_Indicator RI
Sentence_Terminal STerm Soft_Dotted SD Terminal_Punctuation Term Unified_Ideograph UIdeo Uppercase
Upper Variation_Selector VS White_Space space XID_Continue XIDC XID_Start XIDS
""".split())

_NAMES = {"General_Category": "gc", "gc": "gc", "Script": "sc", "sc": "sc",
          "Script_Extensions": "scx", "scx": "scx"}
#: Properties whose sets a process keeps (each a tuple of ranges: a few KB).
PROPERTY_CACHE_SIZE = 256


class PropertyNameError(ValueError):
    """``\\p{...}`` names no property ECMA-262 knows (the message says which part)."""


class PropertyUnavailableError(PropertyNameError):
    """``\\p{...}`` names a property ECMA-262 knows but the ``regex`` package's database lacks."""


def property_set(text: str) -> CodepointSet:
    """The code points of the property written ``text`` between the braces of ``\\p{...}``.

    Raises:
        PropertyNameError: ``text`` is not a property name ECMA-262 accepts.
        BackendUnavailableError: the ``regex`` package (``pip install gramc[compile]``) is
            not installed.
    """
    name, eq, value = text.partition("=")
    if not eq:
        if text in _CATEGORY_OF:
            return _scan(r"\p{gc=%s}" % _CATEGORY_OF[text])
        if text == "Any":
            return CodepointSet([(0, MAX_CODEPOINT)])
        if text in BINARY_PROPERTIES:
            try:
                return _scan(r"\p{%s}" % text)
            except PropertyNameError:
                raise PropertyUnavailableError(f"Unicode property {text!r} is not in the Unicode database of "
                                               "the installed 'regex' package") from None
        raise PropertyNameError(f"unknown Unicode property or General_Category value {text!r} (ECMA-262 names "
                                "a category as L or Letter, a binary property as Alphabetic, a script as "
                                "Script=Greek)")
    kind = _NAMES.get(name)
    if kind is None:
        raise PropertyNameError(f"unknown Unicode property name {name!r} (expected General_Category, gc, "
                                "Script, sc, Script_Extensions or scx)")
    if kind == "gc":
        if value not in _CATEGORY_OF:
            raise PropertyNameError(f"unknown General_Category value {value!r}")
        return _scan(r"\p{gc=%s}" % _CATEGORY_OF[value])
    if not value or not value.replace("_", "").isalnum() or not value.isascii():
        raise PropertyNameError(f"bad {name} value {value!r}")
    return _scan(r"\p{%s=%s}" % (kind, value))


@lru_cache(maxsize=PROPERTY_CACHE_SIZE)
def _scan(pattern: str) -> CodepointSet:
    """The code points ``regex`` matches with the one-character ``pattern``."""
    try:
        import regex
    except ImportError:
        raise BackendUnavailableError(
            "Unicode property escapes \\p{...} need the 'regex' package: pip install 'gramc[compile]'"
        ) from None
    try:
        compiled = regex.compile(pattern + "+")
    except regex.error as err:
        raise PropertyNameError(f"unknown Unicode property {pattern[3:-1]!r} ({err})") from None
    ranges = []
    for lo, hi in ((0, SURROGATE_LO - 1), (SURROGATE_HI + 1, MAX_CODEPOINT)):
        for m in compiled.finditer(_code_points(lo, hi)):
            ranges.append((lo + m.start(), lo + m.end() - 1))
    return CodepointSet(ranges)


@lru_cache(maxsize=2)
def _code_points(lo: int, hi: int) -> str:
    """Every code point from ``lo`` to ``hi`` as one string (scanned by :func:`_scan`)."""
    return "".join(map(chr, range(lo, hi + 1)))
