#!/usr/bin/env python
"""The GPU check: differential tests on the device, then per-step times against the CPU path.

On a machine with an NVIDIA GPU, PyCUDA and torch (xgrammar optional)::

    pip install -e '.[cuda,test]' torch xgrammar
    python bench/gpu_check.py                       # tests, then the table
    python bench/gpu_check.py --vocab ../shared/vocabs/llama3-tokenizer.json --out gpu.json

1. runs the GPU-marked tests (``pytest -m gpu tests/test_cuda_kernels.py tests/test_batch.py``):
   every kernel and the device path of BatchMatcher against the numpy references;
2. replays one recorded decoding trajectory (random allowed tokens, the same for every path)
   with the Llama 3 vocabulary, for batch sizes 1, 16, 128 and 1024, and measures per step:

   ============  ==============================================================================
   fill          BatchMatcher.fill_masks: the packed [B, W] masks (CPU: numpy; GPU: dfa_fill)
   apply         BatchMatcher.apply_masks: masks into float32 logits in place (GPU: dfa_apply)
   commit        BatchMatcher.commit: advance every state by its token (GPU: tokens already on
                 the device, flags left there)
   step          apply + commit, the per-step cost a server pays
   bitmask       kernel 1 alone: a given packed mask applied to float32 / bfloat16 logits
   xgr bitmask   xgrammar.apply_token_bitmask_inplace on the same tensors (CPU or CUDA)
   ============  ==============================================================================

   and checks, on the real vocabulary, that the GPU ends the replay in the same states and
   with the same masks as the CPU path.

``--cpu-only`` skips the device (tests and GPU columns) and measures the CPU path and
xgrammar's CPU kernel only: the mode used on machines without a GPU.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from shared_paths import REPO, SHARED  # noqa: E402  (bench/ is the script's folder)

VOCAB_CANDIDATES = (SHARED / "vocabs" / "llama3-tokenizer.json",)
#: A JSON-object regex: 46 DFA states over Llama 3, a realistic mix of narrow and wide masks.
PATTERN = r'\{"name": "[a-zA-Z ]{1,20}", "age": [0-9]{1,3}, "tags": \["[a-z]{1,8}"(, "[a-z]{1,8}"){0,3}\]\}'


# --------------------------------------------------------------------------- setup


def default_vocab() -> Path:
    env = os.environ.get("GRAMC_LLAMA3_VOCAB")
    for path in ([Path(env)] if env else []) + list(VOCAB_CANDIDATES):
        if path.exists():
            return path
    return VOCAB_CANDIDATES[0]


def versions() -> dict:
    out = {"python": platform.python_version(), "platform": platform.platform(),
           "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count()}
    for pkg in ("gramc", "numpy", "torch", "pycuda", "xgrammar"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def gpu_name(torch) -> str | None:
    if torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(0)


def run_gpu_tests() -> dict:
    """The GPU-marked tests, in a subprocess; their summary line and skip reasons."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-rs", "-p", "no:cacheprovider",
           "tests/test_cuda_kernels.py", "tests/test_batch.py"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    print("\n".join(lines[-15:]))
    return {"returncode": proc.returncode, "summary": lines[-1] if lines else proc.stderr[-500:]}


def trajectory(art, batch_size: int, steps: int, seed: int) -> np.ndarray:
    """tokens [steps, B]: random allowed, non-EOS tokens of B walks through the DFA (EOS only
    when nothing else is allowed), recorded once so every path replays the same states."""
    from gramc.runtime.batch import BatchMatcher

    rng = np.random.default_rng(seed)
    batch = BatchMatcher(art, batch_size)
    for r in range(batch_size):
        batch.add(r)
    arrays = batch._entries[0].arrays
    eos = set(arrays.eos.tolist())
    out = np.zeros((steps, batch_size), dtype=np.int64)
    for t in range(steps):
        for r in range(batch_size):
            s = batch.dfa_state(r)
            ids = arrays.ids[arrays.indptr[s]:arrays.indptr[s + 1]] if s >= 0 else np.zeros(0, np.int32)
            out[t, r] = int(rng.choice(ids)) if len(ids) else min(eos)
        batch.commit(out[t])
    return out


class HostTimer:
    """Per-call wall-clock times on the host."""

    def __init__(self):
        self.times: dict[str, list[float]] = {}

    def run(self, name: str, fn):
        t0 = time.perf_counter()
        fn()
        self.times.setdefault(name, []).append(time.perf_counter() - t0)

    def finish(self) -> dict[str, list[float]]:
        return self.times


