"""transformers integration: GramcLogitsProcessor inside model.generate, with tiny random models.

Models are built from a config in the test (seeded, no network): a 2-layer GPT-2 with the
bundled GPT-2 vocabulary, and a 1-layer Llama with the real Llama 3 tokenizer from
../shared/vocabs (read with ``Vocab.from_hf``). Both have more output columns than tokens, so
every step exercises mask padding. Every generated sequence is validated independently:
``re`` for regexes, the Earley test oracle for GBNF, ``json.loads`` + ``jsonschema`` for
schemas; Llama outputs are decoded by the tokenizer itself, not by gramc's bytes.
"""

from __future__ import annotations

import json
import re

import jsonschema
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install 'gramc[transformers]')")

import gramc  # noqa: E402
from earley import EarleyOracle  # noqa: E402
from gramc.compiler.frontends.gbnf import parse_gbnf  # noqa: E402
from gramc.compiler.pipeline import CompileOptions  # noqa: E402
from gramc.generation import generate  # noqa: E402
from gramc.integrations.transformers import GramcLogitsProcessor, logits_fn  # noqa: E402
from paths import shared_path  # noqa: E402

WORDS = r"[a-z]{1,6}( [a-z]{1,6}){0,3}\."
RECORD = r'\{"id": [0-9]{1,4}, "ok": (true|false)\}'
NESTED = 'root ::= "[" ( item ( ", " item )* )? "]"\nitem ::= [0-9]{1,3} | root'
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": -999, "maximum": 999},
                                          "s": {"type": "string", "maxLength": 6}},
          "required": ["n", "s"], "additionalProperties": False}
GPT2_EOS = 50256

DECODING = {
    "greedy": dict(do_sample=False),
    "sample": dict(do_sample=True, temperature=1.3, top_k=0),
    "top_k_top_p": dict(do_sample=True, top_k=40, top_p=0.9),
    "beam": dict(num_beams=3, num_return_sequences=3, do_sample=False),
    "beam_sample": dict(num_beams=3, num_return_sequences=2, do_sample=True),
}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run fastest on one thread (no OpenMP hand-offs on a busy 2-core machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def gpt2_model():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=50304, n_positions=256,
                                  bos_token_id=GPT2_EOS, eos_token_id=GPT2_EOS)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():  # make the padding columns (ids 50257+) the model's favourites
        model.lm_head.weight[50257:] = model.lm_head.weight[:47].clone() * 20
    return model


@pytest.fixture(scope="module")
def gpt2():
    return gramc.load_vocab("gpt2")


@pytest.fixture(scope="module")
def compiled(gpt2):
    """Artifacts compiled once (on first use) for the module: source -> artifact."""
    cache = {}

    def get(source, fmt="regex", vocab=gpt2):
        key = (source, fmt, vocab.fingerprint)
        if key not in cache:
            cache[key] = gramc.compile(source, format=fmt, vocab=vocab, lazy=True)
        return cache[key]

    return get


@pytest.fixture(scope="module")
def llama():
    path = shared_path("vocabs", "llama3-tokenizer.json")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path))
    vocab = gramc.Vocab.from_hf(tok)
    torch.manual_seed(1)
    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=1, vocab_size=128320,
                                   max_position_embeddings=256, bos_token_id=128000, eos_token_id=128001)
    model = transformers.LlamaForCausalLM(cfg).eval()
    return tok, vocab, model


def _run(model, processor, prompt_rows, eos, **kw):
    ids = torch.tensor(prompt_rows)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), logits_processor=[processor],
                             max_new_tokens=kw.pop("max_new_tokens", 40), pad_token_id=eos[0],
                             eos_token_id=list(eos), **kw)
    rows = []
    for row in out[:, ids.shape[1]:].tolist():
        ended = next((i for i, t in enumerate(row) if t in eos), None)
        rows.append((row[:ended] if ended is not None else row, ended is not None))
    return rows


def _spell(vocab, tokens) -> bytes:
    return b"".join(vocab.tokens[t] for t in tokens)


