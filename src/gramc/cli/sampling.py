"""Random outputs drawn token by token through an artifact's masks (``gramc sample``)."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from gramc.errors import VocabularyError
from gramc.runtime.artifact import Artifact, check_vocab
from gramc.vocab import Vocab, load_vocab

#: Chance of ending a sample whenever the output is complete, so samples stay short.
STOP_PROBABILITY = 0.3


def artifact_vocab(artifact: Artifact, spec: str | None, purpose: str) -> Vocab:
    """The vocabulary a bound artifact was bound to: ``spec``, else the one it names."""
    if artifact.vocab is None:
        raise VocabularyError(f"the artifact is unbound: pass --vocab to bind it for {purpose}")
    try:
        vocab = load_vocab(spec or artifact.vocab.name)
    except VocabularyError as err:
        raise VocabularyError(f"{err}; pass --vocab with the artifact's vocabulary") from None
    check_vocab(artifact.vocab, vocab)
    return vocab


def sample_texts(artifact: Artifact, vocab_spec: str | None, count: int, seed: int,
                 max_tokens: int) -> Iterator[tuple[str, str]]:
    """``count`` samples as (text, status); status is complete, max_tokens or failed."""
    if artifact.vocab is None and vocab_spec:
        artifact = artifact.bind(vocab_spec)
    vocab = artifact_vocab(artifact, vocab_spec, "sampling")
    artifact = artifact.bind(vocab)  # one loaded without the vocabulary it binds by fingerprint awaits it
    rng = np.random.default_rng(seed)
    eos = set(vocab.eos_ids)
    for _ in range(count):
        yield _one_sample(artifact.matcher(max_rollback=0), vocab, eos, rng, max_tokens)


def _one_sample(m, vocab: Vocab, eos: set[int], rng, max_tokens: int) -> tuple[str, str]:
    out = bytearray()
    for _ in range(max_tokens):
        if m.is_complete() and (not eos or rng.random() < STOP_PROBABILITY):
            return out.decode("utf-8", "replace"), "complete"
        allowed = [t for t in m.allowed_tokens().tolist() if t not in eos]
        if not allowed:
            break
        token = int(rng.choice(allowed))
        m.commit_token(token)
        out += vocab.tokens[token]
    status = "complete" if m.is_complete() else ("failed" if m.is_failed() else "max_tokens")
    return out.decode("utf-8", "replace"), status
