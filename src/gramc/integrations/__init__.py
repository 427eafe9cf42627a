"""Model-library integrations, each imported only when its module is:

* :mod:`gramc.integrations.transformers`: ``GramcLogitsProcessor`` for ``model.generate``
  and ``logits_fn(model)`` for :func:`gramc.generation.generate` (needs torch, transformers);
* :mod:`gramc.integrations.llama_cpp`: ``GramcLlamaLogitsProcessor`` and
  ``vocab_from_llama_cpp(llm)`` (needs llama-cpp-python when called);
* :mod:`gramc.integrations.vllm`: ``GramcLogitsProcessor`` for vLLM's logits-processor
  interfaces (needs vLLM when the class is looked up).

``import gramc`` (and this package) imports none of torch, transformers, llama_cpp or vllm.
"""
