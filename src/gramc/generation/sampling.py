"""Choosing the next token from masked scores: greedy, temperature, top-k, top-p (numpy only).

Every function here works on the *candidates* of a step, the token ids the grammar allows,
so a step costs O(allowed tokens) after the mask, not O(vocabulary). Scores are logits (any
real numbers); ``-inf`` and NaN mean "impossible", as they do for a model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sampler:
    """How to pick a token from a step's allowed candidates.

    Attributes:
        temperature: 0 (the default) is greedy (argmax); otherwise logits are divided by it
            before sampling.
        top_k: keep only the ``top_k`` most likely allowed tokens (None or 0: all).
        top_p: keep the smallest set of most likely allowed tokens whose probability reaches
            ``top_p`` (None or 1.0: all). Applied after top-k, as transformers does.
    """

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self):
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k is not None and self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def choose(self, ids: np.ndarray, logits: np.ndarray, rng: np.random.Generator) -> int:
        """Index into ``ids`` of the chosen candidate (``logits``: finite, same length)."""
        if self.greedy:
            return int(np.argmax(logits))  # first of equal maxima: the lowest token id
        z = logits / self.temperature
        keep = np.arange(len(z))
        if self.top_k and self.top_k < len(z):
            keep = np.argpartition(-z, self.top_k - 1)[: self.top_k]
        lp = log_softmax(z[keep])
        if self.top_p is not None and self.top_p < 1:
            order = np.argsort(-lp, kind="stable")
            cum = np.cumsum(np.exp(lp[order]))
            n = int(np.searchsorted(cum, self.top_p * (1 - 1e-12))) + 1
            keep, lp = keep[order[:n]], log_softmax(lp[order[:n]])
        cum = np.cumsum(np.exp(lp))
        i = int(np.searchsorted(cum, rng.random() * cum[-1], side="right"))
        return int(keep[min(i, len(keep) - 1)])


def log_softmax(x: np.ndarray) -> np.ndarray:
    """Log-probabilities of finite logits ``x`` (float64)."""
    x = np.asarray(x, dtype=np.float64)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def as_row(scores, what: str = "logits_fn") -> np.ndarray:
    """One step's scores as a 1-d float array (a ``[1, V]`` batch is squeezed)."""
    if hasattr(scores, "detach"):  # a torch tensor, without importing torch
        scores = scores.detach().float().cpu().numpy()
    a = np.asarray(scores)
    if a.ndim == 2 and a.shape[0] == 1:
        a = a[0]
    if a.ndim != 1 or a.shape[0] == 0:
        raise ValueError(f"{what} must return one row of scores, got shape {a.shape}")
    if a.dtype.kind not in "fiu":
        raise ValueError(f"{what} must return numbers, got dtype {a.dtype}")
    return a


def candidates(scores: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The allowed token ids whose score is not ``-inf``/NaN, and their scores (float64).

    ``+inf`` scores win outright: the candidates are then the ``+inf`` tokens, scored 0.
    """
    ids = np.flatnonzero(mask)
    vals = scores[ids].astype(np.float64)
    pos_inf = vals == np.inf
    if pos_inf.any():
        ids = ids[pos_inf]
        return ids, np.zeros(len(ids))
    ok = np.isfinite(vals)
    if not ok.all():
        ids, vals = ids[ok], vals[ok]
    return ids, vals
