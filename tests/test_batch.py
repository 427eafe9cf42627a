"""BatchMatcher: every row behaves exactly like its own per-sequence Matcher.

The same checks run on the CPU path (numpy), on the device path through the host emulation of
the CUDA kernels, and on a real GPU where one is present (marked ``gpu``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gramc
from gramc.errors import BackendUnavailableError, GramcError, LimitExceededError, VocabularyError
from gramc.runtime.batch import ENDED, BatchMatcher
from gramc.bitmask import apply_bitmask, n_words
from gramc.runtime.cuda import emulation

TOKENS = [b"(", b")", b"x", b"((", b"))", b"x)", b"(x", b"a", b"b", b"ab", b"ba", b"c", b"abc", b"1",
          b"2", b"12", b"-", b"-1"] + [bytes([0x50 + k]) for k in range(16)]
VOCAB = gramc.Vocab.from_list(TOKENS + [b"<s>", b"<eos>", b"<eot>"],
                              special_ids=[34, 35, 36], eos_ids=[35, 36], name="batch")
EOS = (35, 36)


@pytest.fixture(scope="module")
def arts():
    return {
        "ab": gramc.compile("(ab|c)+", vocab=VOCAB),
        "num": gramc.compile("-?[12]+(ab)?", vocab=VOCAB),
        "lazy": gramc.compile("a[bc]*1?", vocab=VOCAB, lazy=True),
        "paren": gramc.compile('root ::= "(" root ")" | "x"', format="gbnf", vocab=VOCAB),
        # A counted DFA (kind "counted"): its rows go through per-request matchers, as a PDA's.
        "counted": gramc.compile("(ab|c){1,3000}1?", vocab=VOCAB),
    }


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    if emulation.compiler() is None:
        pytest.skip("no C++ compiler: the CUDA host emulation cannot be built")
    return emulation.build(tmp_path_factory.mktemp("cuda-emu"))


DEVICES = ["cpu", "emulated", pytest.param("cuda", marks=pytest.mark.gpu)]


def make_batch(device, artifacts, capacity, emulated_kernels):
    if device == "emulated":
        return BatchMatcher(artifacts, capacity, emulation.EmulatedBackend(emulated_kernels, block=32, max_grid=3))
    if device == "cuda":
        try:
            return BatchMatcher(artifacts, capacity, device="cuda")
        except BackendUnavailableError as e:
            pytest.skip(f"no CUDA backend: {e}")
    return BatchMatcher(artifacts, capacity)


class Host:
    """Moves arrays to where the batch's device reads them, and back."""

    def __init__(self, batch):
        self.batch = batch
        self.cuda = batch.device == "cuda"

    def logits(self, arr):
        if not self.cuda:
            return arr
        import torch

        return torch.from_numpy(arr).cuda()

    def masks(self, arr):
        """A uint32 mask buffer where the batch's device writes (int32 on CUDA, via torch)."""
        if not self.cuda:
            return arr
        import torch

        return torch.from_numpy(arr.view(np.int32)).cuda()

    def get(self, arr):
        if not self.cuda:
            return arr
        return arr.cpu().numpy() if hasattr(arr, "cpu") else arr.get()


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def expected_masks(matchers, width):
    out = np.zeros((len(matchers), width), dtype=np.uint32)
    for i, m in enumerate(matchers):
        m.fill_bitmask(out[i])
    return out


def sample(rng, matcher):
    allowed = matcher.allowed_tokens()
    r = rng.random()
    if len(allowed) and r < 0.75:
        return int(rng.choice(allowed))
    if r < 0.85:
        return int(rng.choice(EOS))
    return int(rng.integers(-2, VOCAB.size + 2))


# ---------------------------------------------------------------- equivalence, step by step