@pytest.mark.parametrize("decoding", DECODING)
def test_gpt2_regex_every_sequence_matches(decoding, gpt2_model, gpt2, compiled):
    artifact = compiled(WORDS)
    torch.manual_seed(3)
    prompts = [[GPT2_EOS, 464], [GPT2_EOS, 3290]]
    rows = _run(gpt2_model, GramcLogitsProcessor(artifact), prompts, [GPT2_EOS], **DECODING[decoding])
    assert len(rows) == 2 * DECODING[decoding].get("num_return_sequences", 1)
    for tokens, ended in rows:
        assert all(t < 50257 for t in tokens)  # never the (favoured) padding columns
        assert ended and re.fullmatch(WORDS, _spell(gpt2, tokens).decode())


@pytest.mark.parametrize("decoding", DECODING)
def test_gpt2_recursive_grammar(decoding, gpt2_model, gpt2, compiled):
    artifact = compiled(NESTED, "gbnf")
    oracle = EarleyOracle(parse_gbnf(NESTED))
    torch.manual_seed(4)
    rows = _run(gpt2_model, GramcLogitsProcessor(artifact), [[GPT2_EOS, 58]], [GPT2_EOS],
                max_new_tokens=16, **DECODING[decoding])
    for tokens, ended in rows:
        data = _spell(gpt2, tokens)
        assert oracle.fullmatch(data) if ended else oracle.is_viable_prefix(data), data


@pytest.mark.parametrize("decoding", ["greedy", "sample", "beam"])
def test_llama3_tokenizer_regex_and_grammar(decoding, llama, compiled):
    tok, vocab, model = llama
    eos = list(vocab.eos_ids)
    prompt = [[128000] + tok.encode("Answer:", add_special_tokens=False)]
    torch.manual_seed(5)
    for source, fmt in ((RECORD, "regex"), (NESTED, "gbnf")):
        artifact = compiled(source, fmt, vocab)
        rows = _run(model, GramcLogitsProcessor(artifact), prompt, eos, max_new_tokens=24,
                    **DECODING[decoding])
        for tokens, ended in rows:
            assert all(t < vocab.size for t in tokens)
            text = tok.decode(tokens)  # the tokenizer's own decoding, not gramc's bytes
            assert text.encode() == _spell(vocab, tokens)
            if fmt == "regex":
                assert ended and re.fullmatch(RECORD, text), text
            else:
                oracle = EarleyOracle(parse_gbnf(NESTED))
                assert oracle.fullmatch(text.encode()) if ended else oracle.is_viable_prefix(text.encode())


def test_json_schema_with_model_generate(gpt2_model, gpt2):
    """Every row ends with EOS and is a valid instance. With compact whitespace and a bounded
    integer no instance is longer than 53 bytes (six ``\\uXXXX`` escapes in ``s``), and a
    complete one allows only EOS, so every row must end within 60 tokens (with flexible
    whitespace and any integer, this random model wrote newlines or digits until the budget
    ran out, leaving nothing to validate)."""
    artifact = gramc.compile(json.dumps(SCHEMA), format="json_schema", vocab=gpt2, lazy=True,
                             options=CompileOptions(json_whitespace="compact"))
    for decoding in ("greedy", "sample", "beam"):
        torch.manual_seed(6)
        rows = _run(gpt2_model, GramcLogitsProcessor(artifact), [[GPT2_EOS]], [GPT2_EOS],
                    max_new_tokens=60, **DECODING[decoding])
        assert rows
        for tokens, ended in rows:
            assert ended, (decoding, _spell(gpt2, tokens))
            jsonschema.validate(json.loads(_spell(gpt2, tokens)), SCHEMA)


