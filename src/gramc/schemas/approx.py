"""The one signal the JSON Schema leaf primitives give when they cannot be exact.

A primitive (:mod:`gramc.schemas.numbers`, :mod:`gramc.schemas.strings`,
:mod:`gramc.schemas.formats`) either returns IR whose language is exactly what it documents,
or raises :class:`NotExpressible`. It never over- or under-approximates silently: the schema
walker decides, by its documented policy, whether to drop the keyword with a warning (an
over-approximation) or to refuse the schema (``--strict``).
"""

from __future__ import annotations


class NotExpressible(Exception):
    """A constraint that cannot be lowered exactly (``keyword``: the JSON Schema keyword,
    ``reason``: why, in words a user can act on)."""

    def __init__(self, keyword: str, reason: str):
        self.keyword = keyword
        self.reason = reason
        super().__init__(f"{keyword}: {reason}")


class TooLarge(NotExpressible):
    """A constraint that is expressible exactly, but whose automaton would pass a size
    bound: a smaller over-approximation may still be built (see
    :func:`gramc.schemas.strings.relaxed_pattern_ir`)."""


class InvalidKeyword(Exception):
    """A keyword whose value is invalid (a ``pattern`` that is no regular expression): the
    schema is invalid, which is an error, never an approximation."""

    def __init__(self, keyword: str, reason: str):
        self.keyword = keyword
        self.reason = reason
        super().__init__(f"{keyword}: {reason}")