@pytest.mark.parametrize("seed", range(3))
def test_rows_equal_per_row_matchers(device, arts, emulated, seed):
    rng = np.random.default_rng(seed)
    names = ["ab", "num", "lazy", "paren"]
    batch = make_batch(device, [arts[k] for k in names], 8, emulated)
    host = Host(batch)
    ref = {}
    for i in range(6):
        name = names[i % 4]
        batch.add(f"r{i}", arts[name])
        ref[f"r{i}"] = arts[name].matcher()
    W = n_words(VOCAB.size)
    for _ in range(10):
        order = batch.request_ids
        matchers = [ref[r] for r in order]
        masks = host.get(batch.fill_masks())
        assert np.array_equal(masks, expected_masks(matchers, W))
        logits = rng.standard_normal((len(order), VOCAB.size + 13)).astype(np.float32)
        want = apply_bitmask(logits.copy(), expected_masks(matchers, W))
        dev_logits = host.logits(logits)
        batch.apply_masks(dev_logits)
        assert np.array_equal(host.get(dev_logits), want)
        tokens = [sample(rng, m) for m in matchers]
        got = batch.commit(tokens)
        assert got.tolist() == [m.commit_token(t) for m, t in zip(matchers, tokens)]
        for r in order:
            assert batch.is_complete(r) == ref[r].is_complete()
            assert batch.is_finished(r) == ref[r].is_finished()


def budget_masks(matchers, budgets, width):
    """What each per-row matcher gives with its budget (None: no budget)."""
    out = np.zeros((len(matchers), width), dtype=np.uint32)
    for i, (m, b) in enumerate(zip(matchers, budgets)):
        m.fill_bitmask(out[i], budget=b)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_budgeted_rows_equal_per_row_matchers(device, arts, emulated, seed):
    """Budgets cut DFA, lazy DFA, PDA and counted rows as their own matchers do, whether
    given per row or by request id, into row- or slot-shaped arrays, and into logits."""
    rng = np.random.default_rng(seed)
    names = ["ab", "num", "lazy", "paren", "counted"]
    batch = make_batch(device, [arts[k] for k in names], 8, emulated)
    host = Host(batch)
    ref = {}
    for i in range(7):
        name = names[i % len(names)]
        batch.add(f"r{i}", arts[name])
        ref[f"r{i}"] = arts[name].matcher()
    W = n_words(VOCAB.size)
    cut_somewhere = False
    for _ in range(10):
        order = batch.request_ids
        matchers = [ref[r] for r in order]
        budgets = [None if rng.random() < 0.25 else int(rng.integers(0, 6)) for _ in order]
        want = budget_masks(matchers, budgets, W)
        cut_somewhere |= not np.array_equal(want, expected_masks(matchers, W))
        assert np.array_equal(host.get(batch.fill_masks(budgets=budgets)), want)
        named = {r: b for r, b in zip(order, budgets) if b is not None}
        out = host.masks(np.full((8, W + 1), 77, dtype=np.uint32))
        batch.fill_masks(out, budgets=named)  # by slot, budgets by request id
        out = host.get(out).view(np.uint32)
        for r, row in zip(order, want):
            assert np.array_equal(out[batch.slot(r)], np.append(row, 0))
        logits = rng.standard_normal((len(order), VOCAB.size + 13)).astype(np.float32)
        expect = apply_bitmask(logits.copy(), want)
        dev_logits = host.logits(logits)
        batch.apply_masks(dev_logits, budgets=budgets)
        assert np.array_equal(host.get(dev_logits), expect)
        tokens = [sample(rng, m) for m in matchers]
        assert batch.commit(tokens).tolist() == [m.commit_token(t) for m, t in zip(matchers, tokens)]
    assert cut_somewhere


def test_bad_budgets_are_refused_by_the_batch(arts):
    batch = BatchMatcher([arts["ab"]], 4)
    batch.add("x")
    batch.add("y")
    with pytest.raises(GramcError, match="2 rows"):
        batch.fill_masks(budgets=[3])
    with pytest.raises(GramcError, match="not one of this call's rows"):
        batch.fill_masks(request_ids=["x"], budgets={"y": 2})
    with pytest.raises(GramcError, match="unknown request"):
        batch.fill_masks(budgets={"z": 2})
    with pytest.raises(ValueError, match="budget"):
        batch.apply_masks(np.zeros((2, VOCAB.size), np.float32), budgets=[-1, None])
    with pytest.raises(TypeError, match="budget"):
        batch.fill_masks(budgets=[1.5, None])


