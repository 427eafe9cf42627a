"""gramc as vLLM's structured-output backend, driven through vLLM's own classes.

Needs vLLM (skipped without it; ``tools/vllm_env.sh`` makes a virtualenv with vLLM 0.33.0
and runs this file). No GPU and no model weights: a local model directory holds a tiny Llama
``config.json`` (a 128,320-wide head) and the real Llama 3 tokenizer from ../shared, which is
all vLLM's ``ModelConfig`` and tokenizer loader read. What runs is vLLM's code:

* its plugin loader (``load_general_plugins``) finds gramc's ``vllm.general_plugins`` entry
  point, and its CLI parser and pydantic config then accept ``backend="gramc"``;
* ``SamplingParams.verify`` admits requests of every kind (json, json_object, regex,
  grammar as EBNF and as Lark, choice, structural_tag) and rejects malformed ones;
* ``StructuredOutputManager`` builds the backend (``grammar_init``), compiles each request in
  its thread pool, fills its bitmask (``grammar_bitmask``, with and without speculative
  tokens), checks drafts (``validate_tokens``) and accepts tokens (``accept_tokens``);
* the worker-side ``apply_grammar_bitmask`` masks CPU logits with those rows.

At every step of random token walks each bitmask row is compared with the mask of a gramc
``Matcher`` of the same source, bound to a vocabulary whose EOS ids are the request's stop
tokens (the backend binds without EOS and adds stop tokens itself, so the two paths differ);
the generated text is then checked against the constraint with ``re``, ``json`` /
``jsonschema`` or an Earley recogniser. Not exercised: the engine loop, the model runner and
GPU kernels (the bitmask is applied with vLLM's CPU path).
"""

from __future__ import annotations

import json
import re
from importlib.metadata import entry_points
from types import SimpleNamespace
from typing import get_args

import numpy as np
import pytest

from paths import shared_path

vllm = pytest.importorskip("vllm", reason="vLLM is not installed (tools/vllm_env.sh sets it up)")
torch = pytest.importorskip("torch")

import gramc  # noqa: E402
from earley import EarleyOracle  # noqa: E402
from gramc.compiler.pipeline import lower  # noqa: E402
from gramc.integrations import vllm_backend as vb  # noqa: E402
from gramc.integrations.engine_grammars import JSON_OBJECT_SCHEMA, request_source  # noqa: E402
from vllm.config import (  # noqa: E402
    DeviceConfig,
    ModelConfig,
    ParallelConfig,
    SpeculativeConfig,
    StructuredOutputsConfig,
    VllmConfig,
)
from vllm.exceptions import VLLMValidationError  # noqa: E402
from vllm.sampling_params import SamplingParams, StructuredOutputsParams  # noqa: E402
from vllm.v1.core.sched.output import GrammarOutput  # noqa: E402
from vllm.v1.request import Request  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402
from vllm.v1.structured_output.utils import apply_grammar_bitmask  # noqa: E402

HEAD = 128320  # the model's vocab_size: wider than the tokenizer's 128,257 ids
EOS, EOT = 128001, 128009  # <|end_of_text|>, <|eot_id|>: Llama 3's generation-config EOS ids
DATE = r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "age": {"type": "integer", "minimum": 0}},
          "required": ["name", "age"], "additionalProperties": False}
EBNF = 'root ::= "[" (item ("," item)*)? "]"\nitem ::= [0-9]{1,3} | root'
LARK = 'start: "(" expr ")"\nexpr: NUMBER | expr "+" expr | start\nNUMBER: /[0-9]{1,2}/'
CHOICES = ["yes", "no", 'say "hi"\n', "émoji 🙂"]
TOOL = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]}},
        "required": ["city"], "additionalProperties": False}
STAG = {"type": "structural_tag",
        "structures": [{"begin": "<function=get_weather>", "schema": TOOL, "end": "</function>"}],
        "triggers": ["<function="]}