def test_one_artifact_per_batch_element_and_padding_after_eos(gpt2_model, gpt2, compiled):
    # Row 0 follows a short grammar and is padded with EOS while row 1 goes on: the finished
    # row must keep a finite score somewhere (EOS), or sampling would see NaNs.
    short, long = compiled("(yes|no)"), compiled(WORDS)
    for decoding in ("sample", "beam_sample", "greedy"):
        torch.manual_seed(7)
        rows = _run(gpt2_model, GramcLogitsProcessor([short, long]), [[GPT2_EOS, 1], [GPT2_EOS, 2]],
                    [GPT2_EOS], **DECODING[decoding])
        n = len(rows) // 2
        assert all(re.fullmatch("yes|no", _spell(gpt2, t).decode()) and e for t, e in rows[:n])
        assert all(re.fullmatch(WORDS, _spell(gpt2, t).decode()) and e for t, e in rows[n:])


def test_processor_masks_pad_and_track_beams(gpt2):
    artifact = gramc.compile("ab(c|d)", vocab=gramc.Vocab.from_list(["a", "b", "c", "d", "<e>"], [4], [4]))
    p = GramcLogitsProcessor(artifact)
    assert isinstance(p, transformers.LogitsProcessor)
    prompt = [[7, 7], [7, 7]]
    scores = torch.zeros(2, 9)
    scores[:, 5:] = 1e4  # padding columns past the 5-token vocabulary
    out = p(torch.tensor(prompt), scores)
    assert torch.isinf(out[:, 5:]).all() and torch.isfinite(out[:, 0]).all()
    assert torch.isfinite(out).sum().item() == 2  # only "a" on each row
    # step 2: beams swap rows; step 3: one row is the other's history: each keyed by its tokens
    p(torch.tensor([[7, 7, 0], [7, 7, 0]]), torch.zeros(2, 9))
    m = p.masks(torch.tensor([[7, 7, 0, 1], [7, 7, 0, 1]]), 9)
    assert m[:, [2, 3]].all() and m.sum() == 4
    m = p.masks(torch.tensor([[7, 7, 0, 1, 3], [7, 7, 0, 1, 2]]), 9)
    assert m[:, 4].all() and m.sum() == 2  # complete: EOS only
    # a refused token (not in the grammar) leaves only EOS: a finite row for samplers
    m = p.masks(torch.tensor([[7, 7, 0, 1, 3, 4], [7, 7, 0, 1, 2, 0]]), 9)
    assert m.sum(axis=1).tolist() == [1, 1] and m[:, 4].all()
    # a new generate call (the prompt changed) starts over
    m = p.masks(torch.tensor([[8, 8], [8, 8]]), 9)
    assert m[:, 0].all() and m.sum() == 2
    with pytest.raises(ValueError):
        GramcLogitsProcessor(gramc.compile("a"))  # unbound


def test_processor_reused_across_generate_calls(gpt2_model, gpt2, compiled):
    p = GramcLogitsProcessor(compiled(WORDS))
    for seed in range(3):
        torch.manual_seed(seed)
        rows = _run(gpt2_model, p, [[GPT2_EOS, 464]], [GPT2_EOS], do_sample=True)
        assert re.fullmatch(WORDS, _spell(gpt2, rows[0][0]).decode())
    assert p.calls > 0 and p.seconds > 0


def test_logits_fn_with_the_reference_loop(gpt2_model, gpt2, compiled):
    artifact = compiled(RECORD)
    f = logits_fn(gpt2_model)
    with torch.no_grad():
        full = gpt2_model(torch.tensor([[GPT2_EOS, 90, 1]])).logits[0, -1].numpy()
    f([GPT2_EOS, 90])
    assert np.allclose(f([GPT2_EOS, 90, 1]), full, atol=1e-5)  # the cached path
    assert np.allclose(f([GPT2_EOS, 90, 1]), full, atol=1e-5)  # not an extension: recomputed
    for kw in (dict(), dict(temperature=1.0, seed=2, top_p=0.9), dict(beam_size=3)):
        r = generate(artifact, f, prompt=[GPT2_EOS], max_tokens=30, **kw)
        assert re.fullmatch(RECORD, r.text) and r.stop_reason == "eos"
        assert r.forced_tokens > 0 and r.model_calls < len(r.tokens) + 1 + 2 * kw.get("beam_size", 0) * 30
    with pytest.raises(ValueError):
        f([])


