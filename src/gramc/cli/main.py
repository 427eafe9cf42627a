"""The ``gramc`` command line: a thin click layer over library functions.

Data goes to stdout, diagnostics to stderr. Every gramc error becomes one line on stderr and
the exit status of its class (see :data:`gramc.errors.EXIT_CODES`); 2 is a usage error.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import click

from gramc.cli.stats import ByteSize
from gramc.errors import EXIT_CODES, GramcError, GramcWarning, LimitExceededError
from gramc.limits import DEFAULT_LIMITS, Limits

#: The ``gramc compile`` flag that raises each limit (the others: ``--limit NAME=VALUE``).
LIMIT_FLAGS = {"max_memory": "--max-memory SIZE", "max_compile_seconds": "--timeout SECONDS"}


class _GramcGroup(click.Group):
    """Turns GramcError (and OSError) into one line on stderr and a documented exit code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except GramcError as err:
            click.echo(f"gramc: error: {err}", err=True)
            if isinstance(err, LimitExceededError) and err.limit in Limits.__dataclass_fields__:
                flag = LIMIT_FLAGS.get(err.limit, f"--limit {err.limit}=N")
                click.echo(f"gramc: hint: gramc compile {flag} raises the limit", err=True)
            ctx.exit(next(code for cls, code in EXIT_CODES if isinstance(err, cls)))
        except BrokenPipeError:
            raise  # the reader stopped early (`| head`): click exits quietly
        except OSError as err:
            click.echo(f"gramc: error: {err.strerror or err}: {err.filename or ''}".rstrip(": "), err=True)
            ctx.exit(1)