class CudaTimer:
    """Per-call device times from CUDA events (no host synchronisation between calls)."""

    def __init__(self, torch):
        self.torch, self.events = torch, []

    def run(self, name: str, fn):
        start, end = (self.torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        fn()
        end.record()
        self.events.append((name, start, end))

    def finish(self) -> dict[str, list[float]]:
        self.torch.cuda.synchronize()
        times: dict[str, list[float]] = {}
        for name, start, end in self.events:
            times.setdefault(name, []).append(start.elapsed_time(end) / 1e3)
        return times


def best_mean(rounds: list[dict[str, list[float]]]) -> dict[str, float]:
    """Per name: the mean time per call of each round, the best round kept."""
    names = rounds[0].keys()
    return {k: min(float(np.mean(r[k])) for r in rounds) for k in names}


def replay(batch, tokens, logits, fill_out, commit, make_timer, reps: int, sync=lambda: None) -> dict:
    """Walk the trajectory, timing fill, apply and commit at every step (best round of
    ``reps``), then walk it again untimed per call for ``step_wall``: the wall clock per step
    of apply + commit, synchronised only at the end of the walk."""
    steps, B = tokens.shape

    def walk(calls):
        for r in range(B):
            batch.reset(r)
        sync()
        t0 = time.perf_counter()
        for t in range(steps):
            calls(t)
        sync()
        return (time.perf_counter() - t0) / steps

    rounds = []
    for _ in range(reps + 1):  # the first round warms up
        timer = make_timer()
        def timed(t, timer=timer):
            timer.run("fill", lambda: batch.fill_masks(fill_out))
            timer.run("apply", lambda: batch.apply_masks(logits))
            timer.run("commit", lambda: commit(t))

        walk(timed)
        rounds.append(timer.finish())
    out = best_mean(rounds[1:])
    out["step"] = out["apply"] + out["commit"]
    out["step_wall"] = min(walk(lambda t: (batch.apply_masks(logits), commit(t))) for _ in range(reps))
    return out


def trajectory_masks(art, tokens) -> list[np.ndarray]:
    """The packed masks [B, W] at every step of the trajectory (CPU path)."""
    from gramc.runtime.batch import BatchMatcher

    steps, B = tokens.shape
    batch = BatchMatcher(art, B)
    for r in range(B):
        batch.add(r)
    out = []
    for t in range(steps):
        out.append(batch.fill_masks())
        batch.commit(tokens[t])
    return out


def time_bitmask(apply, masks_list, make_timer, reps: int) -> float:
    """Mean time of ``apply(masks)`` over the trajectory's masks, best of ``reps`` rounds."""
    rounds = []
    for _ in range(reps + 1):
        timer = make_timer()
        for masks in masks_list:
            timer.run("x", lambda: apply(masks))  # noqa: B023 (called at once)
        rounds.append(timer.finish())
    return best_mean(rounds[1:])["x"]


# --------------------------------------------------------------------------- paths


def measure_cpu(art, tokens, masks_list, reps: int, xgr, torch) -> dict:
    from gramc.runtime.batch import BatchMatcher, apply_packed

    steps, B = tokens.shape
    batch = BatchMatcher(art, B)
    for r in range(B):
        batch.add(r)
    logits = np.random.default_rng(0).standard_normal((B, art.vocab.size)).astype(np.float32)
    fill_out = np.zeros((B, batch.n_words), dtype=np.uint32)
    out = replay(batch, tokens, logits, fill_out, lambda t: batch.commit(tokens[t]), HostTimer, reps)
    out["bitmask_f32"] = time_bitmask(lambda m: apply_packed(logits, m), masks_list, HostTimer, reps)
    if xgr is not None and torch is not None:
        tl = torch.from_numpy(logits.copy())
        tms = [torch.from_numpy(m.view(np.int32)) for m in masks_list]
        out["xgr_bitmask_f32"] = time_bitmask(lambda m: xgr.apply_token_bitmask_inplace(tl, m), tms,
                                              HostTimer, reps)
    return out


def measure_gpu(art, tokens, masks_list, reps: int, xgr, torch) -> dict:
    from gramc.runtime.batch import BatchMatcher

    steps, B = tokens.shape
    V = art.vocab.size
    batch = BatchMatcher(art, B, device="cuda")
    backend = batch._engine.backend
    for r in range(B):
        batch.add(r)
    logits = torch.randn(B, V, device="cuda", dtype=torch.float32)
    dev_tokens = torch.from_numpy(tokens).cuda()
    fill_out = torch.zeros(B, batch.n_words, dtype=torch.int32, device="cuda")
    out = replay(batch, tokens, logits, fill_out, lambda t: batch.commit(dev_tokens[t], wait=False),
                 lambda: CudaTimer(torch), reps, torch.cuda.synchronize)
    dev_masks = [torch.from_numpy(m.view(np.int32)).cuda() for m in masks_list]
    for dtype in ("float32", "bfloat16"):
        lg = torch.randn(B, V, device="cuda").to(getattr(torch, dtype))
        view = backend.view(lg).as_matrix("logits")
        suffix = "f32" if dtype == "float32" else "bf16"
        mask_views = [backend.view(m) for m in dev_masks]

        def ours(m, view=view):
            backend.apply_bitmask(view, B, m.ptr, m.row_stride, batch.n_words)

        out[f"bitmask_{suffix}"] = time_bitmask(ours, mask_views, lambda: CudaTimer(torch), reps)
        if xgr is not None:
            out[f"xgr_bitmask_{suffix}"] = time_bitmask(
                lambda m, lg=lg: xgr.apply_token_bitmask_inplace(lg, m), dev_masks,
                lambda: CudaTimer(torch), reps)
    out["check"] = differential_check(art, tokens, batch, torch)
    return out


def differential_check(art, tokens, gpu_batch, torch) -> str:
    """Replay the trajectory on CPU and GPU; masks, logits and states must agree every step."""
    from gramc.runtime.batch import BatchMatcher

    steps, B = tokens.shape
    cpu = BatchMatcher(art, B)
    for r in range(B):
        cpu.add(r)
        gpu_batch.reset(r)
    rng = np.random.default_rng(1)
    for t in range(steps):
        gpu_masks = gpu_batch.fill_masks(torch.zeros(B, gpu_batch.n_words, dtype=torch.int32, device="cuda"))
        if not np.array_equal(gpu_masks.cpu().numpy().view(np.uint32), cpu.fill_masks()):
            return f"MISMATCH: masks at step {t}"
        host = rng.standard_normal((B, art.vocab.size)).astype(np.float32)
        dev = torch.from_numpy(host).cuda()
        gpu_batch.apply_masks(dev)
        cpu.apply_masks(host)
        if not np.array_equal(dev.cpu().numpy(), host):
            return f"MISMATCH: logits at step {t}"
        if not np.array_equal(gpu_batch.commit(torch.from_numpy(tokens[t]).cuda()), cpu.commit(tokens[t])):
            return f"MISMATCH: accepted flags at step {t}"
    states_gpu = [gpu_batch.dfa_state(r) for r in range(B)]
    if states_gpu != [cpu.dfa_state(r) for r in range(B)]:
        return "MISMATCH: final states"
    return "ok"


# --------------------------------------------------------------------------- report


COLUMNS = ("fill", "apply", "commit", "step", "step_wall", "bitmask_f32", "xgr_bitmask_f32", "bitmask_bf16",
           "xgr_bitmask_bf16")


def fmt(seconds) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e3:.2f} ms"