def test_logits_fn_branching_reuses_the_cache_and_matches_full_passes(gpt2_model, gpt2, compiled):
    """Lookahead rollouts branch off the generated sequence: the cache is cut back to the
    shared prefix, and every row equals a full forward pass over the same ids."""
    def full(ids):
        with torch.no_grad():
            return gpt2_model(torch.tensor([ids])).logits[0, -1].numpy()

    fed: list[int] = []
    f = logits_fn(gpt2_model)
    forward = gpt2_model.forward

    def counting_forward(*args, **kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        fed.append(ids.shape[-1])
        return forward(*args, **kwargs)

    for ids in ([GPT2_EOS, 90, 1, 2], [GPT2_EOS, 90, 7], [GPT2_EOS, 90, 7, 8], [GPT2_EOS, 90, 7]):
        assert np.allclose(f(ids), full(ids), atol=1e-4), ids
    gpt2_model.forward = counting_forward
    try:
        f([GPT2_EOS, 90, 7, 9])  # branches after 3 shared ids: one new id fed
        f([GPT2_EOS, 5])  # branches after the first id
        assert fed == [1, 1]
        artifact = compiled(RECORD)
        calls: list[list[int]] = []
        ref = generate(artifact, lambda ids: (calls.append(ids), full(ids))[1], prompt=[GPT2_EOS],
                       max_tokens=30, lookahead=4, depth=2)
        fed.clear()
        r = generate(artifact, f, prompt=[GPT2_EOS], max_tokens=30, lookahead=4, depth=2)
    finally:
        del gpt2_model.forward
    assert r.tokens == ref.tokens and r.model_calls == ref.model_calls == len(fed)
    assert re.fullmatch(RECORD, r.text) and r.stop_reason == "eos"
    assert sum(fed) < sum(len(c) for c in calls) / 4  # rollouts feed few ids, not whole sequences


def test_gramc_demo_command(tmp_path):
    from click.testing import CliRunner

    from gramc.cli.main import main

    grammar = tmp_path / "yn.gbnf"
    grammar.write_text('root ::= ("yes" | "no") ("," ("yes" | "no"))*\n')
    for args in (["-n", "1", "--max-tokens", "20"],
                 ["--regex", "(yes|no)", "--gbnf", str(grammar), "--sampler", "beam", "-n", "1",
                  "--max-tokens", "12", "--show-allowed"]):
        result = CliRunner().invoke(main, ["demo", *args])
        assert result.exit_code == 0, result.output
        lines = [line for line in result.output.splitlines() if "constrained:   " in line]
        assert lines and all("[matches;" in line or "cut at" in line for line in lines), result.output
        assert "unconstrained:" in result.output
    assert "allowed" in result.output and "model calls" in result.output


@pytest.mark.parametrize("decoding", ["sample", "beam"])
def test_max_new_tokens_makes_every_row_finish(decoding, gpt2_model, gpt2, compiled):
    """With the processor told ``max_new_tokens``, every row ends with EOS inside it and
    matches; without, the same sampled runs are cut (the model favours long words)."""
    oracle = EarleyOracle(parse_gbnf(NESTED))
    cut = 0
    for seed in range(4):
        for fmt, source, limit in (("regex", WORDS, 5), ("gbnf", NESTED, 6)):
            for finish in (True, False):
                torch.manual_seed(seed)
                p = GramcLogitsProcessor(compiled(source, fmt), max_new_tokens=limit if finish else None)
                rows = _run(gpt2_model, p, [[GPT2_EOS, 58]], [GPT2_EOS], max_new_tokens=limit, **DECODING[decoding])
                for tokens, ended in rows:
                    data = _spell(gpt2, tokens)
                    done = ended and (re.fullmatch(WORDS, data.decode()) if fmt == "regex" else oracle.fullmatch(data))
                    if finish:
                        assert done, (fmt, seed, data)
                    cut += not done
    assert cut > 0
    with pytest.raises(ValueError, match="max_new_tokens"):
        GramcLogitsProcessor(compiled(WORDS), max_new_tokens=-1)
