"""vLLM adapter: driven through the call sequences of vLLM's two logits-processor interfaces.

vLLM is not in the project's environment (0.33.0 pins torch==2.14.0 and transformers<5.21,
and pulls CUDA wheels; ``tools/vllm_env.sh`` installs it in a virtualenv of its own), and its
model runners need a GPU, so these tests replay, with stand-in objects, the calls vLLM 0.33.0
makes, as read from its source:

* V1 runner (``vllm/v1/sample/logits_processor``): ``__init__(vllm_config, device,
  is_pin_memory)``; per step ``update_state(BatchUpdate | None)`` then ``apply(logits)``.
  ``BatchUpdate.added`` holds ``(index, params, prompt_ids, output_ids)`` where ``output_ids``
  is the request's live output list; removals and condensing moves (``UNIDIRECTIONAL``) and
  reorder swaps (``SWAP``) follow finished requests, as ``InputBatch`` emits them.
* Model Runner V2 (``vllm/v1/worker/gpu/sample/logits_processor``): ``__init__(vllm_config,
  req_states)``; ``add_request(slot, params)`` when a request takes a slot (slots are recycled
  without a removal call), ``apply_staged_writes()``, then per step ``apply(logits, ctx)``
  with ``ctx.idx_mapping_np`` (row -> slot), ``ctx.input_ids`` / ``ctx.pos`` (the token fed at
  each row and its position) and ``req_states.prompt_len.np`` / ``all_token_ids.gpu``; rows
  are reordered every step; chunked prefill and preemption with resumption are included.

What this does not exercise: a real vLLM engine, CUDA tensors, async scheduling's overlap, and
vLLM's loader accepting the class (``issubclass`` against its real base classes) - the last
one runs in ``test_real_vllm_bases`` when vLLM is installed.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (vLLM needs it too)")

import gramc  # noqa: E402
from earley import EarleyOracle  # noqa: E402
from gramc.compiler.frontends.gbnf import parse_gbnf  # noqa: E402
from gramc.integrations import vllm as gv  # noqa: E402

WORDS = r"[a-z]{1,6}( [a-z]{1,6}){0,3}\."
DATE = r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
NESTED = 'root ::= "[" ( item ( ", " item )* )? "]"\nitem ::= [0-9]{1,3} | root'
EOS = 50256
WIDTH = 50304


class MoveDirectionality(enum.Enum):  # vllm.v1.sample.logits_processor.interface
    UNIDIRECTIONAL = enum.auto()
    SWAP = enum.auto()


@dataclass(frozen=True)
class BatchUpdate:  # same fields as vLLM's frozen dataclass
    batch_size: int
    removed: list
    added: list
    moved: list


@dataclass
class SamplingParams:
    max_tokens: int = 40
    extra_args: dict | None = None


@dataclass
class Request:
    rid: int
    params: SamplingParams
    prompt: list[int]
    output: list[int] = field(default_factory=list)
    finished: bool = False


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Small tensors: one thread avoids OpenMP hand-offs on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module", autouse=True)
def grammars():
    """The model's vocabulary comes from GRAMC_VLLM_VOCAB; the per-worker artifact cache is
    filled with lazily bound artifacts (the processor compiles eagerly, which takes seconds)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("GRAMC_VLLM_VOCAB", "gpt2")
    cache = gv.GramcProcessorCore._artifacts
    cache.clear()
    for kind, source in (("regex", WORDS), ("regex", DATE), ("gbnf", NESTED)):
        cache.put((kind, source), gramc.compile(source, format=kind, vocab="gpt2", lazy=True))
    yield
    cache.clear()
    mp.undo()


