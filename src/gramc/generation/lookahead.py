"""Soft lookahead: reweight a step's top-K allowed tokens by what follows them, then sample.

Hard masking renormalises the model over the allowed tokens one step at a time; it cannot see
that a token leads into a continuation the model finds unlikely, or that cannot close before
``max_tokens``. Lookahead looks ``depth`` tokens ahead for each of the ``K`` most likely
allowed tokens and samples from the reweighted distribution (the bpdecode design this project
follows). Two weightings:

``"model"`` (the default): candidate ``c`` is scored by a constrained greedy rollout
``r_1 .. r_n`` (``n <= depth``; each ``r_i`` the argmax of the masked logits, one model call
each) as the model's joint log-probability of the path,

    score(c) = log p(c | x) + sum_i log p(r_i | x, c, r_<i)

with ``p`` the model's *unmasked* softmax at temperature 1 (so a path the grammar forces
against the model's will costs what the model thinks of it). A rollout stops early at an EOS
it chooses (a finished path); ``score(c) = -inf`` when the rollout reaches a dead end (no
allowed token, output incomplete) or ``max_tokens`` with the output incomplete (it would be
cut). An EOS candidate scores ``log p(EOS | x)``.

``"count"``: ``score(c) = log p(c | x) + log W_depth(x c)``, where ``W_n(s)`` counts the
ways to continue from matcher state ``s`` for ``n`` tokens: ``W_0 = 1``, ``W_n = 1`` once EOS
was committed, else ``W_n(s) = sum over allowed t of W_{n-1}(s t)`` (an EOS ends a path; a
dead end counts 0). No model calls; it favours tokens with many continuations, which is why
it over-extends (bpdecode's negative result, reproduced by bench/lookahead.py).

The next token is drawn from ``softmax(score)`` over the K candidates with the sampler
(temperature, then top-k / top-p, on the scores; greedy takes the best score). Where every
candidate scores ``-inf``, their plain log-probabilities are used. ``result.logprob`` still
sums the chosen tokens' masked log-probabilities, as without lookahead. Rows computed by
rollouts are kept while they extend the chosen prefix, so the chosen token's first rollout
row is the next step's row (no second call); ``model_calls`` counts every call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gramc.runtime.matcher import DFAMatcher
from gramc.generation.sampling import Sampler, as_row, candidates, log_softmax

#: The weightings :func:`gramc.generation.generate` accepts for ``lookahead_weighting``.
WEIGHTINGS = ("model", "count")

#: ``depth`` when lookahead is on and no depth is given.
DEFAULT_DEPTH = 4


def check_lookahead(lookahead: Any, depth: Any, weighting: Any, beam_size: int) -> None:
    """Raise ValueError for lookahead arguments :func:`lookahead_sample` cannot run with."""
    if lookahead is None:
        if depth is not None:
            raise ValueError("depth is the lookahead's depth: pass lookahead=K with it")
        return
    if isinstance(lookahead, bool) or not isinstance(lookahead, (int, np.integer)) or lookahead < 1:
        raise ValueError(f"lookahead must be an int >= 1 (the candidates per step), got {lookahead!r}")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, (int, np.integer))
                              or depth < 0):
        raise ValueError(f"depth must be an int >= 0, got {depth!r}")
    if weighting not in WEIGHTINGS:
        raise ValueError(f"lookahead_weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    if beam_size > 1:
        raise ValueError("lookahead samples one sequence: it does not combine with beam search")


class _Rows:
    """The model's rows by generated-token prefix, kept while they extend the chosen one."""

    def __init__(self, logits_fn: Any, prompt: list[int]):
        self.logits_fn, self.prompt = logits_fn, prompt
        self.memo: dict[tuple[int, ...], np.ndarray] = {}
        self.calls = 0

    def get(self, tokens: list[int]) -> np.ndarray:
        key = tuple(tokens)
        row = self.memo.get(key)
        if row is None:
            self.calls += 1
            row = self.memo[key] = as_row(self.logits_fn(self.prompt + tokens))
        return row

    def keep(self, tokens: list[int]) -> None:
        n, key = len(tokens), tuple(tokens)
        self.memo = {k: v for k, v in self.memo.items() if k[:n] == key}


def _full_log_softmax(row: np.ndarray) -> np.ndarray:
    """The model's unmasked log-probabilities (NaN and -inf entries: -inf)."""
    x = np.asarray(row, dtype=np.float64)
    ok = np.isfinite(x)
    out = np.full(x.shape, -np.inf)
    if ok.any():
        out[ok] = log_softmax(x[ok])
    return out


