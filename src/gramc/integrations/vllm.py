"""vLLM: a custom logits processor that masks each request with its own gramc grammar.

Register it when the engine starts, then name a grammar per request in ``extra_args``::

    from vllm import LLM, SamplingParams

    llm = LLM(model="Qwen/Qwen2.5-0.5B-Instruct",
              logits_processors=["gramc.integrations.vllm:GramcLogitsProcessor"])
    params = SamplingParams(max_tokens=32,
                            extra_args={"gramc": {"regex": r"[0-9]{4}-[0-9]{2}-[0-9]{2}"}})
    print(llm.generate(["Today's date: "], params)[0].outputs[0].text)

``extra_args["gramc"]`` (or, flat, as the OpenAI server's ``vllm_xargs`` need it,
``extra_args["gramc_<kind>"]``) is one of ``{"artifact": "/path/x.gmask"}`` (a bound artifact, read
once per worker and cached), or ``{"<format>": source}`` with format ``regex``, ``gbnf``,
``ebnf``, ``lark`` or ``json_schema`` (compiled once per worker against the model's tokenizer,
read with ``Vocab.from_hf``; set ``GRAMC_VLLM_VOCAB`` to a vocabulary spec such as a
``tokenizer.json`` path to use that instead). Requests without it are not touched. The worker
keeps the ``RuntimeLimits.compiled_grammars`` most recently used grammars (of
``GramcProcessorCore.runtime_limits``, which also bounds each artifact's caches); a request
for an evicted one compiles it again.

``"finish": true`` beside the grammar (flat: ``extra_args["gramc_finish"] = true``) cuts each
step's mask to the request's ``max_tokens`` minus the tokens generated
(``Matcher.mask(budget=)``; vLLM counts the EOS token in ``max_tokens``, as the budget does),
so the output is complete when the limit is reached; a request without ``max_tokens`` is
masked as without it, and so is a step where no completion fits.

One class serves both of vLLM's processor interfaces (checked against vLLM 0.33.0's source):

* Model Runner V2 (the default): ``__init__(vllm_config, req_states)``,
  ``add_request(req_idx, sampling_params) -> bool``, ``apply(logits, ctx)``. The processor
  reads each row's newest token from ``ctx.input_ids`` / ``ctx.pos`` (one small device-to-host
  copy per step) and, after a preemption, the request's earlier output from
  ``req_states.all_token_ids``.
* The V1 runner: ``__init__(vllm_config, device, is_pin_memory)``, ``update_state(batch_update)``
  (removed / added / moved, as ``process_dict_updates`` applies them), ``apply(logits)``; the
  output-token list vLLM hands over in ``added`` is read at every step.

Speculative decoding is not supported (vLLM itself refuses custom processors with it in V1).
Masks are built on the host with numpy and applied with one ``masked_fill`` per step.
This module imports vLLM only when ``GramcLogitsProcessor`` is first looked up.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import numpy as np

from gramc.limits import DEFAULT_RUNTIME_LIMITS, RuntimeLimits
from gramc.runtime.cache import LRUCache

__all__ = ["GramcLogitsProcessor", "GramcProcessorCore", "processor_class", "FORMATS"]  # noqa: F822 (made by __getattr__)

#: Keys accepted in ``extra_args["gramc"]`` besides ``"artifact"``.
FORMATS = ("regex", "gbnf", "ebnf", "lark", "json_schema")
EXTRA_ARGS_KEY = "gramc"
#: The option beside the grammar that cuts masks to the request's ``max_tokens``.
FINISH_KEY = "finish"


def grammar_spec(params: Any) -> tuple[str, str] | None:
    """``(kind, value)`` from a request's ``extra_args``, or None when it names no grammar.

    Either nested, ``extra_args["gramc"] = {kind: value}`` (the Python API), or flat,
    ``extra_args["gramc_<kind>"] = value`` (the OpenAI server's ``vllm_xargs`` takes only flat
    string/number values).

    Raises:
        ValueError: a malformed spec (vLLM turns it into an HTTP 400 at admission).
    """
    extra = getattr(params, "extra_args", None) or {}
    kinds = ("artifact",) + FORMATS
    flat = {k[len(EXTRA_ARGS_KEY) + 1:]: v for k, v in extra.items()
            if isinstance(k, str) and k.startswith(EXTRA_ARGS_KEY + "_")}
    flat.pop(FINISH_KEY, None)
    spec = extra.get(EXTRA_ARGS_KEY)
    if isinstance(spec, dict):
        spec = {k: v for k, v in spec.items() if k != FINISH_KEY}
    if spec is None and not flat:
        return None
    if spec is not None and flat:
        raise ValueError(f'give the grammar as extra_args["{EXTRA_ARGS_KEY}"] or as '
                         f'"{EXTRA_ARGS_KEY}_<kind>", not both')
    if spec is None:
        spec = flat
    if not isinstance(spec, dict) or len(spec) != 1:
        raise ValueError(f'extra_args["{EXTRA_ARGS_KEY}"] must be a dict with one key: '
                         f"'artifact' or one of {', '.join(FORMATS)}")
    (kind, value), = spec.items()
    if kind not in kinds:
        raise ValueError(f"gramc grammar: unknown kind {kind!r} "
                         f"(expected 'artifact' or one of {', '.join(FORMATS)})")
    if kind == "json_schema" and isinstance(value, (dict, bool)):
        value = json.dumps(value, sort_keys=True)
    if not isinstance(value, str):
        raise ValueError(f"gramc grammar: the {kind} must be a string")
    return kind, value


def finish_limit(params: Any) -> int | None:
    """The request's ``max_tokens`` where it asks for ``finish`` (module doc), else None."""
    extra = getattr(params, "extra_args", None) or {}
    spec = extra.get(EXTRA_ARGS_KEY)
    on = spec.get(FINISH_KEY) if isinstance(spec, dict) else extra.get(f"{EXTRA_ARGS_KEY}_{FINISH_KEY}")
    if on in (None, False, 0, "false", "False", "0"):
        return None
    limit = getattr(params, "max_tokens", None)
    return None if limit is None else int(limit)