def _requests(n, seed):
    rng = np.random.default_rng(seed)
    specs = [{"regex": WORDS}, {"regex": DATE}, {"gbnf": NESTED}, None]
    out = []
    for i in range(n):
        spec = specs[i % len(specs)]
        prompt = rng.integers(0, 50000, size=int(rng.integers(3, 9))).tolist()
        extra = None if spec is None else {"gramc": spec} if i % 2 else \
            {f"gramc_{k}": v for k, v in spec.items()}  # nested (Python API) or flat (server)
        out.append(Request(i, SamplingParams(40, extra), prompt))
    return out


def _check(req: Request) -> None:
    found = gv.grammar_spec(req.params)
    if found is None:
        return
    spec = {found[0]: found[1]}
    vocab = gramc.load_vocab("gpt2")
    ended = req.output[-1:] == [EOS]
    tokens = req.output[:-1] if ended else req.output
    data = b"".join(vocab.tokens[t] for t in tokens)
    assert all(t < vocab.size for t in tokens)
    if "regex" in spec:
        assert ended and re.fullmatch(spec["regex"], data.decode()), (data, req.output)
    else:
        oracle = EarleyOracle(parse_gbnf(spec["gbnf"]))
        assert oracle.fullmatch(data) if ended else oracle.is_viable_prefix(data), data


def _sample(row: torch.Tensor, gen: torch.Generator, greedy: bool) -> int:
    if greedy:
        return int(torch.argmax(row))
    return int(torch.multinomial(torch.softmax(row, -1), 1, generator=gen))


# ---------------------------------------------------------------- V1 call sequence


def run_v1(processor, requests, max_batch, seed, greedy=False):
    gen = torch.Generator().manual_seed(seed)
    batch: list[Request | None] = []
    waiting = list(requests)
    removed: list[int] = []
    steps = 0
    while waiting or any(r is not None for r in batch):
        added, moved = [], []
        # admission: fill the lowest free index first, then append (InputBatch.add_request)
        while waiting and (removed or len(batch) < max_batch):
            req = waiting.pop(0)
            if removed:
                idx = min(removed)
                removed.remove(idx)
                batch[idx] = req
            else:
                idx = len(batch)
                batch.append(req)
            added.append((idx, req.params, req.prompt, req.output))  # the live output list
        # condense: move the last requests into the holes left by finished ones
        holes = sorted(removed)
        while holes:
            hole = holes.pop(0)
            last = max((i for i, r in enumerate(batch) if r is not None), default=-1)
            if last > hole:
                batch[hole], batch[last] = batch[last], None
                moved.append((last, hole, MoveDirectionality.UNIDIRECTIONAL))
        while batch and batch[-1] is None:
            batch.pop()
        # the attention backend's reorder: an occasional swap
        if len(batch) > 2 and steps % 3 == 1:
            batch[0], batch[1] = batch[1], batch[0]
            moved.append((0, 1, MoveDirectionality.SWAP))
        update = BatchUpdate(len(batch), sorted(removed, reverse=True), added, moved)
        processor.update_state(update if (added or removed or moved) else None)
        removed = []
        logits = torch.randn(len(batch), WIDTH, generator=gen)
        logits[:, 50257:] += 100  # padding columns the masks must refuse
        before = logits.clone()
        out = processor.apply(logits)
        for i, req in enumerate(batch):
            if req.params.extra_args is None:
                assert torch.equal(out[i], before[i])  # unconstrained rows are untouched
            token = _sample(out[i], gen, greedy)
            req.output.append(token)
            if token == EOS or len(req.output) >= req.params.max_tokens:
                req.finished = True
        for i, req in enumerate(batch):
            if req.finished:
                batch[i] = None
                removed.append(i)
        steps += 1
    return steps