# name -> (StructuredOutputsParams kwargs, gramc format of the same constraint, its source)
KINDS = {
    "json": ({"json": SCHEMA}, "json_schema", json.dumps(SCHEMA)),
    "json_object": ({"json_object": True}, "json_schema", JSON_OBJECT_SCHEMA),
    "regex": ({"regex": DATE}, "regex", DATE),
    "grammar_ebnf": ({"grammar": EBNF}, "ebnf", EBNF),
    "grammar_lark": ({"grammar": LARK}, "lark", LARK),
    "choice": ({"choice": CHOICES}, *request_source("CHOICE", json.dumps(CHOICES))),
    "structural_tag": ({"structural_tag": json.dumps(STAG)}, "structural_tag", json.dumps(STAG)),
}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Small tensors: one thread avoids OpenMP hand-offs on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """What vLLM reads of a model before loading weights: config.json and the tokenizer."""
    d = tmp_path_factory.mktemp("tiny-llama")
    (d / "tokenizer.json").write_bytes(shared_path("vocabs", "llama3-tokenizer.json").read_bytes())
    (d / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
        "eos_token": "<|end_of_text|>"}))
    (d / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
        "num_key_value_heads": 1, "vocab_size": HEAD, "max_position_embeddings": 256,
        "bos_token_id": 128000, "eos_token_id": [EOS, EOT], "torch_dtype": "float32"}))
    return str(d)


@pytest.fixture(scope="module")
def plugin():
    """vLLM's own plugin loader runs gramc's entry point."""
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    return StructuredOutputsConfig


@pytest.fixture(scope="module", autouse=True)
def lazy_binding():
    """Bind each automaton state on first use (identical masks; eager binding of every
    test grammar to 128k tokens would take minutes on this machine)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("GRAMC_VLLM_LAZY", "1")
    yield
    mp.undo()


def _engine(model_dir, num_spec):
    mc = ModelConfig(model=model_dir, tokenizer=model_dir, dtype="float32", max_model_len=256)
    spec = None if not num_spec else SpeculativeConfig(
        method="ngram", num_speculative_tokens=num_spec, prompt_lookup_max=3, prompt_lookup_min=1,
        target_model_config=mc, target_parallel_config=ParallelConfig())
    config = VllmConfig(model_config=mc, device_config=DeviceConfig(device="cpu"), speculative_config=spec,
                        structured_outputs_config=StructuredOutputsConfig(backend="gramc"))
    return SimpleNamespace(config=config, manager=StructuredOutputManager(config), spec=spec, refs={})


@pytest.fixture(scope="module")
def engine(plugin, model_dir):
    return _engine(model_dir, 0)


@pytest.fixture(scope="module")
def spec_engine(plugin, model_dir):
    return _engine(model_dir, 3)


def _ref_vocab(engine):
    """The tokenizer's vocabulary with the requests' stop tokens as gramc's EOS ids."""
    if "vocab" not in engine.refs:
        engine.refs["vocab"] = gramc.Vocab.from_hf(engine.manager.tokenizer, eos_ids=(EOS, EOT))
    return engine.refs["vocab"]


def _reference(engine, name):
    """A gramc Matcher of the request's constraint, compiled apart from the backend."""
    _params, fmt, source = KINDS[name]
    key = (fmt, source)
    if key not in engine.refs:
        engine.refs[key] = gramc.compile(source, format=fmt, vocab=_ref_vocab(engine), lazy=True)
    return engine.refs[key].matcher(max_rollback=8)


def _admit(engine, rid, **constraint):
    """A request as vLLM's input processor makes it: verified, EOS ids from the generation
    config, then handed to the manager, whose thread pool compiles it."""
    sp = SamplingParams(max_tokens=64, structured_outputs=StructuredOutputsParams(**constraint))
    sp.update_from_generation_config({"eos_token_id": [EOS, EOT]}, eos_token_id=EOS)
    config = engine.config
    sp.verify(config.model_config, engine.spec, config.structured_outputs_config, engine.manager.tokenizer)
    assert sp.structured_outputs._backend == "gramc"
    req = Request(rid, [128000, 9906, 11], sp, None)
    engine.manager.grammar_init(req)
    req.structured_output_request._grammar.result(timeout=600)  # the compile's Future
    grammar = req.structured_output_request.grammar
    assert type(grammar).__name__ == "GramcGrammar", grammar
    return req, grammar


