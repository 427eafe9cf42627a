"""Token vocabularies: what each token id of a tokenizer appends to the text, as bytes.

>>> from gramc.vocab import Vocab, load_vocab
>>> v = load_vocab("gpt2")
>>> v.size, v.tokens[31373], v.eos_ids
(50257, b'hello', (50256,))

Loaders (``Vocab.from_*``) live in one module per format; none of the third-party readers
(gguf, tokenizers, transformers, tiktoken) is imported until its loader is called. See
``docs/vocabularies.md``.
"""

from gramc.vocab.core import Vocab
from gramc.vocab.load import clear_cache, known_vocab, load_vocab

__all__ = ["Vocab", "clear_cache", "known_vocab", "load_vocab"]
