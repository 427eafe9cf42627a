"""Model-library integrations, each imported only when its module is:

* :mod:`gramc.integrations.transformers`: ``GramcLogitsProcessor`` for ``model.generate``
  and ``logits_fn(model)`` for :func:`gramc.generation.generate` (needs torch, transformers);
* :mod:`gramc.integrations.llama_cpp`: ``GramcLlamaLogitsProcessor`` and
  ``vocab_from_llama_cpp(llm)`` (needs llama-cpp-python when called);
* :mod:`gramc.integrations.vllm`: ``GramcLogitsProcessor`` for vLLM's logits-processor
  interfaces (needs vLLM when the class is looked up);
* :mod:`gramc.integrations.vllm_backend`: ``GramcBackend``, vLLM's structured-output backend
  ``"gramc"``, and ``register``, the ``vllm.general_plugins`` entry point that enables it
  (needs vLLM when either is used);
* :mod:`gramc.integrations.sglang_backend`: ``GramcSGLangBackend``, SGLang's grammar backend
  ``"gramc"``, and ``register``, its ``sglang.srt.plugins`` entry point (needs SGLang when
  either is used);
* :mod:`gramc.integrations.engine_grammars`: what the two engine backends share (request
  kinds as gramc sources, one request's grammar state, the per-engine artifact cache).

``import gramc`` (and this package) imports none of torch, transformers, llama_cpp or vllm.
"""