def _allowed(row: np.ndarray) -> np.ndarray:
    return np.unpackbits(row.view(np.uint8), bitorder="little")[:HEAD].astype(bool)


def _check_row(row, ref):
    expect = ref.mask(HEAD)
    got = _allowed(row)
    diff = np.flatnonzero(got != expect)
    assert diff.size == 0, f"{diff.size} ids differ, e.g. {diff[:5].tolist()}"
    return got


@pytest.fixture(scope="module", autouse=True)
def no_pinned_memory():
    """vLLM decides at import whether to pin host memory; without a driver, pinning fails."""
    import vllm.v1.structured_output.utils as so_utils

    mp = pytest.MonkeyPatch()
    mp.setattr(so_utils, "PIN_MEMORY", False)
    yield
    mp.undo()


def _blank_tokens(engine):
    """Tokens that are only whitespace: JSON allows runs of them, which random walks would
    otherwise spend most of their steps on."""
    if "blank" not in engine.refs:
        vocab = _ref_vocab(engine)
        blank = np.zeros(HEAD, dtype=bool)
        blank[:vocab.size] = [bool(t) and not t.strip() for t in vocab.tokens]
        engine.refs["blank"] = torch.from_numpy(blank)
    return engine.refs["blank"]


def _masked_logits(engine, rid, bitmask, gen):
    """Random logits masked by vLLM's worker-side function (its CPU path)."""
    logits = torch.randn(1, HEAD, generator=gen)
    logits[0, [EOS, EOT]] += 4.0  # end walks now and then where stopping is allowed
    logits[0, _blank_tokens(engine)] -= 8.0
    sched = SimpleNamespace(scheduled_spec_decode_tokens={})
    apply_grammar_bitmask(sched, GrammarOutput([rid], bitmask), SimpleNamespace(req_ids=[rid]), logits)
    return logits[0]


def _text(engine, tokens):
    vocab = _ref_vocab(engine)
    return b"".join(vocab.tokens[t] for t in tokens if t not in (EOS, EOT)).decode("utf-8", "replace")


def _check_text(engine, name, tokens, ended):
    text = _text(engine, tokens)
    if name == "regex" and ended:
        assert re.fullmatch(DATE, text), text
    elif name in ("json", "json_object") and ended:
        value = json.loads(text)
        assert isinstance(value, dict)
        if name == "json":
            import jsonschema

            jsonschema.validate(value, SCHEMA)
    elif name == "choice" and ended:
        assert text in CHOICES, text
    elif name in ("grammar_ebnf", "grammar_lark"):
        _params, fmt, source = KINDS[name]
        oracle = EarleyOracle(lower(source, fmt))
        data = text.encode()
        assert oracle.fullmatch(data) if ended else oracle.is_viable_prefix(data), text
    elif name == "structural_tag":  # every completed call's arguments are the tool's JSON
        for args in re.findall(r"<function=get_weather>(.*?)</function>", text, re.S):
            assert json.loads(args)["city"] in ("Paris", "Oslo"), args


# ---------------------------------------------------------------- registration


def test_entry_point_is_the_register_function():
    found = [ep for ep in entry_points(group="vllm.general_plugins") if ep.value.startswith("gramc.")]
    assert [ep.load() for ep in found] == [vb.register]


def test_plugin_widens_the_backend_name(plugin):
    assert "gramc" in get_args(plugin.__dataclass_fields__["backend"].type)
    assert StructuredOutputsConfig(backend="gramc").backend == "gramc"
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="gramc2"):  # other names stay refused
        StructuredOutputsConfig(backend="gramc2")
    vb.register()  # idempotent
    assert get_args(plugin.__dataclass_fields__["backend"].type).count("gramc") == 1