@click.group(cls=_GramcGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gramc")
def main() -> None:
    """gramc: compile regexes and grammars into token masks for constrained decoding."""


def _progress(enabled: bool, also=None):
    """A stage reporter for long compiles: prints stage names when stderr is a terminal,
    and passes each to ``also`` (a :class:`~gramc.cli.stats.StageTimer`) when given."""
    start = time.perf_counter()

    def report(stage: str) -> None:
        if also is not None:
            also(stage)
        if enabled:
            click.echo(f"\r[{time.perf_counter() - start:6.2f}s] {stage}…\033[K", err=True, nl=False)

    return report


def _limits(max_memory: int | None, timeout: float | None, pairs: tuple[str, ...]) -> Limits:
    """The compile's Limits from ``--max-memory``, ``--timeout`` and ``--limit NAME=VALUE``."""
    fields = Limits.__dataclass_fields__
    values: dict = {}
    for pair in pairs:
        name, _, text = pair.partition("=")
        if name not in fields or not text:
            raise click.BadParameter(f"{pair!r}: expected NAME=VALUE with NAME one of {', '.join(fields)}",
                                     param_hint="--limit")
        try:
            value = ByteSize().convert(text, None, None) if name == "max_memory" else type(
                getattr(DEFAULT_LIMITS, name))(text)
        except (ValueError, click.BadParameter):
            raise click.BadParameter(f"{pair!r}: {text!r} is not a number", param_hint="--limit") from None
        if value <= 0:
            raise click.BadParameter(f"{pair!r}: must be positive", param_hint="--limit")
        values[name] = value
    if max_memory is not None:
        values["max_memory"] = max_memory
    if timeout is not None:
        values["max_compile_seconds"] = timeout
    return Limits(**values)


def _load_vocab(spec: str, eos: tuple[str, ...]):
    """The --vocab spec (None for 'none'), with --eos (ids or special texts) as its EOS tokens."""
    from gramc.vocab import load_vocab

    if spec.lower() == "none":
        if eos:
            raise click.UsageError("--eos needs a vocabulary (not --vocab none)")
        return None
    if not eos:
        return load_vocab(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GramcWarning)  # "no EOS": --eos names them
        vocab = load_vocab(spec)
    return vocab.with_eos([int(e) if e.isdigit() else e for e in eos])


@main.command("compile")
@click.argument("src", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--vocab", "vocab_spec", required=True,
              help="'gpt2' (bundled), a tokenizer.json / .tiktoken / .gguf file, or 'none' for an unbound artifact.")
@click.option("--eos", "eos", multiple=True, metavar="ID_OR_NAME",
              help="An end-of-sequence token (id or special-token text) instead of the vocabulary's own; "
                   "repeat for several.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Output .gmask (default: SRC with .gmask).")
@click.option("--format", "fmt", default="auto", show_default=True,
              help="Source format: auto (from the file extension), regex, gbnf, ebnf, lark, json_schema or structural_tag.")
@click.option("--regex-dialect", type=click.Choice(["unicode", "bytes"]), default="unicode", show_default=True,
              help="How regex classes and '.' match: code points (ECMA-262) or raw bytes.")
@click.option("--whitespace", type=click.Choice(["flexible", "compact"]), default="flexible", show_default=True,
              help="JSON Schema: any JSON whitespace between tokens, or none.")
@click.option("--max-whitespace", type=click.IntRange(min=0), default=None,
              help="JSON Schema: the longest whitespace run between two tokens (flexible mode).")
@click.option("--additional-properties-default", type=click.Choice(["true", "false"]), default="true",
              show_default=True, help="JSON Schema: what an absent additionalProperties means.")
@click.option("--strict", is_flag=True,
              help="JSON Schema: refuse keywords that cannot be enforced exactly instead of "
                   "over-approximating them with a warning.")
@click.option("--max-depth", type=click.IntRange(min=0), default=None,
              help="JSON Schema: the deepest nesting of arrays/objects (recursive schemas become regular).")
@click.option("--property-order", type=click.Choice(["schema", "any"]), default="schema", show_default=True,
              help="JSON Schema: object members in schema order, or in any order.")
@click.option("--any-order-max-properties", type=click.IntRange(min=0, max=20), default=8, show_default=True,
              help="JSON Schema, --property-order any: objects with more declared properties keep "
                   "schema order (with a warning).")
@click.option("--lazy", is_flag=True,
              help="Do not bind to the vocabulary now: write the automaton only (an unbound artifact, "
                   "special tokens resolved against --vocab); bind it at load time, state by state on "
                   "first use with gramc.load(path, vocab=..., lazy=True).")
@click.option("--stats", is_flag=True,
              help="Print the artifact's size, the compile's peak memory and the time of each stage.")
@click.option("--max-memory", type=ByteSize(), default=None,
              help=f"Refuse a compile whose large arrays would exceed SIZE bytes (512M, 4G; "
                   f"default {DEFAULT_LIMITS.max_memory >> 30}G).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help=f"Seconds one compile may take, binding included (default {DEFAULT_LIMITS.max_compile_seconds:g}).")
@click.option("--limit", "limit_pairs", multiple=True, metavar="NAME=VALUE",
              help="Set any compile limit of gramc.limits.Limits, e.g. --limit max_repeat=1000000 "
                   "(repeatable; see docs/api.md).")
def compile_cmd(src: str, vocab_spec: str, eos: tuple[str, ...], output: str | None, fmt: str, regex_dialect: str,
                whitespace: str, max_whitespace: int | None, additional_properties_default: str, strict: bool,
                max_depth: int | None, property_order: str, any_order_max_properties: int, lazy: bool,
                stats: bool, max_memory: int | None, timeout: float | None, limit_pairs: tuple[str, ...]) -> None:
    """Compile SRC (a regex, grammar, JSON Schema or structural tag file, or - for stdin) into a .gmask artifact."""
    from gramc.api import compile as compile_artifact
    from gramc.cli.sources import detect_format, read_pattern_file
    from gramc.cli.stats import StageTimer, format_stats, peak_rss_bytes
    from gramc.compiler.pipeline import CompileOptions

    limits = _limits(max_memory, timeout, limit_pairs)
    if lazy and vocab_spec.lower() == "none":
        raise click.UsageError("--lazy needs a vocabulary (--vocab none is unbound already)")
    out = Path(output) if output else (Path(src).with_suffix(".gmask") if src != "-" else Path("out.gmask"))
    if not out.parent.is_dir():  # before the compile, which may take minutes
        raise click.UsageError(f"cannot write {out}: no directory {out.parent}")
    fmt = detect_format(src, fmt)
    source = read_pattern_file(src, fmt)
    timer = StageTimer()
    report = _progress(sys.stderr.isatty(), timer)
    t0 = time.perf_counter()
    report("loading the vocabulary")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", GramcWarning)
        vocab = _load_vocab(vocab_spec, eos)
        artifact = compile_artifact(source, fmt, vocab, bind=not lazy, options=CompileOptions(
            regex_dialect=regex_dialect, json_whitespace=whitespace, json_max_whitespace=max_whitespace,
            json_additional_properties_default=additional_properties_default == "true", json_strict=strict,
            json_max_depth=max_depth, json_property_order=property_order,
            json_any_order_max_properties=any_order_max_properties), limits=limits,
                                    source_name="<stdin>" if src == "-" else src, progress=report)
    if sys.stderr.isatty():
        click.echo("\r\033[K", err=True, nl=False)
    for w in caught:
        click.echo(f"gramc: warning: {w.message}", err=True)
    timer("writing")
    artifact.save(out)
    durations = timer.durations()
    info = artifact.describe()
    vocab_text = f"{info['vocab']['name']} ({info['vocab']['size']} tokens)" if info["vocab"] else "unbound"
    if lazy:
        vocab_text += f", bind at load time to {vocab.name} ({vocab.size} tokens)"
    size = f"{info['states']} states" if info["kind"] in ("dfa", "counted") else f"{len(info['rules'])} rules, {info['nodes']} nodes"
    click.echo(
        f"wrote {out} ({out.stat().st_size:,} bytes): {info['kind']}, {size}, "
        f"vocab {vocab_text}, {time.perf_counter() - t0:.2f}s",
        err=True,
    )
    if stats:
        click.echo(format_stats(out.stat().st_size, durations, peak_rss_bytes()))


@main.command()
@click.argument("artifact_path", type=click.Path(exists=True, dir_okay=False))
@click.option("--ir", is_flag=True, help="Print the IR the artifact was compiled from.")
@click.option("--dfa", "show_dfa", is_flag=True, help="Print the automaton's transitions (DFA, or per-rule PDA).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
@click.option("--verify", is_flag=True,
              help="Bind the automaton to the vocabulary again and compare with the stored token tables "
                   "(catches an altered artifact whose hashes were recomputed).")
@click.option("--vocab", "vocab_spec", default=None,
              help="With --verify: the artifact's vocabulary (default: the one it names, if bundled).")
def inspect(artifact_path: str, ir: bool, show_dfa: bool, as_json: bool, verify: bool,
            vocab_spec: str | None) -> None:
    """Describe a .gmask artifact: kind, states, vocabulary, sizes, options."""
    from gramc.automata.text import format_automaton
    from gramc.cli.sampling import artifact_vocab
    from gramc.runtime import load

    artifact = load(artifact_path)
    if verify:
        load(artifact_path, artifact_vocab(artifact, vocab_spec, "--verify"), verify=True)
        click.echo("verified: the token tables equal a fresh binding to the vocabulary", err=True)
    info = artifact.describe()
    info["file_bytes"] = Path(artifact_path).stat().st_size
    if ir:
        click.echo(artifact.meta.get("ir", ""), nl=False)
    elif show_dfa:
        click.echo(format_automaton(artifact), nl=False)
    elif as_json:
        click.echo(json.dumps(info, indent=2, sort_keys=True))
    else:
        for key, value in info.items():
            click.echo(f"{key:24} {value if not isinstance(value, dict) else json.dumps(value)}")


@main.command()
@click.argument("artifact_path", type=click.Path(exists=True, dir_okay=False))
@click.option("-n", "count", default=5, show_default=True, help="How many samples.")
@click.option("--seed", default=0, show_default=True, help="Random seed.")
@click.option("--max-tokens", default=64, show_default=True, help="Stop a sample after this many tokens.")
@click.option("--vocab", "vocab_spec", default=None, help="The vocabulary (default: the one the artifact names).")
def sample(artifact_path: str, count: int, seed: int, max_tokens: int, vocab_spec: str | None) -> None:
    """Print random outputs drawn token by token through the masks (one JSON string per line)."""
    from gramc.cli.sampling import sample_texts
    from gramc.runtime import load

    artifact = load(artifact_path)
    for text, status in sample_texts(artifact, vocab_spec, count, seed, max_tokens):
        click.echo(json.dumps(text, ensure_ascii=False) + ("" if status == "complete" else f"  # {status}"))


@main.command()
@click.argument("artifact_path", type=click.Path(exists=True, dir_okay=False))
@click.argument("text_file", default="-", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--strip-newline/--no-strip-newline", default=None,
              help="Ignore one trailing newline of the input, or keep it. Default: the text as given "
                   "if it matches, else without its trailing newline (most files end with one).")
def check(artifact_path: str, text_file: str, strip_newline: bool | None) -> None:
    """Does the text in TEXT_FILE (or stdin) match? Exit 0 if it does, 1 if not."""
    from gramc.cli.sources import read_bytes
    from gramc.runtime import load
    from gramc.runtime.check import check_artifact

    data = read_bytes(text_file)
    artifact = load(artifact_path)
    ends_in_newline = data.endswith(b"\n")
    result = check_artifact(artifact, data[:-1] if strip_newline and ends_in_newline else data)
    message = result.message
    if strip_newline is None and ends_in_newline and not result.ok:
        stripped = check_artifact(artifact, data[:-1])
        if stripped.ok or stripped.offset > result.offset:
            result, message = stripped, f"{stripped.message} (the trailing newline is ignored)"
    click.echo(message)
    sys.exit(0 if result.ok else 1)


@main.group()
def golden() -> None:
    """Golden artifacts: rebuild and compare (check), or rewrite (update)."""


@golden.command("check")
@click.option("--dir", "root", default="golden", show_default=True, type=click.Path(file_okay=False))
def golden_check(root: str) -> None:
    """Rebuild every golden case and fail if any artifact's bytes differ."""
    from gramc.cli.golden import run_golden

    problems = run_golden(Path(root), update=False)
    for p in problems:
        click.echo(p, err=True)
    click.echo(f"{'FAILED' if problems else 'ok'}: golden cases in {root}", err=bool(problems))
    sys.exit(1 if problems else 0)


@golden.command("update")
@click.option("--dir", "root", default="golden", show_default=True, type=click.Path(file_okay=False))
def golden_update(root: str) -> None:
    """Rewrite every golden artifact from its source (review the diff before committing)."""
    from gramc.cli.golden import run_golden

    for line in run_golden(Path(root), update=True):
        click.echo(line)


from gramc.cli.demo import demo as _demo  # noqa: E402  (torch is imported only when it runs)

main.add_command(_demo)


if __name__ == "__main__":  # pragma: no cover
    main()
