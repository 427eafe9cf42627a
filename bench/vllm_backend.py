"""gramc and XGrammar as vLLM structured-output backends, through vLLM's own manager.

Runs in the vLLM virtualenv (tools/vllm_env.sh makes it):

    GRAMC_VLLM_SKIP_INSTALL=1 ~/.cache/gramc-vllm-venv/bin/python bench/vllm_backend.py

For each request kind, one engine per backend (vLLM's ``StructuredOutputManager`` over a
local tiny-Llama directory with the Llama 3 tokenizer from ../shared and a 128,320-wide head)
admits a request, waits for its compile (vLLM's thread pool; gramc binds eagerly, its
default), then walks ``--steps`` tokens: each step is ``grammar_bitmask`` (one row filled)
and ``accept_tokens`` of a token drawn from that row (whitespace-only tokens avoided; the
same seed for both backends, so the walks agree while their rows do). Printed: compile seconds, and the p50 /
p99 microseconds of the bitmask step and of the accept step. The steps are the scheduler's
per-token cost; nothing here runs a model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shared_paths import SHARED  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HEAD = 128320
SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}}},
    "required": ["name", "age", "tags"], "additionalProperties": False}
TOOL = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"], "additionalProperties": False}
KINDS = {
    "json": {"json": SCHEMA},
    "regex": {"regex": r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,6}"},
    "grammar": {"grammar": 'root ::= "[" (item ("," item)*)? "]"\nitem ::= [0-9]{1,3} | root'},
    "structural_tag": {"structural_tag": json.dumps({
        "type": "structural_tag", "structures": [{"begin": "<tool_call>", "schema": TOOL, "end": "</tool_call>"}],
        "triggers": ["<tool_call>"]})},
}


def model_dir() -> str:
    d = Path(tempfile.mkdtemp(prefix="tiny-llama-"))
    (d / "tokenizer.json").write_bytes((SHARED / "vocabs" / "llama3-tokenizer.json").read_bytes())
    (d / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
        "eos_token": "<|end_of_text|>"}))
    (d / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
        "num_key_value_heads": 1, "vocab_size": HEAD, "max_position_embeddings": 256,
        "eos_token_id": [128001, 128009], "torch_dtype": "float32"}))
    return str(d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--kinds", default=",".join(KINDS))
    args = ap.parse_args()

    from vllm.config import DeviceConfig, ModelConfig, StructuredOutputsConfig, VllmConfig
    from vllm.plugins import load_general_plugins
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams
    from vllm.v1.request import Request
    from vllm.v1.structured_output import StructuredOutputManager

    load_general_plugins()
    path = model_dir()
    mc = ModelConfig(model=path, tokenizer=path, dtype="float32", max_model_len=256)
    managers = {}
    for backend in ("gramc", "xgrammar"):
        config = VllmConfig(model_config=mc, device_config=DeviceConfig(device="cpu"),
                            structured_outputs_config=StructuredOutputsConfig(backend=backend))
        managers[backend] = (config, StructuredOutputManager(config))
    tok = managers["gramc"][1].tokenizer
    vocab = [tok.convert_ids_to_tokens(i) or "" for i in range(len(tok))]
    blank = np.zeros(HEAD, dtype=bool)
    blank[:len(vocab)] = [not tok.convert_tokens_to_string([t]).strip() for t in vocab]

    print(f"{'kind':15} {'backend':9} {'compile s':>9} {'mask p50':>9} {'mask p99':>9} "
          f"{'accept p50':>10} {'accept p99':>10}  (µs)")
    for kind in args.kinds.split(","):
        for backend, (config, manager) in managers.items():
            sp = SamplingParams(max_tokens=args.steps, structured_outputs=StructuredOutputsParams(**KINDS[kind]))
            sp.update_from_generation_config({"eos_token_id": [128001, 128009]}, eos_token_id=128001)
            sp.verify(mc, None, config.structured_outputs_config, tok)
            rid = f"{kind}-{backend}"
            req = Request(rid, [128000, 9906], sp, None)
            t0 = time.perf_counter()
            manager.grammar_init(req)
            req.structured_output_request._grammar.result()
            compile_s = time.perf_counter() - t0
            if kind == "structural_tag":  # open the call: the walk then measures the arguments
                manager.accept_tokens(req, tok.encode("Sure.<tool_call>", add_special_tokens=False))
            rng = np.random.default_rng(0)
            masks, accepts = [], []
            for _ in range(args.steps):
                t0 = time.perf_counter()
                bitmask = manager.grammar_bitmask({rid: req}, [rid], {})
                t1 = time.perf_counter()
                allowed = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[:HEAD].astype(bool)
                pick = np.flatnonzero(allowed & ~blank)
                if pick.size == 0:
                    pick = np.flatnonzero(allowed)
                token = int(rng.choice(pick))
                t2 = time.perf_counter()
                ok = manager.accept_tokens(req, [token])
                t3 = time.perf_counter()
                masks.append(t1 - t0)
                accepts.append(t3 - t2)
                if not ok or req.structured_output_request.grammar.is_terminated():
                    break
            m, a = np.array(masks) * 1e6, np.array(accepts) * 1e6
            print(f"{kind:15} {backend:9} {compile_s:9.2f} {np.median(m):9.1f} {np.percentile(m, 99):9.1f} "
                  f"{np.median(a):10.1f} {np.percentile(a, 99):10.1f}  ({len(m)} steps)")


if __name__ == "__main__":
    main()