def test_cli_parses_the_documented_flag(plugin, model_dir, monkeypatch):
    """vLLM's own argument parser (as ``vllm serve`` builds it) takes the documented flag.
    Building the parser computes every config's default, and the default device cannot be
    inferred without an accelerator: the platform is told it is a CPU for this test."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.platforms import current_platform
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    if not current_platform.device_type:
        monkeypatch.setattr(current_platform, "device_type", "cpu")

    parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
    args = parser.parse_args(["--model", model_dir, "--structured-outputs-config", '{"backend": "gramc"}'])
    assert EngineArgs.from_cli_args(args).structured_outputs_config.backend == "gramc"


# ---------------------------------------------------------------- admission


@pytest.mark.parametrize("constraint", [
    {"regex": "(ab"}, {"grammar": 'root ::= "a" missing'}, {"json": '{"type": 3}'},
    {"choice": []}, {"structural_tag": '{"type": "structural_tag", "format": {"type": "nope"}}'},
    {"grammar": "   "},
], ids=["regex", "ebnf", "json", "choice", "structural_tag", "blank"])
def test_malformed_requests_are_refused_at_admission(engine, constraint):
    sp = SamplingParams(max_tokens=8, structured_outputs=StructuredOutputsParams(**constraint))
    config = engine.config
    with pytest.raises(VLLMValidationError):
        sp.verify(config.model_config, None, config.structured_outputs_config, engine.manager.tokenizer)


def test_backend_shape(engine):
    req, _grammar = _admit(engine, "shape", regex="a")
    backend = engine.manager.backend
    assert type(backend).__name__ == "GramcBackend" and engine.manager.backend_name == "gramc"
    vocab = backend.grammars.vocab
    assert backend.vocab_size == HEAD and vocab.size == len(engine.manager.tokenizer) < HEAD and vocab.eos_ids == ()
    bitmask = backend.allocate_token_bitmask(5)
    assert tuple(bitmask.shape) == (5, (HEAD + 31) // 32) and bitmask.dtype == torch.int32


# ---------------------------------------------------------------- decoding


@pytest.mark.parametrize("name", list(KINDS))
def test_random_walks_match_gramc_masks(engine, name):
    """Each step: the manager's bitmask row == gramc's Matcher mask; vLLM's apply leaves
    exactly those logits finite; a sampled token is accepted by both."""
    gen = torch.Generator().manual_seed(len(name))
    for walk in range(2):
        rid = f"{name}-{walk}"
        req, grammar = _admit(engine, rid, **KINDS[name][0])
        ref = _reference(engine, name)
        tokens: list[int] = []
        if name == "structural_tag":  # free text, then open the tool call (random text rarely does)
            tokens = engine.manager.tokenizer.encode(" Sure.<function=get_weather>", add_special_tokens=False)
            assert engine.manager.accept_tokens(req, tokens) and ref.commit_tokens(tokens) == len(tokens)
        ended = False
        for _step in range(48):
            bitmask = engine.manager.grammar_bitmask({rid: req}, [rid], {})
            allowed = _check_row(bitmask[0], ref)
            logits = _masked_logits(engine, rid, bitmask, gen)
            assert torch.equal(torch.isfinite(logits), torch.from_numpy(allowed))
            token = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=gen))
            assert engine.manager.accept_tokens(req, [token])
            assert ref.commit_token(token)
            tokens.append(token)
            ended = token in (EOS, EOT)
            assert grammar.is_terminated() == ended
            if ended:
                break
        assert grammar.num_processed_tokens == len(tokens)
        _check_text(engine, name, tokens, ended)
        if name == "choice":
            assert ended  # every choice ends within 48 tokens


def test_refused_token_is_reported(engine):
    req, grammar = _admit(engine, "refuse", regex="[0-9]+")
    letter = engine.manager.tokenizer.encode("x", add_special_tokens=False)[0]
    assert not engine.manager.accept_tokens(req, [letter])
    assert grammar.num_processed_tokens == 0 and not grammar.is_terminated()
    grammar.reset()
    assert engine.manager.accept_tokens(req, engine.manager.tokenizer.encode("42", add_special_tokens=False))


def test_user_stop_token_ends_where_complete(engine):
    """``stop_token_ids`` join the request's stop set: allowed only where the output is complete."""
    tok = engine.manager.tokenizer
    stop = tok.encode(";", add_special_tokens=False)[0]
    sp = SamplingParams(max_tokens=8, stop_token_ids=[stop], structured_outputs=StructuredOutputsParams(regex="[0-9]{2}"))
    sp.update_from_generation_config({}, eos_token_id=EOS)
    sp.verify(engine.config.model_config, None, engine.config.structured_outputs_config, tok)
    req = Request("stop", [1], sp, None)
    engine.manager.grammar_init(req)
    req.structured_output_request._grammar.result(timeout=600)
    grammar = req.structured_output_request.grammar
    digit = tok.encode("7", add_special_tokens=False)[0]
    for expect_stop in (False, False, True):
        row = _allowed(engine.manager.grammar_bitmask({"stop": req}, ["stop"], {})[0])
        assert row[stop] == row[EOS] == expect_stop and row[EOT] == False  # noqa: E712 (numpy bool)
        if not expect_stop:
            assert engine.manager.accept_tokens(req, [digit])
    assert grammar.validate_tokens([stop, digit]) == [stop]
    assert engine.manager.accept_tokens(req, [stop]) and grammar.is_terminated()