def table(results: dict) -> str:
    lines = ["| batch | path | " + " | ".join(COLUMNS) + " | step speedup |",
             "|---|---|" + "---|" * (len(COLUMNS) + 1)]
    for B, paths in results.items():
        cpu_step = paths.get("cpu", {}).get("step")
        for path, row in paths.items():
            speed = "-"
            if path != "cpu" and cpu_step and row.get("step"):
                speed = f"{cpu_step / row['step']:.1f}x"
            lines.append(f"| {B} | {path} | " + " | ".join(fmt(row.get(c)) for c in COLUMNS) + f" | {speed} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu-only", action="store_true", help="measure the CPU path only (no device)")
    ap.add_argument("--vocab", type=Path, default=default_vocab(),
                    help="Llama 3 tokenizer.json (default: ../shared/vocabs beside the repo, "
                         "or $GRAMC_LLAMA3_VOCAB)")
    ap.add_argument("--batches", default="1,16,128,1024", help="batch sizes, comma-separated")
    ap.add_argument("--steps", type=int, default=8, help="steps per replayed trajectory")
    ap.add_argument("--reps", type=int, default=3, help="timing rounds (the best is kept)")
    ap.add_argument("--skip-tests", action="store_true", help="do not run the GPU-marked tests first")
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    args = ap.parse_args(argv)

    import gramc

    try:
        import torch
    except ImportError:
        torch = None
    try:
        import xgrammar as xgr
    except ImportError:
        xgr = None
    report = {"versions": versions(), "gpu": None if args.cpu_only else gpu_name(torch),
              "pattern": PATTERN, "vocab": str(args.vocab), "cpu_only": args.cpu_only}
    print(json.dumps(report, indent=1))
    if not args.cpu_only:
        if torch is None or not torch.cuda.is_available():
            print("no CUDA device visible to torch: run with --cpu-only", file=sys.stderr)
            return 2
        if not args.skip_tests:
            report["tests"] = run_gpu_tests()

    vocab = gramc.load_vocab(str(args.vocab))
    art = gramc.compile(PATTERN, vocab=vocab)
    print(f"vocab {vocab.name}: {vocab.size} tokens; {art.dfa.n_states} DFA states")
    results: dict = {}
    for B in (int(b) for b in args.batches.split(",")):
        tokens = trajectory(art, B, args.steps, seed=B)
        masks_list = trajectory_masks(art, tokens)
        results[B] = {"cpu": measure_cpu(art, tokens, masks_list, args.reps, xgr, torch)}
        if not args.cpu_only:
            results[B]["cuda"] = measure_gpu(art, tokens, masks_list, args.reps, xgr, torch)
        print(f"batch {B}: " + ", ".join(f"{p}.{k}={fmt(v) if isinstance(v, float) else v}"
                                         for p, row in results[B].items() for k, v in row.items()))
    report["results"] = results
    print()
    print(table(results))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1, default=str))
    failed = report.get("tests", {}).get("returncode", 0) not in (0, 5)  # 5: nothing collected
    mismatch = any(row.get("check", "ok") != "ok" for paths in results.values() for row in paths.values())
    return 1 if failed or mismatch else 0


if __name__ == "__main__":
    sys.exit(main())
