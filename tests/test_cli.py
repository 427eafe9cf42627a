"""The gramc CLI end to end: compile, inspect, sample, check, errors and exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import gramc
from gramc.cli.main import main
from gramc.formats import container

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
IPV4 = re.compile(r"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)")


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture
def ipv4_gmask(runner, tmp_path):
    out = tmp_path / "ipv4.gmask"
    res = runner.invoke(main, ["compile", str(EXAMPLES / "ipv4.regex"), "--vocab", "gpt2", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "25 states" in res.stderr and out.exists()
    return out


def test_compile_writes_a_loadable_artifact(ipv4_gmask):
    art = gramc.load(ipv4_gmask, vocab="gpt2")
    assert art.dfa.fullmatch(b"10.0.0.255") and not art.dfa.fullmatch(b"10.0.0.256")


def test_compile_default_output_and_stdin(runner, tmp_path):
    src = tmp_path / "d.regex"
    src.write_text("[0-9]+\n")
    assert runner.invoke(main, ["compile", str(src), "--vocab", "gpt2"]).exit_code == 0
    assert (tmp_path / "d.gmask").exists()
    out = tmp_path / "s.gmask"
    res = runner.invoke(main, ["compile", "-", "--format", "regex", "--vocab", "none", "-o", str(out)], input="ab")
    assert res.exit_code == 0 and "unbound" in res.stderr


def test_compile_eos_names_the_end_tokens_of_a_tiktoken_file_without_them(runner, tmp_path):
    """A .tiktoken file that is no standard encoding has no EOS: compiling warns, and --eos
    (an id or a special text) names them; the artifact records them."""
    vocab = tmp_path / "few.tiktoken"
    vocab.write_text("YQ== 0\nYg== 1\nYWI= 2\nPC9zPg== 3\n")  # a, b, ab, </s>
    src = tmp_path / "ab.regex"
    src.write_text("(ab)+")
    out = tmp_path / "ab.gmask"
    res = runner.invoke(main, ["compile", str(src), "--vocab", str(vocab), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "few.tiktoken: no end-of-sequence token" in res.stderr
    assert gramc.load(out).describe()["vocab"]["eos_ids"] == []
    res = runner.invoke(main, ["compile", str(src), "--vocab", str(vocab), "--eos", "3", "-o", str(out)])
    assert res.exit_code == 0 and "warning" not in res.stderr, res.output
    m = gramc.load(out).matcher()
    assert m.commit_tokens([0, 1]) and m.mask()[3]  # "ab" complete: EOS allowed
    res = runner.invoke(main, ["compile", str(src), "--vocab", "gpt2", "--eos", "<|nope|>", "-o", str(out)])
    assert res.exit_code != 0 and "'<|nope|>' is not a special token" in res.stderr
    res = runner.invoke(main, ["compile", str(src), "--vocab", "none", "--eos", "3", "-o", str(out)])
    assert res.exit_code == 2 and "--eos needs a vocabulary" in res.output


def test_sample_outputs_match_the_regex(runner, ipv4_gmask):
    res = runner.invoke(main, ["sample", str(ipv4_gmask), "-n", "20", "--seed", "3"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert len(lines) == 20
    for line in lines:
        assert IPV4.fullmatch(json.loads(line)), line
    again = runner.invoke(main, ["sample", str(ipv4_gmask), "-n", "20", "--seed", "3"])
    assert again.stdout == res.stdout  # seeded


def test_sampling_binds_a_pda_artifact_to_the_vocabulary_it_names_by_fingerprint(tmp_path):
    """A PDA artifact binds its vocabulary by fingerprint (layout 5): loaded without it, as
    ``gramc sample`` loads, it awaits it; sampling with the vocabulary (``--vocab``) binds it
    and samples through the grammar, and without one says to pass ``--vocab``."""
    from gramc.cli.sampling import sample_texts

    vocab = gramc.Vocab.from_list([b"(", b")", b"()", b"x", b"</s>"], special_ids=[4], eos_ids=[4], name="parens")
    out = tmp_path / "p.gmask"
    gramc.compile('root ::= "x" | "(" root ")"', format="gbnf", vocab=vocab).save(out)
    assert gramc.load(out).awaits_vocab
    with pytest.raises(gramc.VocabularyError, match="--vocab"):
        list(sample_texts(gramc.load(out), None, 1, 0, 16))
    samples = list(sample_texts(gramc.load(out), vocab, 8, 0, 16))
    complete = [text for text, status in samples if status == "complete"]
    assert complete, samples
    for text in complete:
        k = len(text) - len(text.lstrip("("))
        assert text == "(" * k + "x" + ")" * k, text


def test_check_ok_and_failure_position(runner, ipv4_gmask):
    ok = runner.invoke(main, ["check", str(ipv4_gmask), "-"], input="192.168.0.1\n")
    assert ok.exit_code == 0 and ok.stdout.startswith("ok")
    bad = runner.invoke(main, ["check", str(ipv4_gmask), "-"], input="192.168.0.256")
    assert bad.exit_code == 1
    assert "byte 12" in bad.stdout and "expected [0-5]" in bad.stdout
    short = runner.invoke(main, ["check", str(ipv4_gmask), "-"], input="192.168")
    assert short.exit_code == 1 and "incomplete" in short.stdout and "'.'" in short.stdout


def test_check_keeps_a_final_newline_the_grammar_needs(runner, tmp_path, ipv4_gmask):
    src = tmp_path / "line.gbnf"
    src.write_text('root ::= [a-z]+ " = " [0-9]+ "\\n"\n')
    out = tmp_path / "line.gmask"
    assert runner.invoke(main, ["compile", str(src), "--vocab", "gpt2", "-o", str(out)]).exit_code == 0
    ok = runner.invoke(main, ["check", str(out), "-"], input="x = 1\n")
    assert ok.exit_code == 0 and "ignored" not in ok.stdout, ok.output
    assert runner.invoke(main, ["check", str(out), "--strip-newline", "-"], input="x = 1\n").exit_code == 1
    # a grammar without the newline: it is ignored, and the output says so
    ok = runner.invoke(main, ["check", str(ipv4_gmask), "-"], input="10.0.0.1\n")
    assert ok.exit_code == 0 and ok.stdout.startswith("ok") and "trailing newline is ignored" in ok.stdout
    kept = runner.invoke(main, ["check", str(ipv4_gmask), "--no-strip-newline", "-"], input="10.0.0.1\n")
    assert kept.exit_code == 1 and "byte 8" in kept.stdout
    bad = runner.invoke(main, ["check", str(ipv4_gmask), "-"], input="10.0.0.x\n")
    assert bad.exit_code == 1 and "byte 7" in bad.stdout


def test_inspect_variants(runner, ipv4_gmask):
    res = runner.invoke(main, ["inspect", "--json", str(ipv4_gmask)])
    info = json.loads(res.stdout)
    assert info["kind"] == "dfa" and info["states"] == 25 and info["vocab"]["name"] == "gpt2"
    assert info["options"] == {"regex_dialect": "unicode"}
    ir = runner.invoke(main, ["inspect", "--ir", str(ipv4_gmask)]).stdout
    assert ir.startswith("root ::= ")
    dfa = runner.invoke(main, ["inspect", "--dfa", str(ipv4_gmask)]).stdout
    assert dfa.startswith("start 1; 25 states")


@pytest.mark.parametrize(
    "args, stdin, code, message",
    [
        (["compile", "missing.regex", "--vocab", "gpt2"], None, 1, "No such file"),
        (["compile", "-", "--format", "regex", "--vocab", "gpt2"], "a(b", 3, "<stdin>:1:2"),
        (["compile", "-", "--format", "regex", "--vocab", "gpt2"], "a(?=b)", 3, "unsupported"),
        (["compile", "-", "--format", "nope", "--vocab", "gpt2"], "a", 1, "unknown format 'nope'"),
        (["compile", "-", "--format", "regex", "--vocab", "nosuch"], "a", 6, "nosuch"),
        (["compile", "x.txt", "--vocab", "gpt2"], None, 1, "cannot tell the format"),
    ],
)
def test_errors_are_one_line_with_exit_codes(runner, tmp_path, args, stdin, code, message):
    if args[1] == "x.txt":
        (tmp_path / "x.txt").write_text("a")
        args = [args[0], str(tmp_path / "x.txt"), *args[2:]]
    res = runner.invoke(main, args, input=stdin)
    assert res.exit_code == code, (res.output, res.exception)
    assert message in res.stderr
    assert "Traceback" not in res.output and len(res.stderr.strip().splitlines()) == 1


def test_inspect_verify_catches_altered_token_tables(runner, tmp_path, ipv4_gmask):
    ok = runner.invoke(main, ["inspect", "--verify", str(ipv4_gmask)])
    assert ok.exit_code == 0 and "verified" in ok.stderr, ok.output
    meta, arrays = gramc.load(ipv4_gmask).to_arrays()
    start, ind = meta["dfa"]["start"], arrays["tokens.indptr"]
    arrays = dict(arrays)  # one allowed token taken from the start row, the hashes made anew
    arrays["tokens.ids"] = np.delete(arrays["tokens.ids"], ind[start])
    arrays["tokens.next"] = np.delete(arrays["tokens.next"], ind[start])
    arrays["tokens.indptr"] = np.where(np.arange(len(ind)) > start, ind - 1, ind)
    arrays["tokens.forced"] = np.full_like(arrays["tokens.forced"], -1)
    altered = tmp_path / "altered.gmask"
    altered.write_bytes(container.pack(meta, arrays))
    assert runner.invoke(main, ["inspect", str(altered)]).exit_code == 0  # structurally sound
    res = runner.invoke(main, ["inspect", "--verify", "--vocab", "gpt2", str(altered)])
    assert res.exit_code == 5 and "does not match the vocabulary" in res.stderr, res.output
    unbound = tmp_path / "unbound.gmask"
    gramc.compile("ab", vocab=None).save(unbound)
    res = runner.invoke(main, ["inspect", "--verify", str(unbound)])
    assert res.exit_code != 0 and "unbound" in res.stderr


def test_a_reader_that_stops_early_is_not_an_error(ipv4_gmask):
    """`gramc inspect x | head -1`: the closed pipe ends the command quietly."""
    proc = subprocess.Popen([sys.executable, "-m", "gramc.cli.main", "inspect", str(ipv4_gmask)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the interpreter has started: every write finds the pipe closed
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "error" not in err and "Traceback" not in err, err


def test_corrupt_artifact_is_a_clean_error(runner, tmp_path, ipv4_gmask):
    bad = tmp_path / "bad.gmask"
    data = bytearray(ipv4_gmask.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    for cmd in (["inspect"], ["sample"], ["check"]):
        res = runner.invoke(main, [*cmd, str(bad)], input="1.2.3.4")
        assert res.exit_code == 5 and res.stderr.startswith("gramc: error:"), res.output


def test_golden_check_passes_on_the_repository(runner, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    res = runner.invoke(main, ["golden", "check"])
    assert res.exit_code == 0, res.output


# ---------------------------------------------------------------- --lazy, --stats, limits


def test_compile_lazy_writes_the_automaton_that_binds_to_the_same_masks(runner, tmp_path, ipv4_gmask):
    lazy_path = tmp_path / "ipv4-lazy.gmask"
    res = runner.invoke(main, ["compile", str(EXAMPLES / "ipv4.regex"), "--vocab", "gpt2", "--lazy",
                               "-o", str(lazy_path)])
    assert res.exit_code == 0, res.output
    assert "bind at load time to gpt2" in res.stderr
    assert lazy_path.stat().st_size < ipv4_gmask.stat().st_size
    assert gramc.load(lazy_path).vocab is None  # the file holds no token tables
    eager = gramc.load(ipv4_gmask)
    lazy = gramc.load(lazy_path, vocab="gpt2", lazy=True)
    assert lazy.is_lazy
    assert gramc.load(lazy_path, vocab="gpt2").to_bytes() == eager.to_bytes()  # bound at load: same file
    rng = np.random.default_rng(7)
    for _ in range(5):  # random walks through the eager masks; the lazy ones agree at every step
        a, b = eager.matcher(), lazy.matcher()
        for _ in range(12):
            assert np.array_equal(a.mask(), b.mask())
            allowed = a.allowed_tokens()
            if len(allowed) == 0:
                break
            token = int(rng.choice(allowed))
            assert a.commit_token(token) and b.commit_token(token)
            assert a.is_complete() == b.is_complete()


def test_compile_lazy_needs_a_vocabulary(runner, tmp_path):
    res = runner.invoke(main, ["compile", str(EXAMPLES / "ipv4.regex"), "--vocab", "none", "--lazy",
                               "-o", str(tmp_path / "x.gmask")])
    assert res.exit_code == 2 and "--lazy needs a vocabulary" in res.output


def test_compile_stats_reports_size_memory_and_stages(runner, tmp_path):
    out = tmp_path / "ipv4.gmask"
    res = runner.invoke(main, ["compile", str(EXAMPLES / "ipv4.regex"), "--vocab", "gpt2", "--stats",
                               "-o", str(out)])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == f"artifact size: {out.stat().st_size:,} bytes"
    peak = re.fullmatch(r"peak memory: ([0-9,.]+) MiB", lines[1])
    assert peak and float(peak.group(1).replace(",", "")) > 1
    total = float(re.fullmatch(r"total time: ([0-9.]+) s", lines[2]).group(1))
    stages = {m.group(1): float(m.group(2)) for m in (re.fullmatch(r"  (.+?)\s+([0-9.]+) s", ln) for ln in lines[3:])}
    assert list(stages) == ["loading the vocabulary", "parsing", "running the passes", "building the automaton",
                            "recording the IR", "binding the DFA to 50257 tokens", "writing"]
    assert abs(sum(stages.values()) - total) < 0.01


@pytest.mark.parametrize("flags, limit, hint", [
    (["--limit", "max_repeat=2"], "max_repeat", "--limit max_repeat=N"),
    (["--limit", "max_nesting=1"], "max_nesting", "--limit max_nesting=N"),
    (["--max-memory", "64K"], "max_memory", "--max-memory SIZE"),
    (["--limit", "max_memory=64K"], "max_memory", "--max-memory SIZE"),
])
def test_compile_limit_flags_reach_the_compile(runner, tmp_path, flags, limit, hint):
    res = runner.invoke(main, ["compile", str(EXAMPLES / "ipv4.regex"), "--vocab", "gpt2", *flags,
                               "-o", str(tmp_path / "x.gmask")])
    assert res.exit_code == 4, res.output
    first, second = res.stderr.strip().splitlines()
    assert first.startswith("gramc: error: ") and f"limit {limit} exceeded" in first
    assert second == f"gramc: hint: gramc compile {hint} raises the limit"
    assert not (tmp_path / "x.gmask").exists()


def test_compile_limit_flags_within_bounds_change_nothing(runner, tmp_path, ipv4_gmask):
    out = tmp_path / "x.gmask"
    res = runner.invoke(main, ["compile", str(EXAMPLES / "ipv4.regex"), "--vocab", "gpt2", "--max-memory", "1G",
                               "--timeout", "300", "--limit", "max_repeat=3", "--limit", "max_nesting=2",
                               "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes() == ipv4_gmask.read_bytes()


@pytest.mark.parametrize("flags", [["--limit", "nope=1"], ["--limit", "max_repeat"], ["--limit", "max_repeat=x"],
                                   ["--limit", "max_repeat=0"], ["--max-memory", "lots"], ["--timeout", "0"]])
def test_compile_bad_limit_flags_are_usage_errors(runner, tmp_path, flags):
    res = runner.invoke(main, ["compile", str(EXAMPLES / "ipv4.regex"), "--vocab", "gpt2", *flags,
                               "-o", str(tmp_path / "x.gmask")])
    assert res.exit_code == 2, res.output


def test_output_into_a_missing_folder_is_refused_before_compiling(runner, tmp_path):
    src = tmp_path / "d.regex"
    src.write_text("[0-9]+")
    res = runner.invoke(main, ["compile", str(src), "--vocab", "gpt2", "-o", str(tmp_path / "no" / "d.gmask")])
    assert res.exit_code == 2 and f"no directory {tmp_path / 'no'}" in res.output
    assert "loading the vocabulary" not in res.output and ".tmp" not in res.output