# ---------------------------------------------------------------- speculative decoding


@pytest.mark.parametrize("name", ["regex", "json", "grammar_ebnf", "structural_tag"])
def test_speculative_drafts(spec_engine, name):
    """Drafts of up to 3 tokens, some with a refused token, some ending in a stop token:
    ``validate_tokens`` keeps the prefix gramc's Matcher accepts; ``grammar_bitmask`` fills
    one row per draft position (each equal to gramc's mask after that prefix) and rolls the
    grammar back; the accepted prefix plus a bonus token is then committed."""
    eng = spec_engine
    rng = np.random.default_rng(len(name))
    gen = torch.Generator().manual_seed(7)
    rid = f"spec-{name}"
    req, grammar = _admit(eng, rid, **KINDS[name][0])
    ref = _reference(eng, name)
    tokens: list[int] = []
    for _round in range(12):
        probe = ref.fork()
        draft: list[int] = []
        while len(draft) < 3:  # valid tokens, then maybe a refused one
            allowed = np.flatnonzero(probe.mask())
            if rng.random() < 0.15 or allowed.size == 0:
                draft.append(int(rng.integers(0, 128000)))
                break
            t = int(rng.choice(allowed))
            draft.append(t)
            probe.commit_token(t)
            if t in (EOS, EOT):
                break
        expect = draft[:ref.validate_tokens(draft)]
        valid = eng.manager.validate_tokens(req, draft)
        assert valid == expect, (draft, valid, expect)
        before = grammar.num_processed_tokens
        bitmask = eng.manager.grammar_bitmask({rid: req}, [rid], {rid: valid})
        assert grammar.num_processed_tokens == before and not grammar.is_terminated()
        walk = ref.fork()
        for i in range(len(valid) + 1):
            if i and valid[i - 1] in (EOS, EOT):
                break  # vLLM leaves rows after a terminating draft token unconstrained
            _check_row(bitmask[i], walk)
            if i < len(valid):
                assert walk.commit_token(valid[i])
        # the verifier keeps a prefix of the drafts, then samples the bonus token there
        keep = int(rng.integers(0, len(valid) + 1))
        if keep and valid[keep - 1] in (EOS, EOT):
            accepted = valid[:keep]
        else:
            logits = _masked_logits(eng, rid, bitmask[keep:keep + 1], gen)
            accepted = valid[:keep] + [int(torch.multinomial(torch.softmax(logits, -1), 1, generator=gen))]
        assert eng.manager.accept_tokens(req, accepted)
        assert ref.commit_tokens(accepted) == len(accepted)
        tokens += accepted
        if accepted[-1] in (EOS, EOT):
            assert grammar.is_terminated()
            break
    _check_text(eng, name, tokens, tokens[-1] in (EOS, EOT))