def test_explicit_row_order_and_slot_indexed_arrays(device, arts, emulated):
    batch = make_batch(device, [arts["ab"], arts["paren"]], 6, emulated)
    host = Host(batch)
    for rid, art in [("p", arts["paren"]), ("a", arts["ab"]), ("q", arts["paren"]), ("b", arts["ab"])]:
        batch.add(rid, art)
    assert batch.commit({"a": TOKENS.index(b"ab"), "p": TOKENS.index(b"((")}).tolist() == [True, True]
    ref = {"a": arts["ab"].matcher(), "p": arts["paren"].matcher(), "q": arts["paren"].matcher(),
           "b": arts["ab"].matcher()}
    ref["a"].commit_token(TOKENS.index(b"ab"))
    ref["p"].commit_token(TOKENS.index(b"(("))
    W = n_words(VOCAB.size)
    order = ["b", "p", "a"]  # q left out
    masks = host.get(batch.fill_masks(request_ids=order))
    assert np.array_equal(masks, expected_masks([ref[r] for r in order], W))

    # one row per slot: other slots are left as they were
    out = host.masks(np.full((6, W + 1), 77, dtype=np.uint32))
    batch.fill_masks(out, request_ids=order)
    out = host.get(out).view(np.uint32)
    for r in order:
        assert np.array_equal(out[batch.slot(r)], np.append(expected_masks([ref[r]], W)[0], 0))
    assert (out[batch.slot("q")] == 77).all() and (out[4:] == 77).all()
    logits = np.zeros((6, VOCAB.size), dtype=np.float32)
    dev = host.logits(logits)
    batch.apply_masks(dev)  # capacity rows: by slot
    got = host.get(dev)
    for r in batch.request_ids:
        want = apply_bitmask(np.zeros(VOCAB.size, np.float32), expected_masks([ref[r]], W)[0])
        assert np.array_equal(got[batch.slot(r)], want)
    assert (got[4:] == 0).all()  # free slots untouched


def test_eos_finishes_a_row_and_slots_are_reused(device, arts, emulated):
    batch = make_batch(device, arts["ab"], 2, emulated)
    assert batch.add("x") == 0 and batch.add("y") == 1
    with pytest.raises(LimitExceededError, match="batch_capacity"):
        batch.add("z")
    ab = TOKENS.index(b"ab")
    assert batch.commit([35, ab]).tolist() == [False, True]  # EOS before the output is complete
    assert batch.commit([ab, 36]).tolist() == [True, True]  # the second EOS id works too
    assert batch.dfa_state("y") == ENDED and batch.is_finished("y") and batch.is_complete("y")
    assert not Host(batch).get(batch.fill_masks())[1].any()
    assert batch.commit([ab, ab]).tolist() == [True, False]  # nothing after EOS
    batch.evict("x")
    assert batch.request_ids == ["y"]
    assert batch.add("z") == 0  # the lowest free slot
    assert batch.dfa_state("z") == arts["ab"].dfa.start
    batch.reset("y")
    assert batch.dfa_state("y") == arts["ab"].dfa.start and not batch.is_finished("y")


def test_pda_rows_end_with_eos(device, arts, emulated):
    batch = make_batch(device, [arts["paren"]], 3, emulated)
    batch.add("p")
    seq = [TOKENS.index(t) for t in (b"((", b"x)", b")")]
    assert batch.commit(seq[:1]).tolist() == [True]
    assert batch.commit([35]).tolist() == [False]
    assert batch.commit(seq[1:2]).tolist() == [True]
    assert batch.commit(seq[2:]).tolist() == [True]
    assert batch.is_complete("p") and not batch.is_finished("p")
    assert batch.commit([35]).tolist() == [True]
    assert batch.is_finished("p") and batch.dfa_state("p") is None


# ---------------------------------------------------------------- random operation sequences

OPS = st.lists(st.tuples(st.sampled_from(["add", "add", "evict", "reset", "step", "step", "step"]),
                         st.integers(0, 10**6)), min_size=1, max_size=30)


