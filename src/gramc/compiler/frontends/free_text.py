"""Free text of structural tags as regular languages: text that avoids strings, and text
that runs until a trigger.

A structural tag's free text (``any_text``, the text between ``triggered_tags``) is any
UTF-8 text in which some strings may not occur: ``excludes``, the enclosing tag's end, the
triggers. Each such language is built exactly as a regular language (the difference of the
UTF-8 texts and ``Σ* (p1 | p2 | ...) Σ*``, whose subset construction is the Aho-Corasick
automaton of the strings) and turned back into IR by state elimination
(:func:`gramc.compiler.regular.difference`), so it becomes ordinary automaton states whose masks
are bound like any other: no matching runs while a decoder asks for masks.

>>> print(avoiding([b"ab"], max_chars=None, limits=DEFAULT_LIMITS, ascii_only=True), end="")
([\\x00-`b-\\x7f] | "a" "a"* [\\x00-`c-\\x7f])* ("a" "a"*)?
"""

from __future__ import annotations

from collections.abc import Sequence

from gramc.compiler.ir import EMPTY, Expr, alt, any_byte, byte_range, literal, repeat, seq
from gramc.compiler.regular import difference
from gramc.compiler.unicode import ALL_CODEPOINTS
from gramc.limits import DEFAULT_LIMITS, Limits

__all__ = ["utf8_text", "avoiding", "until_trigger"]


def utf8_text(max_chars: int | None = None, *, ascii_only: bool = False) -> Expr:
    """Any UTF-8 text (at most ``max_chars`` code points when given); ``ascii_only`` narrows
    it to ASCII (smaller automata, for examples and tests)."""
    char = byte_range(0, 0x7F) if ascii_only else ALL_CODEPOINTS.to_ir()
    return repeat(char, 0, max_chars)


def _containing(patterns: Sequence[bytes], tail: Expr = EMPTY) -> Expr:
    """``Σ* (p1 | p2 | ...) tail``: the byte strings with an occurrence of a pattern
    followed by ``tail``."""
    return seq(repeat(any_byte(), 0, None), alt(*(literal(p) for p in patterns)), tail)


def avoiding(avoid: Sequence[bytes], max_chars: int | None, limits: Limits = DEFAULT_LIMITS,
             *, ascii_only: bool = False) -> Expr:
    """UTF-8 text (at most ``max_chars`` code points) in which no string of ``avoid`` occurs
    (empty strings are ignored)."""
    text = utf8_text(max_chars, ascii_only=ascii_only)
    patterns = sorted({p for p in avoid if p})
    return difference(text, _containing(patterns, repeat(any_byte(), 0, None)), limits) if patterns else text


def until_trigger(trigger: bytes, triggers: Sequence[bytes], avoid: Sequence[bytes],
                  limits: Limits = DEFAULT_LIMITS) -> Expr:
    """Free text ``w`` followed by ``trigger``, where ``w`` avoids the strings of ``avoid``
    and ``trigger`` is the first occurrence of any of ``triggers`` in ``w + trigger`` (the
    earliest to end, as a matcher scanning the text left to right detects it): no trigger
    ends before the last byte."""
    text = seq(avoiding(avoid, None, limits), literal(trigger))
    return difference(text, _containing(triggers, repeat(any_byte(), 1, None)), limits)
