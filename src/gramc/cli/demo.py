"""``gramc demo``: constrained generation end to end, offline, with a tiny random GPT-2.

The model is built from a config in code (2 layers, 64 wide, seeded), so nothing is
downloaded; its output ids are spelled with gramc's bundled GPT-2 vocabulary, so no tokenizer
is needed either. An untrained model writes noise: the point is to watch the grammar turn that
noise into valid output. Needs ``torch`` and ``transformers``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from gramc.errors import BackendUnavailableError

DEFAULT_REGEX = r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
DEFAULT_GBNF = """root   ::= "[" (item ("," item)*)? "]"
item   ::= number | root
number ::= "-"? [1-9] [0-9]{0,2}
"""
EOS = 50256
MODEL_WIDTH = 50304  # GPT-2 style: the output layer padded past the 50,257 tokens


def _require_torch():
    try:
        import torch
        import transformers
    except ImportError as err:
        raise BackendUnavailableError(
            f"gramc demo needs torch and transformers ({err.name} is missing): "
            "pip install 'gramc[transformers]' torch"
        ) from None
    return torch, transformers


def tiny_gpt2(seed: int = 0):
    """A randomly initialised 2-layer GPT-2 whose output layer is 50,304 wide."""
    torch, transformers = _require_torch()
    torch.manual_seed(seed)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=512,
                                     vocab_size=MODEL_WIDTH, bos_token_id=EOS, eos_token_id=EOS)
    return transformers.GPT2LMHeadModel(config).eval()


def _grammar_text(value: str) -> str:
    path = Path(value)
    return path.read_text(encoding="utf-8") if path.suffix and path.is_file() else value


def _decoding(sampler: str) -> dict[str, Any]:
    options: dict[str, dict[str, Any]] = {
        "greedy": dict(do_sample=False),
        "sample": dict(do_sample=True, temperature=1.0, top_k=0),
        "beam": dict(num_beams=4, do_sample=False),
    }
    return options[sampler]


@click.command("demo")
@click.option("--regex", "regex_src", default=None, help="A regex to constrain to (default: a date).")
@click.option("--gbnf", "gbnf_src", default=None,
              help="A GBNF grammar, as text or a .gbnf file (default: nested lists of numbers).")
@click.option("--sampler", type=click.Choice(["greedy", "sample", "beam"]), default="sample",
              show_default=True, help="How model.generate picks tokens.")
@click.option("-n", "count", default=3, show_default=True, help="Samples per grammar.")
@click.option("--max-tokens", default=40, show_default=True, help="max_new_tokens per sample.")
@click.option("--seed", default=0, show_default=True, help="Seeds the model weights and the sampler.")
@click.option("--show-allowed", is_flag=True,
              help="Also run gramc's own loop once per grammar, printing the allowed tokens at every step.")
@click.option("--tools", "tools_path", default=None, type=click.Path(dir_okay=False, exists=True),
              help="A JSON list of tools ({name, description, parameters}): generate free text and a "
                   "Hermes-style <tool_call> whose arguments match the tool's schema.")
def demo(regex_src, gbnf_src, sampler, count, max_tokens, seed, show_allowed, tools_path):
    """Generate with a tiny random GPT-2, without and with a grammar (no network)."""
    torch, _ = _require_torch()
    import gramc
    from gramc.integrations.transformers import GramcLogitsProcessor
    from gramc.runtime.check import check_artifact

    torch.set_num_threads(1)  # a model this small runs fastest on one thread
    vocab = gramc.load_vocab("gpt2")
    model = tiny_gpt2(seed)
    if tools_path is not None:
        if sampler == "beam":  # gramc.generate's beam search does not apply token budgets
            raise click.UsageError("--tools needs --sampler greedy or sample: the outputs must be complete "
                                   "within --max-tokens (budget masks), which beam search does not apply")
        _tools_demo(tools_path, model, vocab, count, max_tokens, seed, sampler)
        return
    grammars = []
    if regex_src is not None or gbnf_src is None:
        grammars.append(("regex", regex_src if regex_src is not None else DEFAULT_REGEX))
    if gbnf_src is not None or regex_src is None:
        grammars.append(("gbnf", _grammar_text(gbnf_src) if gbnf_src is not None else DEFAULT_GBNF))
    click.echo(f"A randomly initialised GPT-2 (2 layers, 64 wide, seed {seed}) with the GPT-2 "
               f"vocabulary; decoding: {sampler}.\n")
    prompt = torch.tensor([[EOS]])
    spell = lambda ids: b"".join(vocab.tokens[t] for t in ids if t != EOS)  # noqa: E731
    for fmt, source in grammars:
        t0 = time.perf_counter()
        artifact = gramc.compile(source, format=fmt, vocab=vocab, lazy=True)
        shown = source.strip() if fmt == "regex" else "\n    ".join(source.strip().splitlines())
        click.echo(f"{fmt}: {shown}")
        click.echo(f"  compiled to a {artifact.kind.upper()} in {time.perf_counter() - t0:.2f}s")
        torch.manual_seed(seed)
        free = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=12,
                              do_sample=True, top_k=0, pad_token_id=EOS)
        click.echo(f"  unconstrained: {_show(spell(free[0, 1:].tolist()))}")
        for i in range(count):
            torch.manual_seed(seed + i)
            processor = GramcLogitsProcessor(artifact)
            t1 = time.perf_counter()
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=max_tokens,
                                 logits_processor=[processor], pad_token_id=EOS, eos_token_id=EOS,
                                 **_decoding(sampler))
            seconds = time.perf_counter() - t1
            ids = out[0, 1:].tolist()
            ended = EOS in ids
            ids = ids[: ids.index(EOS)] if ended else ids
            data = spell(ids)
            verdict = ("matches" if check_artifact(artifact, data).ok else "does NOT match") if ended \
                else f"cut at {max_tokens} tokens"
            per_token = 1000 * seconds / max(1, processor.calls)
            masks = 1000 * processor.seconds / max(1, processor.calls)
            click.echo(f"  constrained:   {_show(data)}  [{verdict}; {len(ids)} tokens, "
                       f"{per_token:.1f} ms/step, masks {masks:.2f} ms/step]")
        if show_allowed:
            _trace(artifact, model, vocab, max_tokens, seed)
        click.echo("")


def _tools_demo(path: str, model, vocab, count: int, max_tokens: int, seed: int, sampler: str) -> None:
    """Free text and a tool call from the tools of ``path``, through ``model.generate`` and
    through gramc's reference loop; each call is parsed and its arguments validated."""
    import torch

    import gramc
    from gramc.cli.tool_calls import load_tools, tool_call_tag
    from gramc.generation import generate
    from gramc.integrations.transformers import GramcLogitsProcessor, logits_fn

    tools = load_tools(path)
    artifact = gramc.compile(json.dumps(tool_call_tag(tools)), format="structural_tag", vocab=vocab,
                             lazy=True)
    click.echo(f"A randomly initialised GPT-2 (2 layers, 64 wide, seed {seed}) with the GPT-2 vocabulary.")
    click.echo(f"Tools: {', '.join(t['name'] for t in tools)}. The structural tag (free text, then "
               "<tool_call>{\"name\": ..., \"arguments\": ...}</tool_call>) compiled to a "
               f"{artifact.kind.upper()}; every output must be complete within {max_tokens} tokens.\n")
    prompt = torch.tensor([[EOS]])
    spell = lambda ids: b"".join(vocab.tokens[t] for t in ids if t != EOS)  # noqa: E731
    for i in range(count):
        torch.manual_seed(seed + i)
        processor = GramcLogitsProcessor(artifact, max_new_tokens=max_tokens)
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=max_tokens,
                             logits_processor=[processor], pad_token_id=EOS, eos_token_id=EOS,
                             **_decoding(sampler))
        _report_call(f"transformers, seed {seed + i}", spell(out[0, 1:].tolist()), tools)
        result = generate(artifact, logits_fn(model), vocab=vocab, prompt=[EOS], max_tokens=max_tokens,
                          temperature=1.0 if sampler == "sample" else 0.0, seed=seed + i, finish=True)
        _report_call(f"gramc.generate, seed {seed + i}", result.data, tools)