@pytest.mark.parametrize("greedy", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_v1_interface_call_sequence(seed, greedy):
    processor = gv.GramcProcessorCore(object(), torch.device("cpu"), False)
    assert processor.interface == "v1" and not processor.is_argmax_invariant()
    reqs = _requests(10, seed)
    run_v1(processor, reqs, max_batch=4, seed=seed, greedy=greedy)
    for req in reqs:
        _check(req)
    assert processor.slots == {}  # every finished request was removed


# ---------------------------------------------------------------- V2 call sequence


@dataclass
class UvaBacked:  # vllm.v1.worker.gpu.buffer_utils.UvaBackedTensor: .np is the host copy
    np: np.ndarray


@dataclass
class StagedWrite:  # StagedWriteTensor: .gpu is the device tensor
    gpu: torch.Tensor


@dataclass
class ReqStates:  # LogitsProcRequestState
    device: torch.device
    max_num_reqs: int
    vocab_size: int
    all_token_ids: StagedWrite
    prompt_len: UvaBacked
    prefill_len: UvaBacked
    total_len: StagedWrite


@dataclass
class LogitsContext:  # vllm.v1.worker.gpu.sample.logits_processor.LogitsContext
    expanded_idx_mapping: torch.Tensor
    idx_mapping: torch.Tensor
    idx_mapping_np: np.ndarray
    expanded_local_pos: torch.Tensor
    input_ids: torch.Tensor
    pos: torch.Tensor
    seq_lens_upper_bound_np: np.ndarray


def run_v2(processor, states: ReqStates, requests, seed, chunk=4, preemptions=4, greedy=False):
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    free = list(range(states.max_num_reqs))
    waiting = list(requests)
    running: dict[int, Request] = {}  # slot -> request
    computed: dict[int, int] = {}  # slot -> tokens already in the KV cache
    step = 0
    while waiting or running:
        while waiting and free:
            req = waiting.pop(0)
            slot = free.pop(0)
            seq = req.prompt + req.output  # a resumed request refills prompt + partial output
            states.prompt_len.np[slot] = len(req.prompt)
            states.prefill_len.np[slot] = len(seq)
            states.total_len.gpu[slot] = len(seq)
            states.all_token_ids.gpu[slot, : len(seq)] = torch.tensor(seq)
            processor.add_request(slot, req.params)
            running[slot] = req
            computed[slot] = 0
        processor.apply_staged_writes()
        order = list(running)
        rng.shuffle(order)  # rows are reordered every step
        input_ids, pos = [], []
        for slot in order:
            total = int(states.total_len.gpu[slot])
            # chunked prefill: at most `chunk` tokens per step until the sequence is in
            upto = min(total, computed[slot] + chunk) if computed[slot] < total - 1 else total
            computed[slot] = upto
            input_ids.append(int(states.all_token_ids.gpu[slot, upto - 1]))
            pos.append(upto - 1)
        slots = np.array(order, dtype=np.int32)
        ctx = LogitsContext(torch.tensor(slots), torch.tensor(slots), slots,
                            torch.zeros(len(order), dtype=torch.int32), torch.tensor(input_ids),
                            torch.tensor(pos, dtype=torch.int64), np.array(pos) + 1)
        logits = torch.randn(len(order), WIDTH, generator=gen)
        logits[:, 50257:] += 100
        before = logits.clone()
        out = processor.apply(logits, ctx)
        for row, slot in enumerate(order):
            req = running[slot]
            if req.params.extra_args is None:
                assert torch.equal(out[row], before[row])
            total = int(states.total_len.gpu[slot])
            if computed[slot] < total:
                continue  # a partial prefill chunk: the sampled token is discarded
            token = _sample(out[row], gen, greedy)
            req.output.append(token)
            states.all_token_ids.gpu[slot, total] = token
            states.total_len.gpu[slot] = total + 1
            if token == EOS or len(req.output) >= req.params.max_tokens:
                del running[slot]
                free.append(slot)  # recycled: the next add_request overwrites its state
        step += 1
        decoding = [s for s in running if running[s].output and computed[s] == int(states.total_len.gpu[s]) - 1]
        if preemptions and step % 5 == 0 and decoding:
            preemptions -= 1  # preempt: evicted now, resumed later (prompt + output refilled)
            slot = decoding[int(rng.integers(len(decoding)))]
            waiting.append(running.pop(slot))
            free.append(slot)
    assert preemptions == 0
    return step


def _states(max_reqs=3, max_len=96):
    return ReqStates(torch.device("cpu"), max_reqs, 50257,
                     StagedWrite(torch.zeros(max_reqs, max_len, dtype=torch.int32)),
                     UvaBacked(np.zeros(max_reqs, dtype=np.int32)), UvaBacked(np.zeros(max_reqs, dtype=np.int32)),
                     StagedWrite(torch.zeros(max_reqs, dtype=torch.int32)))


@pytest.mark.parametrize("greedy", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_v2_interface_call_sequence(seed, greedy):
    states = _states()
    processor = gv.GramcProcessorCore(object(), states)
    assert processor.interface == "v2"
    resyncs = []
    real = processor._resync
    processor._resync = lambda *a: (resyncs.append(a[0]), real(*a))
    reqs = _requests(10, seed + 10)
    run_v2(processor, states, reqs, seed, greedy=greedy)
    assert resyncs  # resumed requests caught up from all_token_ids
    for req in reqs:
        _check(req)


@pytest.mark.parametrize("seed", range(3))
def test_finish_cuts_masks_to_max_tokens(seed):
    """``finish`` beside the grammar: every request ends with EOS within its max_tokens
    (vLLM counts the EOS), its output complete; the same requests without it are cut."""
    cut = {}
    for finish in (True, False):
        reqs = []
        for i, (spec, limit) in enumerate([({"regex": WORDS}, 4), ({"gbnf": NESTED}, 5), ({"regex": DATE}, 7)] * 2):
            extra = {"gramc": {**spec, "finish": True}} if finish and i % 2 else \
                {**{f"gramc_{k}": v for k, v in spec.items()}, **({"gramc_finish": True} if finish else {})}
            reqs.append(Request(i, SamplingParams(limit, extra), [1, 2, 3]))
        run_v1(gv.GramcProcessorCore(object(), torch.device("cpu"), False), reqs, max_batch=3, seed=seed)
        cut[finish] = sum(req.output[-1:] != [EOS] for req in reqs)
        if finish:
            for req in reqs:
                assert gv.finish_limit(req.params) == req.params.max_tokens
                assert req.output[-1:] == [EOS] and len(req.output) <= req.params.max_tokens, req.output
                _check(req)
    assert cut[True] == 0 and cut[False] > 0


def test_v2_resumption_catches_up_from_all_token_ids():
    states = _states(max_reqs=1)
    p = gv.GramcProcessorCore(object(), states)
    vocab = gramc.load_vocab("gpt2")
    req = Request(0, SamplingParams(40, {"gramc": {"regex": DATE}}), [1, 2, 3])
    req.output = [vocab.tokens.index(b"19"), vocab.tokens.index(b"99"), vocab.tokens.index(b"-")]
    seq = req.prompt + req.output
    states.prompt_len.np[0] = 3
    states.all_token_ids.gpu[0, : len(seq)] = torch.tensor(seq)
    assert p.add_request(0, req.params)
    ctx = LogitsContext(torch.tensor([0]), torch.tensor([0]), np.array([0]), torch.zeros(1),
                        torch.tensor([seq[-1]]), torch.tensor([len(seq) - 1]), np.array([len(seq)]))
    out = p.apply(torch.zeros(1, WIDTH), ctx)
    allowed = {vocab.tokens[t] for t in torch.nonzero(torch.isfinite(out[0])).flatten().tolist()}
    assert allowed and all(re.fullmatch(r"0[1-9]?|1[0-2]?", t.decode()) for t in allowed)
    # speculative decoding (more rows than requests) is refused with a clear error
    with pytest.raises(NotImplementedError):
        p.apply(torch.zeros(2, WIDTH), ctx)


# ---------------------------------------------------------------- params, grammars, classes


def test_validate_params():
    ok = [None, {"gramc": {"regex": "a+"}}, {"gramc": {"json_schema": {"type": "integer"}}},
          {"other": 1}, {"gramc_regex": "a+", "other": 2}]
    for extra in ok:
        gv.GramcProcessorCore.validate_params(SamplingParams(extra_args=extra))
    bad = [{"gramc": "a+"}, {"gramc": {"regex": "a", "gbnf": "b"}}, {"gramc": {"pattern": "a"}},
           {"gramc": {"regex": 5}}, {"gramc_regex": "a", "gramc_gbnf": "b"},
           {"gramc_regex": "a", "gramc": {"regex": "a"}}, {"gramc_pattern": "a"}]
    for extra in bad:
        with pytest.raises(ValueError):
            gv.GramcProcessorCore.validate_params(SamplingParams(extra_args=extra))
    assert gv.grammar_spec(SamplingParams(extra_args={"gramc": {"json_schema": {"type": "integer"}}})) == \
        ("json_schema", json.dumps({"type": "integer"}))
    assert gv.grammar_spec(SamplingParams(extra_args={"gramc_gbnf": NESTED})) == ("gbnf", NESTED)
    for extra in ({"gramc": {"regex": "a+", "finish": True}}, {"gramc_regex": "a+", "gramc_finish": True}):
        assert gv.grammar_spec(SamplingParams(7, extra)) == ("regex", "a+")
        assert gv.finish_limit(SamplingParams(7, extra)) == 7
    assert gv.finish_limit(SamplingParams(7, {"gramc_regex": "a+"})) is None
    with pytest.raises(ValueError):
        gv.grammar_spec(SamplingParams(extra_args={"gramc": {"finish": True}}))  # no grammar


def test_artifact_files_and_the_per_worker_cache(tmp_path):
    path = tmp_path / "date.gmask"
    gramc.compile(DATE, vocab="gpt2").save(path)
    p = gv.GramcProcessorCore(object(), torch.device("cpu"), False)
    a = p.artifact("artifact", str(path))
    assert p.artifact("artifact", str(path)) is a
    b = p.artifact("regex", DATE)
    assert p.artifact("regex", DATE) is b and b.vocab.fingerprint == a.vocab.fingerprint
    # an explicit vocabulary (instead of the model's tokenizer)
    tiny = gramc.Vocab.from_list(["a", "b", "<e>"], special_ids=[2], eos_ids=[2])
    q = gv.GramcProcessorCore(object(), torch.device("cpu"), False, vocab=tiny)
    assert q.artifact("regex", "a+").vocab.size == 3


def test_processor_class_satisfies_the_abstract_interfaces():
    import abc

    class V1Base(abc.ABC):  # vLLM 0.33.0's abstract methods, V1
        @abc.abstractmethod
        def __init__(self, vllm_config, device, is_pin_memory): ...

        @abc.abstractmethod
        def apply(self, logits): ...

        @abc.abstractmethod
        def is_argmax_invariant(self): ...

        @abc.abstractmethod
        def update_state(self, batch_update): ...

    class V2Base(abc.ABC):  # and Model Runner V2
        def __init__(self, vllm_config, req_states): ...

        def add_request(self, req_idx, sampling_params):
            return True

        def apply_staged_writes(self): ...

        @abc.abstractmethod
        def apply(self, logits, ctx): ...

    cls = gv.processor_class(V2Base, V1Base)
    assert issubclass(cls, V1Base) and issubclass(cls, V2Base)
    assert cls(object(), _states()).interface == "v2"
    assert cls(object(), torch.device("cpu"), False).interface == "v1"


def test_real_vllm_bases():
    try:
        cls = gv.GramcLogitsProcessor
    except ImportError as err:
        assert "pip install vllm" in str(err)
        pytest.skip("vLLM is not installed: the adapter was checked against stand-ins only")
    from vllm.v1.sample.logits_processor import LogitsProcessor as V1

    assert issubclass(cls, V1)
