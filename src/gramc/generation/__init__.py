"""Constrained generation: a reference decoding loop over any ``logits_fn``.

>>> import gramc, numpy as np
>>> from gramc.generation import generate
>>> vocab = gramc.Vocab.from_list(["a", "b", "ab", "<eos>"], special_ids=[3], eos_ids=[3])
>>> artifact = gramc.compile("(ab)+", vocab=vocab)
>>> rng = np.random.default_rng(0)
>>> result = generate(artifact, lambda ids: rng.normal(size=4), vocab=vocab, max_tokens=6)
>>> result.stop_reason in ("eos", "max_tokens"), result.text.startswith("ab")
(True, True)

The model integrations (transformers, llama-cpp-python, vLLM) live in
:mod:`gramc.integrations`; this package needs nothing but numpy.
"""

from gramc.generation.debug import allowed_text, format_allowed
from gramc.generation.loop import STOP_REASONS, GenerationResult, Step, generate, resolve_token_bytes
from gramc.generation.sampling import Sampler

__all__ = [
    "generate", "GenerationResult", "Step", "STOP_REASONS", "Sampler",
    "allowed_text", "format_allowed", "resolve_token_bytes",
]