def run_ops(batch, arts, ops):
    """Apply ``ops`` to ``batch`` and to a dict of per-request matchers; compare every step."""
    rng = np.random.default_rng(len(ops))
    host = Host(batch)
    names = sorted(arts)
    ref: dict[str, object] = {}
    W = n_words(VOCAB.size)
    counter = 0
    for op, k in ops:
        if op == "add":
            name = names[k % len(names)]
            if len(ref) == batch.capacity:
                with pytest.raises(LimitExceededError):
                    batch.add("new", arts[name])
                continue
            rid = f"r{counter}"
            counter += 1
            batch.add(rid, arts[name])
            ref[rid] = arts[name].matcher()
        elif op in ("evict", "reset"):
            if not ref:
                with pytest.raises(GramcError, match="unknown request id"):
                    getattr(batch, op)("nobody")
                continue
            rid = sorted(ref)[k % len(ref)]
            getattr(batch, op)(rid)
            if op == "evict":
                del ref[rid]
            else:
                ref[rid].reset()
        else:
            order = batch.request_ids
            if k % 3 == 0 and order:  # an explicit order, a subset
                order = [order[i] for i in rng.permutation(len(order))[: 1 + k % len(order)]]
            matchers = [ref[r] for r in order]
            assert sorted(batch.request_ids) == sorted(ref)
            assert np.array_equal(host.get(batch.fill_masks(request_ids=order)), expected_masks(matchers, W))
            logits = rng.standard_normal((len(order), VOCAB.size + k % 40)).astype(np.float32)
            want = apply_bitmask(logits.copy(), expected_masks(matchers, W))
            dev = host.logits(logits)
            batch.apply_masks(dev, request_ids=order)
            assert np.array_equal(host.get(dev), want)
            tokens = [sample(rng, m) for m in matchers]
            if k % 2:
                got = batch.commit(dict(zip(order, tokens)))
            else:
                got = batch.commit(np.array(tokens, dtype=np.int64), request_ids=order)
            assert got.tolist() == [m.commit_token(t) for m, t in zip(matchers, tokens)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_random_operation_sequences_cpu(arts, ops):
    run_ops(BatchMatcher(list(arts.values()), 4), arts, ops)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_random_operation_sequences_emulated_device(arts, emulated, ops):
    backend = emulation.EmulatedBackend(emulated, block=32, max_grid=2)
    run_ops(BatchMatcher(list(arts.values()), 4, backend, dense_budget=0 if len(ops) % 2 else None),
            arts, ops)


@pytest.mark.gpu
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_random_operation_sequences_gpu(arts, ops):
    try:
        batch = BatchMatcher(list(arts.values()), 4, device="cuda")
    except BackendUnavailableError as e:
        pytest.skip(f"no CUDA backend: {e}")
    run_ops(batch, arts, ops)


# ---------------------------------------------------------------- dtypes and array kinds


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_torch_logits(device, arts, emulated, dtype):
    torch = pytest.importorskip("torch")
    batch = make_batch(device, [arts["num"], arts["paren"]], 4, emulated)
    batch.add("n")
    batch.add("p", arts["paren"])
    ref = [arts["num"].matcher(), arts["paren"].matcher()]
    logits = torch.randn(2, VOCAB.size + 20).to(getattr(torch, dtype))
    if device == "cuda":
        logits = logits.cuda()
    want = logits.float().cpu().numpy()
    apply_bitmask(want, expected_masks(ref, n_words(VOCAB.size)))
    batch.apply_masks(logits)
    assert np.array_equal(logits.float().cpu().numpy(), want)


def test_numpy_float16_and_one_row(arts):
    batch = BatchMatcher(arts["ab"], 1)
    batch.add(0)
    logits = np.ones(VOCAB.size + 3, dtype=np.float16)
    batch.apply_masks(logits)
    want = apply_bitmask(np.ones(VOCAB.size + 3, np.float16),
                         expected_masks([arts["ab"].matcher()], n_words(VOCAB.size))[0])
    assert np.array_equal(logits, want)


@pytest.mark.parametrize("density", [0.0005, 0.01, 0.5, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_apply_packed_sparse_and_dense_paths(density, seed):
    """apply_packed (the CPU path) against the library reference, on both of its strategies."""
    from gramc.runtime.batch import apply_packed

    rng = np.random.default_rng(seed)
    n, vocab = 5, int(rng.integers(2000, 5000))
    W = n_words(vocab)
    bits = rng.random((n, 32 * W)) < density
    bits[:, vocab:] = False
    masks = np.packbits(bits, axis=1, bitorder="little").view("<u4").copy()
    width = vocab + int(rng.integers(-40, 40))
    dtype = [np.float32, np.float16][seed % 2]
    logits = rng.standard_normal((n + 2, width)).astype(dtype)
    rows = rng.permutation(n + 2)[:n]
    want = logits.copy()
    want[rows] = apply_bitmask(want[rows], masks)
    apply_packed(logits, masks, rows)
    assert np.array_equal(logits, want)
    square = logits[:n].copy()
    apply_packed(square, masks)
    assert np.array_equal(square, apply_bitmask(logits[:n].copy(), masks))


def test_empty_batch(device, arts, emulated):
    batch = make_batch(device, arts["ab"], 3, emulated)
    assert Host(batch).get(batch.fill_masks()).shape == (0, n_words(VOCAB.size))
    assert batch.commit([]).tolist() == []


def test_commit_without_waiting(device, arts, emulated):
    """Device path: ``commit(wait=False)`` leaves the flags (DFA and PDA rows) for
    ``last_accepted``, which has none before the first commit. The CPU path has no flags."""
    batch = make_batch(device, [arts["ab"], arts["paren"]], 3, emulated)
    if device == "cpu":
        assert batch.last_accepted() is None
        return
    assert batch.last_accepted().tolist() == []
    batch.add("a")
    batch.add("p", arts["paren"])
    tokens = {"a": TOKENS.index(b"ab"), "p": TOKENS.index(b")")}
    assert batch.commit(tokens, wait=False) is None
    assert batch.last_accepted().tolist() == [True, False]


# ---------------------------------------------------------------- errors


def test_errors(arts):
    batch = BatchMatcher([arts["ab"], arts["paren"]], 2)
    batch.add("a")
    with pytest.raises(GramcError, match="already in the batch"):
        batch.add("a")
    for call in (lambda: batch.evict("nope"), lambda: batch.reset("nope"),
                 lambda: batch.commit({"nope": 1}), lambda: batch.fill_masks(request_ids=["a", "nope"])):
        with pytest.raises(GramcError, match="unknown request id 'nope'"):
            call()
    with pytest.raises(GramcError, match="more than once"):
        batch.fill_masks(request_ids=["a", "a"])
    with pytest.raises(GramcError, match="2 tokens for 1 rows"):
        batch.commit([1, 2])
    with pytest.raises(GramcError, match="tokens must be integers"):
        batch.commit(np.array([1.5]))
    with pytest.raises(GramcError, match="logits has 3 rows"):
        batch.apply_masks(np.zeros((3, VOCAB.size), np.float32))
    with pytest.raises(GramcError, match="out must be"):
        batch.fill_masks(np.zeros((1, 1), np.uint32))
    small = gramc.Vocab.from_list([b"a", b"b", b"<eos>"], special_ids=[2], eos_ids=[2])
    with pytest.raises(VocabularyError, match="width mismatch"):
        batch.add("w", gramc.compile("a+", vocab=small))
    same_size = gramc.Vocab.from_list([b"q"] + TOKENS[1:] + [b"<s>", b"<eos>", b"<eot>"],
                                      special_ids=[34, 35, 36], eos_ids=[35, 36])
    with pytest.raises(VocabularyError, match="vocabulary mismatch"):
        batch.add("f", gramc.compile("a+", vocab=same_size))
    with pytest.raises(VocabularyError, match="not bound"):
        batch.add("u", gramc.compile("a+"))
    with pytest.raises(GramcError, match="needs an artifact"):
        BatchMatcher([], 2).add("a")
    with pytest.raises(GramcError, match="capacity"):
        BatchMatcher(arts["ab"], 0)
    assert "a" in batch and len(batch) == 1 and "1/2" in repr(batch)


def test_device_path_refuses_host_logits_on_cuda(arts):
    """On PyCUDA, host numpy logits are refused with a pointer to device='cpu'."""
    from gramc.runtime.cuda.engine import DeviceEngine
    from gramc.runtime.cuda.device import Backend

    class FakeCuda(Backend):
        name = "cuda"

        def alloc(self, shape, dtype):
            return np.zeros(shape, dtype)

        def pinned(self, shape, dtype):
            return np.zeros(shape, dtype)

        def upload(self, host):
            return np.array(host)

        def view(self, obj):
            from gramc.runtime.cuda.device import host_view
            return host_view(obj)

        def is_device_array(self, obj):
            return False

    batch = BatchMatcher(arts["ab"], 2, FakeCuda())
    assert isinstance(batch._engine, DeviceEngine)
    batch.add("a")
    with pytest.raises(GramcError, match="use device='cpu'"):
        batch.apply_masks(np.zeros((1, VOCAB.size), np.float32))
