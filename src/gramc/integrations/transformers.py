"""Hugging Face ``transformers``: a ``LogitsProcessor`` for ``model.generate``.

Usage::

    from transformers import AutoModelForCausalLM, AutoTokenizer
    import gramc
    from gramc.integrations.transformers import GramcLogitsProcessor

    tok = AutoTokenizer.from_pretrained("gpt2")
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    artifact = gramc.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", vocab=gramc.Vocab.from_hf(tok))
    ids = tok("Today's date:", return_tensors="pt").input_ids
    out = model.generate(ids, logits_processor=[GramcLogitsProcessor(artifact)],
                         max_new_tokens=12, num_beams=3)

Greedy search, sampling and beam search all work: each row of the batch gets the matcher of
*its own* generated tokens, keyed by the token history since the prompt (so beams that swap
rows, or share a prefix, keep the right state). Masks are padded to the width of the scores
(models often have more output columns than the tokenizer has tokens); ids past the
vocabulary are never allowed.

``import gramc`` imports neither torch nor transformers, and neither does importing this
module: ``GramcLogitsProcessor`` is built (as a subclass of ``transformers.LogitsProcessor``)
when it is first looked up, and ``logits_fn`` imports torch when called.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["GramcLogitsProcessor", "logits_fn"]  # noqa: F822 (GramcLogitsProcessor: made by __getattr__ on first use)

_HINT = "gramc.integrations.transformers needs torch and transformers: pip install 'gramc[transformers]' torch"


def _torch():
    try:
        import torch
    except ImportError as err:
        raise ImportError(_HINT) from err
    return torch


class _Dead:
    """A row whose tokens the grammar refused (e.g. padding after EOS)."""

    def __repr__(self) -> str:
        return "<dead row>"


_DEAD = _Dead()


class _GramcLogitsProcessor:
    """Mask ``model.generate``'s scores with a gramc artifact, row by row.

    Args:
        grammar: a bound artifact (every batch row follows it), or a sequence of artifacts,
            one per batch element (rows are split evenly among them, as ``generate`` lays out
            beams and ``num_return_sequences``).
        eos_fallback: a row that can no longer follow the grammar (it already emitted EOS and
            is being padded, or a token the grammar refuses was forced into it) is left only
            the end-of-sequence ids, so sampling never sees a row of all ``-inf``.
        max_new_tokens: the ``max_new_tokens`` given to ``generate`` (a logits processor is
            not told it): each step's mask is cut to the tokens left
            (``Matcher.mask(budget=)``, EOS counted as ``generate`` counts it), so the output
            is complete when the limit is reached. Where no completion fits, the step is
            masked as without it.

    The first call of a ``generate`` run fixes the prompt length; a call whose prompt part
    differs from the last run's (a new ``generate`` call) starts over, so one processor can be
    reused. States are kept for the latest step only.

    Attributes:
        calls: how many times the processor was called.
        seconds: total time spent inside it (mask building and applying), for profiling.
    """

    def __init__(self, grammar: Any | Sequence[Any], *, eos_fallback: bool = True,
                 max_new_tokens: int | None = None):
        self.artifacts: list[Any] = list(grammar) if isinstance(grammar, (list, tuple)) else [grammar]
        if not self.artifacts:
            raise ValueError("no artifact given")
        for a in self.artifacts:
            if getattr(a, "vocab", None) is None:
                raise ValueError("the artifact is not bound to a vocabulary (compile with vocab=)")
        self.eos_fallback = eos_fallback
        if max_new_tokens is not None and (isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int)
                                           or max_new_tokens < 0):
            raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
        self.max_new_tokens = max_new_tokens
        self._eos = [np.asarray(a.vocab.eos_ids, dtype=np.int64) for a in self.artifacts]
        self.calls = 0
        self.seconds = 0.0
        self.reset()

    def reset(self) -> None:
        """Forget the current generation (the next call starts a new one)."""
        self._prompt: Any = None  # the prompt block of the current generation (a torch tensor)
        self._states: dict[tuple, Any] = {}
        self._budget: int | None = None  # the tokens left at this step (with max_new_tokens)

    # ------------------------------------------------------------ the call

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        torch = _torch()
        t0 = time.perf_counter()
        rows, width = self._rows(input_ids), scores.shape[-1]
        allowed = [self._allowed(item, m, width) for item, m in rows]
        n_allowed = sum(np.count_nonzero(a) if a.dtype == bool else len(a) for a in allowed)
        if n_allowed * 8 < scores.numel():
            # Few allowed tokens (the usual case): start from -inf and copy the allowed scores.
            flat = np.concatenate([r * width + (np.flatnonzero(a) if a.dtype == bool else a)
                                   for r, a in enumerate(allowed)])
            index = torch.from_numpy(flat).to(scores.device, non_blocking=True)
            out = torch.full_like(scores, float("-inf"))
            out.view(-1)[index] = scores.reshape(-1)[index]
        else:
            refused = np.ones(scores.shape, dtype=bool)
            for r, a in enumerate(allowed):
                if a.dtype == bool:
                    np.logical_not(a, out=refused[r])
                else:
                    refused[r, a] = False
            out = scores.masked_fill(torch.from_numpy(refused).to(scores.device, non_blocking=True),
                                     float("-inf"))
        self.calls += 1
        self.seconds += time.perf_counter() - t0
        return out

    def masks(self, input_ids: Any, width: int) -> np.ndarray:
        """The bool masks ``[rows, width]`` for a batch of id rows (no torch needed)."""
        rows = self._rows(input_ids)
        out = np.zeros((len(rows), width), dtype=bool)
        for r, (item, m) in enumerate(rows):
            out[r, self._allowed(item, m, width)] = True
        return out

    def _allowed(self, item: int, m: Any, width: int) -> np.ndarray:
        """A row's allowed ids: a bool mask of ``width``, or an id array (the EOS fallback)."""
        if m is not _DEAD and not m.is_finished():
            if self._budget is not None:
                cut = m.logits_mask(width, budget=self._budget)
                if cut.any():
                    return cut
            return m.logits_mask(width)
        if not self.eos_fallback:
            return np.zeros(0, dtype=np.int64)
        eos = self._eos[item]
        return eos[eos < width] if len(eos) else np.arange(width)  # nothing to fall back to

    def _rows(self, input_ids: Any) -> list[tuple[int, Any]]:
        """Each row's (artifact index, matcher), advanced to the row's generated tokens."""
        torch = _torch()
        ids = input_ids.detach().cpu() if hasattr(input_ids, "detach") else torch.as_tensor(input_ids)
        n_rows, length = ids.shape
        if (self._prompt is None or self._prompt.shape[0] != n_rows
                or length <= self._prompt.shape[1]
                or not torch.equal(ids[:, : self._prompt.shape[1]], self._prompt)):
            self.reset()
            self._prompt = ids.clone()
        generated = ids[:, self._prompt.shape[1]:].tolist()
        if self.max_new_tokens is not None:
            self._budget = max(self.max_new_tokens - (length - self._prompt.shape[1]), 0)
        per_item = max(1, n_rows // len(self.artifacts))
        keys = [(min(r // per_item, len(self.artifacts) - 1), tuple(t)) for r, t in enumerate(generated)]
        # A parent state needed by one new key only is advanced in place instead of forked.
        children: dict[tuple, int] = {}
        for key in set(keys):
            if key[1]:
                parent = (key[0], key[1][:-1])
                children[parent] = children.get(parent, 0) + 1
        states: dict[tuple, Any] = {}
        out = []
        for key in keys:
            if key not in states:
                states[key] = self._state(key, children)
            out.append((key[0], states[key]))
        self._states = states
        return out

    def _state(self, key: tuple, children: dict[tuple, int]) -> Any:
        item, tokens = key
        parent_key = (item, tokens[:-1])
        parent = self._states.get(parent_key) if tokens else None
        if parent is _DEAD:
            return _DEAD
        if parent is not None:
            if children.get(parent_key, 0) > 1:
                children[parent_key] -= 1
                parent = parent.fork()
            return parent if parent.commit_token(tokens[-1]) else _DEAD
        m = self.artifacts[item].matcher(max_rollback=0)
        return m if m.commit_tokens(tokens) == len(tokens) else _DEAD


def logits_fn(model: Any, device: Any = None) -> Callable[[list[int]], np.ndarray]:
    """A ``logits_fn`` for :func:`gramc.generation.generate` from a causal LM.

    Keeps the key/value cache of the last sequence and feeds only the ids past the longest
    prefix it shares with this call's: the cache is cut back to that prefix (``crop``) when
    the call branches off, so lookahead rollouts (:mod:`gramc.generation.lookahead`: each
    candidate's rollout branches off the sequence generated so far) and beam search switching
    hypotheses cost one forward pass over the new ids only. A cache without ``crop`` (an
    older or custom cache class) runs the whole sequence again when a call branches off.
    """
    import inspect

    torch = _torch()
    device = device or next(model.parameters()).device
    state: dict[str, Any] = {"ids": [], "past": None}
    # transformers 5.x renamed past_key_values to cache (the old name still works, with a warning)
    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def call(ids: list[int]) -> np.ndarray:
        ids = list(ids)
        if not ids:
            raise ValueError("logits_fn needs at least one id (a prompt, e.g. the BOS token)")
        prev, past = state["ids"], state["past"]
        keep = _shared_prefix(prev, ids) if past is not None else 0
        keep = min(keep, len(ids) - 1)  # the last id is fed again for its logits
        if keep < len(prev) and not (keep > 0 and _crop(past, keep)):
            keep = 0
        new, past = ids[keep:], past if keep else None
        with torch.no_grad():
            out = model(torch.tensor([new], device=device), use_cache=True, **{cache_arg: past})
        state["ids"] = ids
        state["past"] = out.cache if cache_arg == "cache" else out.past_key_values
        return out.logits[0, -1].float().cpu().numpy()

    return call


def _shared_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _crop(past: Any, keep: int) -> bool:
    """Cut a key/value cache back to its first ``keep`` positions in place; False when the
    cache cannot be cut. A negative ``crop`` argument removes that many positions in both
    transformers 4.x and 5.x (their positive arguments differ)."""
    if not hasattr(past, "crop") or not hasattr(past, "get_seq_length"):
        return False
    have = int(past.get_seq_length())
    if keep < have:
        past.crop(keep - have)
    return True


@functools.cache
def _processor_class() -> type:
    _torch()
    try:
        from transformers import LogitsProcessor
    except ImportError:  # torch alone: still a plain callable processor
        return type("GramcLogitsProcessor", (_GramcLogitsProcessor,), {"__module__": __name__})
    return type("GramcLogitsProcessor", (_GramcLogitsProcessor, LogitsProcessor), {"__module__": __name__})


def __getattr__(name: str) -> Any:
    if name == "GramcLogitsProcessor":
        return _processor_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