def lookahead_sample(run: Any, sampler: Sampler, rng: np.random.Generator, k: int,
                     depth: int, weighting: str) -> Any:
    """The sampling loop of :func:`gramc.generation.generate` with lookahead (module doc).

    ``run`` is the generate() run (``gramc.generation.loop._Run``): its masks (budget-cut
    with ``finish``), jump-forward, stop sequences, trace and result are reused unchanged.
    """
    from gramc.generation.loop import _Hyp

    rows = _Rows(run.logits_fn, run.prompt)
    counter = _Counter() if weighting == "count" else None
    h = _Hyp(run.m0)
    while run._ready(h):
        row = rows.get(h.tokens)
        ids, vals = candidates(row, run._mask(h, row.shape[0]))
        if not len(ids):
            h.reason = "no_valid_token"
            break
        lp = log_softmax(vals)
        top = np.argsort(-lp, kind="stable")[:k]  # ties: the lowest id first
        if depth == 0:
            score = lp[top]
        elif counter is not None:
            score = lp[top] + np.log([counter.ways(h.m, int(ids[i]), depth) for i in top])
        else:
            score = np.array([lp[i] + _rollout(run, rows, h, int(ids[i]), depth) for i in top])
        if not np.isfinite(score).any():
            score = lp[top]
        i = int(top[_choose_finite(sampler, ids[top], score, rng)])
        token = int(ids[i])
        h.logprob += float(lp[i])
        h.sampled += 1
        if run._take(h, token, len(ids)):
            break
        rows.keep(h.tokens)
    h.calls = rows.calls
    run.calls = rows.calls
    return run._result(h)


def _choose_finite(sampler: Sampler, ids: np.ndarray, score: np.ndarray,
                   rng: np.random.Generator) -> int:
    """Sampler choice among the candidates whose score is finite (index into ``ids``)."""
    ok = np.flatnonzero(np.isfinite(score))
    return int(ok[sampler.choose(ids[ok], score[ok], rng)])


def _rollout(run: Any, rows: _Rows, h: Any, token: int, depth: int) -> float:
    """The model-weighted score of ``token`` after ``h`` minus its own log-probability:
    the summed unmasked log-probabilities of a greedy constrained rollout (module doc)."""
    from gramc.generation.loop import _Hyp

    if token in run.eos:
        return 0.0
    r = _Hyp(h.m.fork(), h.tokens + [token])
    r.m.commit_token(token)
    total = 0.0
    for _ in range(depth):
        if len(r.tokens) >= run.max_tokens:
            break
        if r.m.is_finished():
            break
        row = rows.get(r.tokens)
        ids, vals = candidates(row, run._mask(r, row.shape[0]))
        if not len(ids):
            return -np.inf
        t = int(ids[int(np.argmax(vals))])
        total += float(_full_log_softmax(row)[t])
        if t in run.eos:
            return total
        r.m.commit_token(t)
        r.tokens.append(t)
    if not r.m.is_complete() and (r.m.is_finished() or len(r.tokens) >= run.max_tokens):
        return -np.inf  # a dead end, or cut at max_tokens
    return total


def count_continuations(matcher: Any, n: int) -> int:
    """``W_n`` of the module doc for ``matcher``'s state: the token paths of ``n`` tokens
    from here, a path ending early at EOS counted once, dead ends not at all."""
    return _Counter().count(matcher, n)


class _Counter:
    """``W_n`` of the module doc: token continuations within a horizon, memoised by DFA state.

    A DFA matcher's state is a number, so ``W_n`` is a dynamic programme over its token rows
    (the distinct targets of a row, each weighted by how many tokens reach it). Any other
    matcher (a PDA's Earley chart) is enumerated: one mask per allowed token per level below
    the last, so keep ``depth`` small there.
    """

    def __init__(self) -> None:
        self.memo: dict[tuple[int, int], int] = {}

    def ways(self, m: Any, token: int, n: int) -> int:
        c = m.fork()
        if not c.commit_token(token):
            return 0
        return self.count(c, n)

    def count(self, m: Any, n: int) -> int:
        if n == 0 or m._ended:
            return 1
        if isinstance(m, DFAMatcher) and not m._artifact.has_unique:  # (unique: the state is a pair)
            return self._dfa(m, int(m.state), n)
        allowed = m.allowed_tokens()
        if n == 1:
            return len(allowed)
        total = 0
        for t in allowed.tolist():
            total += self.ways(m, t, n - 1)
        return total

    def _dfa(self, m: Any, q: int, n: int) -> int:
        if n == 0:
            return 1
        key = (q, n)
        got = self.memo.get(key)
        if got is not None:
            return got
        table, artifact = m._table, m._artifact
        ids, nxt = table.row(q)
        eos = 1 if len(m._eos) and artifact.dfa.accept[q] else 0
        total = eos * len(m._eos)
        if n == 1:
            total += len(ids)
        else:
            targets, counts = np.unique(nxt, return_counts=True)
            total += sum(int(c) * self._dfa(m, int(s), n - 1) for s, c in zip(targets, counts))
        self.memo[key] = total
        return total
