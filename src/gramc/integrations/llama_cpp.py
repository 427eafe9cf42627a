"""llama-cpp-python: a logits processor and the vocabulary of a loaded ``Llama``.

Usage::

    from llama_cpp import Llama, LogitsProcessorList
    import gramc
    from gramc.integrations.llama_cpp import GramcLlamaLogitsProcessor, vocab_from_llama_cpp

    llm = Llama(model_path="model.gguf")
    artifact = gramc.compile(r"(yes|no)", vocab=vocab_from_llama_cpp(llm))
    out = llm.create_completion("Is water wet? Answer:", max_tokens=8,
                                logits_processor=LogitsProcessorList([GramcLlamaLogitsProcessor(artifact)]))

``vocab_from_llama_cpp`` lives in :mod:`gramc.vocab.llama_cpp` (it reads the vocabulary
through llama.cpp itself) and is re-exported here. Nothing here imports ``llama_cpp``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from gramc.vocab.llama_cpp import vocab_from_llama_cpp

if TYPE_CHECKING:
    from gramc.runtime.matcher import Matcher

__all__ = ["GramcLlamaLogitsProcessor", "vocab_from_llama_cpp"]

class GramcLlamaLogitsProcessor:
    """A llama-cpp-python logits processor: ``processor(input_ids, scores) -> scores``.

    Pass it in a ``llama_cpp.LogitsProcessorList`` to ``create_completion``,
    ``create_chat_completion``, ``generate`` or ``__call__``. The first call of a generation
    fixes the prompt (every id seen then); later calls commit the new ids to the matcher.
    A call whose ids do not extend the prompt starts a new generation, so one processor can
    serve consecutive completions (not concurrent ones).

    Once the grammar is complete only its end-of-generation ids stay allowed, and llama.cpp
    stops there. A refused id (one the grammar does not allow, e.g. forced by the caller)
    leaves only end-of-generation ids allowed.

    Attributes:
        calls, seconds: how often the processor ran and the time it took (profiling).
    """

    def __init__(self, artifact: Any):
        if getattr(artifact, "vocab", None) is None:
            raise ValueError("the artifact is not bound to a vocabulary (compile with vocab=)")
        self.artifact = artifact
        self._eos = np.asarray(artifact.vocab.eos_ids, dtype=np.int64)
        self.calls = 0
        self.seconds = 0.0
        self.reset()

    def reset(self) -> None:
        """Forget the current generation."""
        self._prompt: np.ndarray | None = None
        self._matcher: Matcher | None = None
        self._done = 0
        self._dead = False

    @property
    def matcher(self) -> Matcher | None:
        """The matcher of the current generation (None before the first call)."""
        return self._matcher

    def __call__(self, input_ids: Any, scores: np.ndarray) -> np.ndarray:
        t0 = time.perf_counter()
        ids = np.asarray(input_ids)
        p = self._prompt
        if p is None or len(ids) < len(p) + self._done or not np.array_equal(ids[: len(p)], p):
            self.reset()
            self._prompt = p = ids.copy()
            self._matcher = self.artifact.matcher(max_rollback=0)
        matcher = self._matcher
        assert matcher is not None  # made with the prompt
        new = ids[len(p) + self._done:]
        if len(new) and not self._dead:
            took = matcher.commit_tokens(new.tolist())
            self._dead = took < len(new)
        self._done += len(new)
        width = scores.shape[-1]
        if self._dead or matcher.is_finished():
            allowed = np.zeros(width, dtype=bool)
            allowed[self._eos[self._eos < width]] = True
        else:
            allowed = matcher.logits_mask(width)
        out = np.where(allowed, scores, np.float32(-np.inf)).astype(scores.dtype, copy=False)
        self.calls += 1
        self.seconds += time.perf_counter() - t0
        return out
