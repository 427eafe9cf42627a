"""Recursion without the Python stack, for walks whose depth the user controls.

A grammar of 10,000 chained rules, inlined, nests the IR 10,000 deep; a JSON Schema can nest
objects as deep as it likes. Python's stack holds about 1,000 frames, so every walk over such
structure runs on an explicit stack instead. The walks stay written as recursion: a
generator that yields a sub-call (another generator) receives that call's result back, and
:func:`run` drives them with a list as the stack. Calls happen in the same order as plain
recursion would make them, so results (and state numbering) are those of the recursive code.

>>> def depth(n):
...     return 0 if n == 0 else 1 + (yield depth(n - 1))
>>> run(depth(100_000))
100000
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")

Call = Generator[Any, Any, T]
"""A recursive step: yields sub-calls (each a :data:`Call`), gets their results, returns its own."""


def run(call: Call[T]) -> T:
    """The result of ``call``, running its sub-calls on a list instead of the Python stack."""
    stack: list[Call] = [call]
    value: Any = None
    while True:
        try:
            sub = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            if not stack:
                return done.value
            value = done.value
        else:
            stack.append(sub)
            value = None


#: How many levels of recursion :func:`on_fresh_stack` callers run on one thread's stack.
LEVELS_PER_STACK = 40


def on_fresh_stack(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, run on a new thread while the caller waits.

    For recursion too spread out to rewrite as :func:`run` calls (the JSON Schema walker
    recurses through a dozen methods per level of nesting): calling this every
    :data:`LEVELS_PER_STACK` levels gives each stretch a fresh stack and a fresh count against
    Python's recursion limit, which is never changed. Exceptions reach the caller unchanged.
    """
    outcome: list = []

    def target() -> None:
        try:
            outcome.append((True, fn(*args)))
        except BaseException as err:  # handed to the waiting caller below
            outcome.append((False, err))

    worker = threading.Thread(target=target, name="gramc-deep-walk")
    worker.start()
    worker.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
