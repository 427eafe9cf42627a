"""ECMA-262 patterns whose alternatives open with lookaheads, as exact regular languages.

Real schemas exclude reserved names with a lookahead at the start of the pattern:
``^(?!@@)[\\w@]+$``, ``^(?!(if|in|not|...)$)[a-zA-Z_]\\w*$``. A lookahead there tests the text
from where its alternative starts, so it is an intersection (``(?=A)``) or a difference
(``(?!A)``) of languages the regex frontend builds without lookarounds:

- ``^(?=A)R`` is searched in exactly the texts that ``^A`` and ``^R`` both search-match, and
  ``^(?!A)R`` in those that ``^R`` matches and ``^A`` does not;
- without the ``^``, the same language may be preceded by any text.

:func:`split_lookaheads` finds such alternatives; :func:`lookahead_language` builds the
language from a caller's builder of lookaround-free patterns. A lookahead anywhere else (after
a character, inside a group, quantified) is left to the regex frontend, which refuses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gramc.compiler.frontends.regex import group_marks
from gramc.compiler.ir import Expr, alt, repeat, seq
from gramc.compiler.regular import difference, intersection
from gramc.errors import LimitExceededError
from gramc.limits import DEFAULT_LIMITS, Limits
from gramc.schemas.approx import NotExpressible


@dataclass(frozen=True)
class Lookahead:
    """``(?=body)`` or, when ``negative``, ``(?!body)``."""

    negative: bool
    body: str


@dataclass(frozen=True)
class Branch:
    """A top-level alternative: ``^`` (when ``anchored``), its leading lookaheads, the rest."""

    anchored: bool
    looks: tuple[Lookahead, ...]
    rest: str


def split_lookaheads(pattern: str) -> list[Branch] | None:
    """The top-level alternatives of ``pattern`` when at least one opens with a lookahead
    (after its ``^``, if any); None otherwise, and for patterns that do not scan (unbalanced
    groups: the regex frontend reports them) or quantify a leading lookahead.

    >>> split_lookaheads("^(?!@@)[a-z]+$|x")
    [Branch(anchored=True, looks=(Lookahead(negative=True, body='@@'),), rest='[a-z]+$'), Branch(anchored=False, looks=(), rest='x')]
    >>> split_lookaheads("a(?=b)") is None
    True
    """
    scanned = _top_level(pattern)
    if scanned is None:
        return None
    bars, groups = scanned
    branches = []
    for start, end in zip([0, *(b + 1 for b in bars)], [*bars, len(pattern)]):
        anchored = pattern.startswith("^", start)
        at = start + anchored
        looks = []
        while at in groups and pattern.startswith(("(?=", "(?!"), at):
            looks.append(Lookahead(pattern[at + 2] == "!", pattern[at + 3 : groups[at]]))
            at = groups[at] + 1
        rest = pattern[at:end]
        if looks and rest[:1] in ("*", "+", "?", "{"):
            return None  # a quantified lookahead
        branches.append(Branch(anchored, tuple(looks), rest))
    return branches if any(b.looks for b in branches) else None


def lookahead_language(branches: list[Branch], searched: Callable[[str], Expr], anything: Expr,
                       limits: Limits = DEFAULT_LIMITS) -> Expr:
    """The texts in which the pattern of ``branches`` finds a match.

    ``searched(p)`` is the same for a pattern ``p`` without lookarounds (in whatever encoding
    the caller works: JSON string bodies for schemas); ``anything`` is any one character of
    that encoding. Raises :class:`~gramc.schemas.approx.NotExpressible` (``pattern``) when a
    product automaton passes ``limits``."""
    out = []
    for branch in branches:
        if not branch.looks:
            out.append(searched(("^" if branch.anchored else "") + branch.rest))
            continue
        lang = searched("^" + branch.rest)
        for look in branch.looks:
            tested = searched("^(?:" + look.body + ")")
            try:
                lang = difference(lang, tested, limits) if look.negative else intersection(lang, tested, limits)
            except LimitExceededError as err:
                raise NotExpressible("pattern", f"the lookahead needs too large an automaton ({err})") from None
        out.append(lang if branch.anchored else seq(repeat(anything, 0, None), lang))
    return alt(*out)


def _top_level(pattern: str) -> tuple[list[int], dict[int, int]] | None:
    """The positions of the top-level ``|`` and, per top-level group, its ``(`` and its
    ``)``; None when a group does not close."""
    bars: list[int] = []
    groups: dict[int, int] = {}
    opened: list[int] = []
    for i, c in group_marks(pattern):
        if c == "(":
            opened.append(i)
        elif c == ")":
            if not opened:
                return None
            start = opened.pop()
            if not opened:
                groups[start] = i
        elif not opened:
            bars.append(i)
    return None if opened else (bars, groups)