def _report_call(label: str, data: bytes, tools) -> None:
    from gramc.cli.tool_calls import check_arguments, parse_tool_calls

    text = data.decode("utf-8", "replace")
    click.echo(f"{label}: {text!r}")
    calls = parse_tool_calls(text)
    if not calls:
        click.echo("  no tool call")
    for name, arguments in calls:
        problem = check_arguments(tools, name, arguments)
        verdict = "valid" if problem is None else f"INVALID: {problem}"
        click.echo(f"  call {name}({json.dumps(arguments)}): arguments {verdict} (jsonschema)")


def _show(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return repr(text if len(text) <= 70 else text[:67] + "...")


def _trace(artifact, model, vocab, max_tokens, seed) -> None:
    """gramc's reference loop on the same model, printing what the grammar allows each step."""
    from gramc.generation import format_allowed, generate
    from gramc.integrations.transformers import logits_fn

    click.echo("  gramc.generation.generate, step by step (allowed tokens before each choice):")
    matcher = artifact.matcher(max_rollback=0)
    lines = [f"    {format_allowed(matcher, vocab, limit=8)}"]

    def step(s):
        kind = "forced " if s.forced else "chose  "
        tok = "<eos>" if s.token in vocab.eos_ids else repr(vocab.tokens[s.token])[2:-1]
        lines.append(f"    {kind}{tok!r}")
        if not s.matcher.is_finished():
            lines.append(f"    {format_allowed(s.matcher, vocab, limit=8)}")

    result = generate(matcher, logits_fn(model), vocab=vocab, prompt=[EOS], max_tokens=max_tokens,
                      temperature=1.0, seed=seed, trace=step)
    for line in lines:
        click.echo(line)
    click.echo(f"    -> {_show(result.data)}: {result.stop_reason}; {len(result.tokens)} tokens, "
               f"{result.model_calls} model calls, {result.forced_tokens} forced (jump-forward)")


__all__ = ["demo", "tiny_gpt2", "DEFAULT_REGEX", "DEFAULT_GBNF"]