class _Slot:
    """One request's matcher, how many of its output tokens it has seen, and its
    ``max_tokens`` when masks are cut to it (``finish``)."""

    __slots__ = ("matcher", "eos", "done", "dead", "output", "limit")

    def __init__(self, matcher: Any, eos: np.ndarray, output: list[int] | None = None,
                 limit: int | None = None):
        self.matcher, self.eos, self.output, self.limit = matcher, eos, output, limit
        self.done = 0
        self.dead = False

    def commit(self, tokens: list[int]) -> None:
        if tokens and not self.dead:
            self.dead = self.matcher.commit_tokens(tokens) < len(tokens)
        self.done += len(tokens)

    def mask(self, width: int) -> np.ndarray:
        if self.dead or self.matcher.is_finished():
            # nothing can follow: leave end-of-sequence, never a row of -inf
            out = np.zeros(width, dtype=bool)
            out[self.eos[self.eos < width]] = True
            return out
        if self.limit is not None:
            cut = self.matcher.logits_mask(width, budget=max(self.limit - self.done, 0))
            if cut.any():
                return cut
        return self.matcher.logits_mask(width)


class GramcProcessorCore:
    """The vLLM-independent part: grammar loading, per-request state, batched masking.

    ``GramcLogitsProcessor`` is this class mixed with vLLM's base classes; tests drive it
    directly with stand-ins for vLLM's objects.
    """

    #: Bounds of the grammars kept and of each one's caches (set before the engine starts).
    runtime_limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS
    _artifacts = LRUCache(DEFAULT_RUNTIME_LIMITS.compiled_grammars)  # by (kind, value), per worker
    _lock = threading.Lock()

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        grammar_spec(sampling_params)

    def __init__(self, vllm_config: Any, *args: Any, vocab: Any = None) -> None:
        self.vllm_config = vllm_config
        self._vocab = vocab
        self.slots: dict[int, _Slot] = {}
        if len(args) == 1:  # Model Runner V2: (vllm_config, req_states)
            self.interface, self.req_states = "v2", args[0]
        else:  # V1: (vllm_config, device, is_pin_memory)
            self.interface, self.req_states = "v1", None
        self.device = getattr(self.req_states, "device", args[0] if args else None)

    # ------------------------------------------------------------ grammars

    def vocab(self) -> Any:
        """The model's vocabulary (for grammars given as source), loaded on first use."""
        if self._vocab is None:
            from gramc.vocab import Vocab, load_vocab

            spec = os.environ.get("GRAMC_VLLM_VOCAB")
            if spec:
                self._vocab = load_vocab(spec)
            else:
                from transformers import AutoTokenizer

                mc = self.vllm_config.model_config
                tok = AutoTokenizer.from_pretrained(
                    mc.tokenizer, revision=getattr(mc, "tokenizer_revision", None),
                    trust_remote_code=getattr(mc, "trust_remote_code", False))
                self._vocab = Vocab.from_hf(tok)
        return self._vocab

    def artifact(self, kind: str, value: str) -> Any:
        key = (kind, value)
        with self._lock:
            hit = self._artifacts.get(key)
        if hit is not None and (kind == "artifact" or hit.vocab.fingerprint == self.vocab().fingerprint):
            return hit
        import gramc

        limits = self.runtime_limits
        if kind == "artifact":
            # bound here if unbound; a bound one must have the model's fingerprint
            art = gramc.load(value, vocab=self.vocab(), runtime_limits=limits)
        else:
            art = gramc.compile(value, format=kind, vocab=self.vocab(), runtime_limits=limits)
        with self._lock:
            self._artifacts.resize(limits.compiled_grammars)
            self._artifacts.put(key, art)
        return art

    def new_slot(self, params: Any, output: list[int] | None = None) -> _Slot | None:
        spec = grammar_spec(params)
        if spec is None:
            return None
        art = self.artifact(*spec)
        return _Slot(art.matcher(max_rollback=0), np.asarray(art.vocab.eos_ids, dtype=np.int64), output,
                     finish_limit(params))

    # ------------------------------------------------------------ V1 interface

    def is_argmax_invariant(self) -> bool:
        return False  # masking changes which token is the most likely

    def update_state(self, batch_update: Any) -> None:
        """Apply a V1 ``BatchUpdate``: added, then removed, then moved (as vLLM's own
        ``process_dict_updates`` does; vLLM never lists an index as both added and removed)."""
        if not batch_update:
            return
        for index, params, _prompt, output in batch_update.added:
            slot = self.new_slot(params, output)
            if slot is None:
                self.slots.pop(index, None)
            else:
                self.slots[index] = slot
        for index in batch_update.removed:
            self.slots.pop(index, None)
        for a, b, direction in batch_update.moved:
            sa, sb = self.slots.pop(a, None), self.slots.pop(b, None)
            if sa is not None:
                self.slots[b] = sa
            if sb is not None and getattr(direction, "name", str(direction)).endswith("SWAP"):
                self.slots[a] = sb

    def _sync_v1(self, rows: list[int]) -> None:
        for r in rows:
            slot = self.slots[r]
            out = slot.output
            assert out is not None  # a V1 slot holds vLLM's list of its output tokens
            n = len(out)
            while n > slot.done and out[n - 1] < 0:  # async-scheduling placeholders
                n -= 1
            if n > slot.done:
                slot.commit(list(out[slot.done:n]))

    # ------------------------------------------------------------ V2 interface

    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        slot = self.new_slot(sampling_params)
        if slot is None:
            self.slots.pop(req_idx, None)
            return False
        self.slots[req_idx] = slot
        return True

    def apply_staged_writes(self) -> None:
        """Nothing is staged: masks are built at ``apply`` time."""

    def _sync_v2(self, ctx: Any, rows: list[int], slot_ids: list[int]) -> None:
        import torch

        idx = torch.as_tensor(rows, dtype=torch.long, device=ctx.input_ids.device)
        fed = torch.stack((ctx.input_ids[idx].long(), ctx.pos[idx].long())).cpu().tolist()
        prompt_len = self.req_states.prompt_len.np
        for (token, pos), s in zip(zip(*fed), slot_ids):
            slot = self.slots[s]
            p = int(prompt_len[s])
            seen = max(0, pos - p + 1)  # output tokens up to and including the fed one
            if seen == slot.done + 1:
                slot.commit([token])  # the common case: the token sampled last step
            elif seen != slot.done:
                self._resync(s, slot, p, seen)

    def _resync(self, s: int, slot: _Slot, prompt_len: int, seen: int) -> None:
        """Catch up from the request's committed tokens (resumption after preemption)."""
        if seen < slot.done:  # went backwards: start over
            slot.matcher.reset()
            slot.done, slot.dead = 0, False
        row = self.req_states.all_token_ids.gpu[s, prompt_len + slot.done: prompt_len + seen]
        slot.commit(row.cpu().tolist())

    # ------------------------------------------------------------ both

    def apply(self, logits: Any, ctx: Any = None) -> Any:
        import torch

        if not self.slots:
            return logits
        if ctx is None:  # V1: row i is persistent batch index i
            rows = sorted(i for i in self.slots if i < logits.shape[0])
            self._sync_v1(rows)
            slot_ids = rows
        else:
            slots = np.asarray(ctx.idx_mapping_np)
            if logits.shape[0] != len(slots):
                raise NotImplementedError("gramc's vLLM processor does not support speculative decoding")
            rows = [r for r, s in enumerate(slots.tolist()) if s in self.slots]
            slot_ids = [int(slots[r]) for r in rows]
            if rows:
                self._sync_v2(ctx, rows, slot_ids)
        if not rows:
            return logits
        width = logits.shape[-1]
        refused = np.empty((len(rows), width), dtype=bool)
        for i, s in enumerate(slot_ids):
            np.logical_not(self.slots[s].mask(width), out=refused[i])
        idx = torch.as_tensor(rows, dtype=torch.long, device=logits.device)
        refused_t = torch.from_numpy(refused).to(logits.device, non_blocking=True)
        logits[idx] = logits[idx].masked_fill(refused_t, float("-inf"))
        return logits


def processor_class(*bases: type) -> type:
    """``GramcProcessorCore`` mixed with the given base classes (vLLM's, or test stand-ins)."""
    return type("GramcLogitsProcessor", (GramcProcessorCore, *bases), {"__module__": __name__})


_built: type | None = None


def _vllm_bases() -> tuple[type, ...]:
    bases = []
    try:
        from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as V2

        bases.append(V2)
    except ImportError:
        pass
    try:
        from vllm.v1.sample.logits_processor import LogitsProcessor as V1

        bases.append(V1)
    except ImportError:
        pass
    if not bases:
        raise ImportError("gramc.integrations.vllm needs vLLM (pip install vllm): "
                          "no vllm logits-processor interface could be imported")
    return tuple(bases)


def __getattr__(name: str) -> Any:
    global _built
    if name == "GramcLogitsProcessor":
        if _built is None:
            _built = processor_class(*_vllm_bases())
        return _built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
