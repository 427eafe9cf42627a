"""The CUDA kernels against their numpy references, on the host emulation and on a GPU.

Without a GPU (CI): every ``.cu`` source is compiled to PTX by nvcc when nvcc is present, and
the kernel logic runs through the host emulation of the same source
(:mod:`gramc.runtime.cuda.emulation`: the files compiled as C++, every thread of the grid run
in turn), forwards and in reverse thread order, with the real launch geometry and with tiny
blocks and grids that make the grid-stride loops turn. With a GPU the same tests run on the
PyCUDA backend too (marked ``gpu``; they skip cleanly without PyCUDA or a device).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import gramc
from gramc.errors import ArtifactFormatError, BackendUnavailableError, GramcError
from gramc.runtime.batch import advance_states
from gramc.bitmask import apply_bitmask, n_words, unpack_row
from gramc.runtime.cuda import emulation
from gramc.runtime.cuda.device import DeviceView
from gramc.runtime.cuda.source import SOURCE_FILES, device_source, kernel_specs, source_dir
from gramc.runtime.cuda.tables import DFAArrays, DeviceTables

NEG_INF_BITS = {"f32": 0xFF800000, "f16": 0xFC00, "bf16": 0xFF80}
STORAGE = {"f32": np.uint32, "f16": np.uint16, "bf16": np.uint16}
LOGIT_DTYPES = ("f32", "f16", "bf16")


# ---------------------------------------------------------------- nvcc


def _nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for root in ("/usr/local/cuda/bin/nvcc", *sorted(_glob("/usr/local/cuda-*/bin/nvcc"))):
        if os.path.exists(root):
            return root
    return None


def _glob(pattern: str) -> list[str]:
    import glob

    return glob.glob(pattern)


NVCC = _nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, /usr/local/cuda*/bin): "
                                "the PTX compile check needs the CUDA toolkit")


def _ptx(source_path: str, out, arch: str = "compute_80") -> str:
    ptx = out / (os.path.basename(source_path) + f".{arch}.ptx")
    proc = subprocess.run([NVCC, "-ptx", f"-arch={arch}", "-I", str(source_dir()), "-Werror",
                           "all-warnings", source_path, "-o", str(ptx)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return ptx.read_text()


@needs_nvcc
@pytest.mark.parametrize("filename", SOURCE_FILES)
def test_each_source_compiles_to_ptx(filename, tmp_path):
    text = _ptx(str(source_dir() / filename), tmp_path)
    entries = set(re.findall(r"\.entry\s+(\w+)", text))
    own = {name for name, spec in kernel_specs().items() if spec.source == filename}
    assert own and own <= entries


@needs_nvcc
@pytest.mark.parametrize("arch", ["compute_75", "compute_90"])
def test_device_translation_unit_compiles_to_ptx(arch, tmp_path):
    """The single source PyCUDA compiles (includes inlined) has every kernel."""
    src = tmp_path / "gramc_device.cu"
    src.write_text(device_source())
    text = _ptx(str(src), tmp_path, arch)
    assert set(re.findall(r"\.entry\s+(\w+)", text)) == set(kernel_specs())


def test_signatures_are_parsed():
    specs = kernel_specs()
    assert len(specs) == 11
    assert specs["gramc_apply_bitmask_bf16"].params == ("P", "q", "q", "i", "P", "P", "q", "q", "P")
    assert specs["gramc_dfa_advance_i64"].params == ("i", "P", "q", "P", "P", "P", "P", "P", "P")


# ---------------------------------------------------------------- backends


@pytest.fixture(scope="session")
def emulated_kernels(tmp_path_factory):
    if emulation.compiler() is None:
        pytest.skip("no C++ compiler (g++/clang++): the host emulation cannot be built")
    return emulation.build(tmp_path_factory.mktemp("cuda-emu"))


def _cuda_backend():
    from gramc.runtime.cuda import kernels

    try:
        return kernels.backend()
    except BackendUnavailableError as e:
        pytest.skip(f"no CUDA backend: {e}")


BACKENDS = [
    pytest.param("emulated", id="emulated"),
    pytest.param("emulated-reverse-small", id="emulated-reverse-small"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.gpu),
]


@pytest.fixture(params=BACKENDS)
def backend(request, emulated_kernels):
    if request.param == "emulated":
        return emulation.EmulatedBackend(emulated_kernels)
    if request.param == "emulated-reverse-small":
        return emulation.EmulatedBackend(emulated_kernels, reverse=True, block=32, max_grid=2)
    return _cuda_backend()


class Uploads:
    """Device copies that stay alive until the test ends (a freed buffer must not be launched)."""

    def __init__(self, backend):
        self.backend, self.keep = backend, []

    def __call__(self, host) -> int:
        """Upload ``host`` (None: a null pointer) and return the device address."""
        if host is None:
            return 0
        self.keep.append(self.backend.upload(host))
        return self.backend.ptr(self.keep[-1])


def _view(backend, dev, dtype=None, offset_elems=0, shape=None, strides=None) -> DeviceView:
    """A view into a device buffer (optionally a window of it, as another dtype code)."""
    v = backend.view(dev)
    item = np.dtype(STORAGE.get(dtype, np.uint32)).itemsize if dtype else None
    ptr = v.ptr + offset_elems * (item or dev.dtype.itemsize)
    return DeviceView(ptr, shape or v.shape, strides or v.strides, dtype or v.dtype)


# ---------------------------------------------------------------- references


def ref_apply(logits_bits, masks, mask_words, logit_rows, mask_rows, neg_inf):
    """The loop in bitmask.cu's header comment, on bit patterns."""
    out = logits_bits.copy()
    n = len(logit_rows) if logit_rows is not None else len(mask_rows) if mask_rows is not None else len(masks)
    width = out.shape[1]
    for i in range(n):
        lr = logit_rows[i] if logit_rows is not None else i
        mr = mask_rows[i] if mask_rows is not None else i
        allowed = np.zeros(width, bool) if mr < 0 else unpack_row(np.ascontiguousarray(masks[mr, :mask_words]), width)
        out[lr, ~allowed] = neg_inf
    return out


def _random_masks(rng, rows, words, density):
    bits = rng.random((rows, words * 32)) < density
    return np.packbits(bits, axis=1, bitorder="little").view("<u4").copy()


def _random_logits(rng, shape, dtype):
    values = rng.standard_normal(shape).astype(np.float32)
    if dtype == "f32":
        return values.view(np.uint32)
    if dtype == "f16":
        return values.astype(np.float16).view(np.uint16)
    return (values.view(np.uint32) >> 16).astype(np.uint16)  # bf16: the top half of fp32


# ---------------------------------------------------------------- kernel 1: apply bitmask


@pytest.mark.parametrize("dtype", LOGIT_DTYPES)
@pytest.mark.parametrize("seed", range(4))
def test_apply_bitmask_matches_reference(backend, dtype, seed):
    """Ragged widths (wider and narrower than the mask), strided rows, row maps, canaries."""
    rng = np.random.default_rng(seed)
    vocab = int(rng.integers(1, 200))
    W = n_words(vocab)
    width = int(rng.choice([vocab, vocab + int(rng.integers(1, 70)), max(1, vocab - 5), 32 * W]))
    n_logit_rows = int(rng.integers(1, 9))
    n = int(rng.integers(1, n_logit_rows + 1))
    pad = int(rng.integers(0, 5))
    stride = width + pad
    mask_stride = W + int(rng.integers(0, 3))
    masks = _random_masks(rng, int(rng.integers(n, n + 4)), mask_stride, rng.choice([0.05, 0.5, 0.95]))
    masks[:, W:] = 0xFFFFFFFF  # words past mask_words must never be read as allowing anything
    logit_rows = rng.permutation(n_logit_rows)[:n].astype(np.int32) if rng.random() < 0.6 else None
    mask_rows = rng.integers(-1, len(masks), size=n).astype(np.int32) if rng.random() < 0.6 else None
    if logit_rows is None:
        n = min(n, n_logit_rows)
    buf = _random_logits(rng, (n_logit_rows + 2, stride), dtype)  # a canary row above and below
    want = buf.copy()
    want[1:-1, :width] = ref_apply(buf[1:-1, :width], masks, W, logit_rows, mask_rows, NEG_INF_BITS[dtype])

    up = Uploads(backend)
    dev_buf = backend.upload(buf)
    view = _view(backend, dev_buf, dtype, offset_elems=stride, shape=(n_logit_rows, width), strides=(stride, 1))
    backend.apply_bitmask(view, n, up(masks), mask_stride, W, logit_rows=up(logit_rows), mask_rows=up(mask_rows))
    got = backend.download(dev_buf)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_apply_bitmask_equals_the_library_reference(backend, dtype):
    """Without maps, the kernel is gramc.bitmask.apply_bitmask on real float arrays."""
    rng = np.random.default_rng(7)
    vocab, width = 100, 131
    masks = _random_masks(rng, 5, n_words(vocab), 0.3)
    masks[:, -1] &= (1 << (vocab % 32)) - 1  # bits past the vocabulary are zero by layout
    np_dtype = np.float32 if dtype == "f32" else np.float16
    logits = rng.standard_normal((5, width)).astype(np_dtype)
    want = apply_bitmask(logits.copy(), masks)
    dev, up = backend.upload(logits), Uploads(backend)
    backend.apply_bitmask(backend.view(dev), 5, up(masks), masks.shape[1], masks.shape[1])
    got = backend.download(dev)
    assert np.array_equal(got.view(STORAGE[dtype]), want.view(STORAGE[dtype]))
    assert np.isneginf(got[~np.isfinite(got)]).all()


def test_bfloat16_pattern_is_negative_infinity():
    torch = pytest.importorskip("torch")
    t = torch.tensor([float("-inf")], dtype=torch.bfloat16)
    assert int(t.view(torch.int16).item()) & 0xFFFF == NEG_INF_BITS["bf16"]
    assert np.array([-np.inf], np.float16).view(np.uint16)[0] == NEG_INF_BITS["f16"]
    assert np.array([-np.inf], np.float32).view(np.uint32)[0] == NEG_INF_BITS["f32"]


def test_scatter_kernels(backend):
    rng = np.random.default_rng(3)
    src = rng.integers(0, 2**32, size=(4, 3), dtype=np.uint32)
    dst = np.full((7, 5), 0xABCDEF01, dtype=np.uint32)
    rows = np.array([6, 0, 3, 2], dtype=np.int32)
    want = dst.copy()
    want[rows, :3] = src
    want[rows, 3:] = 0
    d, up = backend.upload(dst), Uploads(backend)
    backend.scatter_bitmask_rows(backend.view(d), 4, up(rows), up(src), 3, 3)
    assert np.array_equal(backend.download(d), want)

    target = np.arange(10, dtype=np.int32)
    index, values = np.array([9, 2, 4], np.int32), np.array([-1, 7, 8], np.int32)
    t = backend.upload(target)
    backend.scatter_i32(3, up(index), up(values), backend.ptr(t))
    target[index] = values
    assert np.array_equal(backend.download(t), target)


# ---------------------------------------------------------------- DFA kernels

VOCAB = gramc.Vocab.from_list(
    [b"a", b"b", b"c", b"x", b"ab", b"abc", b"ca", b"xx", b"bc", b"cab", b"-", b"1", b"12", b"2"]
    + [bytes([0x41 + k]) for k in range(20)]  # 34 ordinary tokens: the mask is 2 words wide
    + [b"<s>", b"<eos>", b"<eot>"],
    special_ids=[34, 35, 36], eos_ids=[35, 36], name="kernels",
)
PATTERNS = ["(ab|c)+x?", "[abc]{2,6}", "a(b|c)*-?[12]+", "x|xx|xxx"]


@pytest.fixture(scope="module")
def dfa_arrays():
    return [DFAArrays.of(gramc.compile(p, vocab=VOCAB)) for p in PATTERNS]


def _slots_and_states(rng, arrays, capacity):
    table_of = rng.integers(0, len(arrays), size=capacity).astype(np.int32)
    states = np.array([rng.integers(-1, arrays[t].n_states) for t in table_of], dtype=np.int32)
    return table_of, states


def _upload_tables(backend, arrays, dense):
    tables = DeviceTables(backend, dense_budget=1 << 30 if dense else 0)
    for a in arrays:
        tables.add(a)
    return tables


@pytest.mark.parametrize("dense", [True, False], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", LOGIT_DTYPES)
@pytest.mark.parametrize("seed", range(3))
def test_dfa_apply_and_fill_match_gathered_rows(backend, dfa_arrays, dense, dtype, seed):
    rng = np.random.default_rng(seed)
    capacity, W = 9, n_words(VOCAB.size)
    table_of, states = _slots_and_states(rng, dfa_arrays, capacity)
    n = int(rng.integers(1, capacity + 1))
    slots = rng.permutation(capacity)[:n].astype(np.int32)
    masks = np.stack([dfa_arrays[table_of[s]].words[max(states[s], 0)] for s in slots])
    tables, up = _upload_tables(backend, dfa_arrays, dense), Uploads(backend)
    dev_states, dev_tables, dev_slots = up(states), up(table_of), up(slots)

    # fill: into a wider, slot-indexed buffer
    out = np.full((capacity, W + 2), 0x5A5A5A5A, dtype=np.uint32)
    want = out.copy()
    want[slots, :W], want[slots, W:] = masks, 0
    d = backend.upload(out)
    backend.dfa_fill_bitmask(backend.view(d), n, dev_slots, dev_slots, dev_states, dev_tables, tables.ptr)
    assert np.array_equal(backend.download(d), want)

    # apply: logits wider than the vocabulary, rows in order
    width = VOCAB.size + int(rng.integers(0, 40))
    logits = _random_logits(rng, (n, width), dtype)
    want = ref_apply(logits, masks, W, None, None, NEG_INF_BITS[dtype])
    d = backend.upload(logits)
    backend.dfa_apply(_view(backend, d, dtype), n, 0, dev_slots, dev_states, dev_tables, tables.ptr)
    assert np.array_equal(backend.download(d), want)


def _ref_advance(arrays, table_of, states, rows, slots, tokens):
    states = states.copy()
    accepted = np.zeros(len(tokens), dtype=np.uint8)
    for i, slot in enumerate(slots):
        r = rows[i] if rows is not None else i
        ok = advance_states(arrays[table_of[slot]], states, np.array([slot]), np.array([tokens[r]]))
        accepted[r] = ok[0]
    return states, accepted


@pytest.mark.parametrize("dense", [True, False], ids=["dense", "csr"])
@pytest.mark.parametrize("token_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("seed", range(4))
def test_dfa_advance_matches_reference(backend, dfa_arrays, dense, token_dtype, seed):
    rng = np.random.default_rng(seed)
    capacity = 12
    table_of, states = _slots_and_states(rng, dfa_arrays, capacity)
    n_tokens = capacity + 3
    n = int(rng.integers(1, capacity + 1))
    slots = rng.permutation(capacity)[:n].astype(np.int32)
    rows = rng.permutation(n_tokens)[:n].astype(np.int32) if rng.random() < 0.5 else None
    tokens = np.zeros(n_tokens, dtype=np.int64)
    for i, slot in enumerate(slots):  # mostly allowed tokens, some EOS, some junk
        r = rows[i] if rows is not None else i
        ids = dfa_arrays[table_of[slot]].ids[slice(*dfa_arrays[table_of[slot]].indptr[max(states[slot], 0):][:2])]
        pick = rng.random()
        tokens[r] = (rng.choice(ids) if len(ids) and pick < 0.6 else rng.choice([35, 36]) if pick < 0.8
                     else rng.integers(-3, VOCAB.size + 3))
    want_states, want_ok = _ref_advance(dfa_arrays, table_of, states, rows, slots, tokens)
    strided = rng.random() < 0.5
    host_tokens = np.repeat(tokens, 2).astype(token_dtype) if strided else tokens.astype(token_dtype)
    tables = _upload_tables(backend, dfa_arrays, dense)
    dev_states, dev_tok = backend.upload(states), backend.upload(host_tokens)
    accepted = backend.upload(np.full(n_tokens, 7, dtype=np.uint8))
    tv = backend.view(dev_tok)
    if strided:
        tv = DeviceView(tv.ptr, (n_tokens,), (2,), tv.dtype)
    up = Uploads(backend)
    backend.dfa_advance(tv, n, up(rows), up(slots), backend.ptr(dev_states), up(table_of), tables.ptr,
                        backend.ptr(accepted))
    got_ok = backend.download(accepted)
    assert np.array_equal(backend.download(dev_states), want_states)
    touched = rows if rows is not None else np.arange(n)
    assert np.array_equal(got_ok[touched], want_ok[touched])
    untouched = np.setdiff1d(np.arange(n_tokens), touched)
    assert (got_ok[untouched] == 7).all()


def test_advance_reference_agrees_with_the_matcher(dfa_arrays):
    """The numpy reference (searchsorted over CSR) is the per-sequence Matcher's transition."""
    for pattern, arrays in zip(PATTERNS, dfa_arrays):
        table = gramc.compile(pattern, vocab=VOCAB).token_table
        for q in range(arrays.n_states):
            toks = np.arange(VOCAB.size)
            got = arrays.next_states(np.full(VOCAB.size, q, np.int32), toks)
            assert got.tolist() == [table.next_state(q, int(t)) for t in toks]
            assert np.array_equal(arrays.dense_next()[q], got)


# ---------------------------------------------------------------- tables before upload


@pytest.mark.parametrize("lazy", [False, True])
def test_whole_table_accessors(lazy):
    art = gramc.compile(PATTERNS[2], vocab=VOCAB, lazy=lazy) if lazy else gramc.compile(PATTERNS[2], vocab=VOCAB)
    eager = gramc.compile(PATTERNS[2], vocab=VOCAB).token_table
    table = art.token_table
    words = table.packed_words()
    indptr, ids, nxt = table.csr()
    assert words.shape == (art.dfa.n_states, n_words(VOCAB.size)) and words.dtype == np.uint32
    for q in range(art.dfa.n_states):
        assert np.array_equal(words[q], eager.words(q))
        row_ids, row_next = eager.row(q)
        assert np.array_equal(ids[indptr[q]:indptr[q + 1]], row_ids)
        assert np.array_equal(nxt[indptr[q]:indptr[q + 1]], row_next)


def _tampered(arrays, **changes):
    fields = {f.name: getattr(arrays, f.name) for f in dataclasses.fields(arrays) if not f.name.startswith("_")}
    fields.update(changes)
    return DFAArrays(**fields)


def test_out_of_range_tables_never_reach_a_kernel(dfa_arrays, emulated_kernels):
    a = dfa_arrays[0]
    bad = {
        "token id": dict(ids=np.where(np.arange(len(a.ids)) == 0, VOCAB.size, a.ids).astype(np.int32)),
        "next state": dict(next=np.where(np.arange(len(a.next)) == 1, a.n_states, a.next).astype(np.int32)),
        "negative next": dict(next=np.where(np.arange(len(a.next)) == 1, -1, a.next).astype(np.int32)),
        "eos": dict(eos=np.array([VOCAB.size], np.int32)),
        "start": dict(start=a.n_states),
        "indptr": dict(indptr=np.concatenate([a.indptr[:-1], [a.indptr[-1] + 1]])),
        "unsorted ids": dict(ids=a.ids[::-1].copy()),
        "words width": dict(words=np.zeros((a.n_states, 1), np.uint32)),
        "accept length": dict(accept=a.accept[:-1]),
        "dead state": dict(accept=np.ones_like(a.accept)),
    }
    tables = DeviceTables(emulation.EmulatedBackend(emulated_kernels))
    for what, change in bad.items():
        with pytest.raises(ArtifactFormatError, match="refused before upload"):
            tables.add(_tampered(a, **change))
        assert len(tables) == 0, what
    tables.add(a)
    assert len(tables) == 1


# ---------------------------------------------------------------- import discipline and errors


def test_import_gramc_never_imports_pycuda():
    code = ("import sys, gramc, gramc.runtime.batch, gramc.runtime.cuda.kernels, "
            "gramc.runtime.cuda.engine, gramc.runtime.cuda.emulation; "
            "assert 'pycuda' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cuda_without_pycuda_says_what_to_install(monkeypatch):
    from gramc.runtime.batch import BatchMatcher
    from gramc.runtime.cuda import kernels

    monkeypatch.setitem(sys.modules, "pycuda", None)  # import pycuda -> ImportError
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    monkeypatch.setattr(kernels, "_backend", None)
    art = gramc.compile(PATTERNS[0], vocab=VOCAB)
    with pytest.raises(BackendUnavailableError, match=r"pip install gramc\[cuda\]") as info:
        BatchMatcher(art, 4, device="cuda")
    assert "PyCUDA" in str(info.value)


def test_unknown_device_is_refused():
    from gramc.runtime.batch import BatchMatcher

    with pytest.raises(gramc.GramcError, match="device must be"):
        BatchMatcher(gramc.compile(PATTERNS[0], vocab=VOCAB), 4, device="tpu")


def test_emulation_export_every_kernel(emulated_kernels):
    assert set(emulated_kernels._fns) == set(kernel_specs())
    with pytest.raises(TypeError, match="takes 4 arguments"):
        emulated_kernels.launch("gramc_scatter_i32", (1, 1, 1), (1, 1, 1), (0,))


# ---------------------------------------------------------------- the PyCUDA glue, on a stand-in


def _fake_pycuda(emulated_kernels, calls):
    """Modules named like PyCUDA's, over host memory, whose kernels run in the emulation.

    They implement only what gramc.runtime.cuda.kernels uses, with PyCUDA's signatures (checked
    against PyCUDA's source): enough to run the glue's own logic without a GPU. That the real
    PyCUDA behaves like this stand-in is what only the GPU-marked tests can show.
    """
    import ctypes
    import types

    class GPUArray:
        def __init__(self, host):
            self.host = np.ascontiguousarray(host)
            self.shape, self.dtype = self.host.shape, self.host.dtype
            self.gpudata = self.host.ctypes.data

        @property
        def __cuda_array_interface__(self):
            return {"shape": self.shape, "typestr": self.dtype.str, "strides": None,
                    "data": (self.host.ctypes.data, False), "version": 3}

        def get(self, ary=None, pagelocked=False, async_=False, stream=None):
            if ary is None:
                return self.host.copy()
            np.copyto(ary, self.host)
            return ary

    class Function:
        def __init__(self, name):
            self.name, self.fmt = name, None

        def prepare(self, fmt):
            self.fmt = fmt

        def prepared_call(self, grid, block, *args):
            assert self.fmt is not None and len(args) == len(self.fmt), (self.name, self.fmt, args)
            assert all(isinstance(a, int) for a in args) and len(grid) == 3 and len(block) == 3
            calls.append(self.name)
            emulated_kernels.launch(self.name, grid, block, args)

    class SourceModule:
        def __init__(self, source, nvcc="nvcc", options=None, keep=False, no_extern_c=False, **kw):
            assert no_extern_c and "#include" not in source and os.path.exists(nvcc)
            self.source = source

        def get_function(self, name):
            assert f"void {name}(" in self.source
            return Function(name)

    class Context:
        current = None

        @staticmethod
        def get_current():
            return Context.current

        @staticmethod
        def synchronize():
            pass

        def push(self):
            Context.current = self

        def pop(self):
            Context.current = None

    class Device:
        def __init__(self, i):
            self.i = i

        @staticmethod
        def count():
            return 1

        def retain_primary_context(self):
            return Context()

    def memcpy_htod(dst, src):
        ctypes.memmove(int(dst), src.ctypes.data, src.nbytes)

    driver = types.ModuleType("pycuda.driver")
    driver.init, driver.Device, driver.Context = (lambda: None), Device, Context
    driver.memcpy_htod, driver.pagelocked_zeros = memcpy_htod, lambda shape, dtype: np.zeros(shape, dtype)
    gpuarray = types.ModuleType("pycuda.gpuarray")
    gpuarray.GPUArray = GPUArray
    gpuarray.zeros = lambda shape, dtype: GPUArray(np.zeros(shape, dtype))
    gpuarray.to_gpu = lambda host: GPUArray(np.array(host, copy=True))
    compiler = types.ModuleType("pycuda.compiler")
    compiler.SourceModule = SourceModule
    package = types.ModuleType("pycuda")
    package.driver, package.gpuarray, package.compiler = driver, gpuarray, compiler
    return {"pycuda": package, "pycuda.driver": driver, "pycuda.gpuarray": gpuarray,
            "pycuda.compiler": compiler}


@needs_nvcc
def test_pycuda_glue_drives_a_batch(monkeypatch, emulated_kernels):
    """BatchMatcher(device='cuda') through kernels.PyCUDABackend, on the stand-in above."""
    from gramc.runtime.batch import BatchMatcher
    from gramc.runtime.cuda import kernels

    calls: list[str] = []
    modules = _fake_pycuda(emulated_kernels, calls)
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(kernels, "_backend", None)
    GPUArray = modules["pycuda.gpuarray"].GPUArray

    arts = [gramc.compile(p, vocab=VOCAB) for p in PATTERNS[:2]]
    arts.append(gramc.compile('root ::= "a" root "b" | "c"', format="gbnf", vocab=VOCAB))
    gpu, cpu = BatchMatcher(arts, 5, device="cuda"), BatchMatcher(arts, 5)
    assert gpu.device == "cuda"
    for batch in (gpu, cpu):
        for i, art in enumerate(arts + arts[:1]):
            batch.add(i, art)
    rng = np.random.default_rng(5)
    for _ in range(6):
        masks = gpu.fill_masks()
        assert isinstance(masks, GPUArray) and np.array_equal(masks.get(), cpu.fill_masks())
        host = rng.standard_normal((4, VOCAB.size + 9)).astype(np.float32)
        dev = GPUArray(host.copy())
        gpu.apply_masks(dev)
        cpu.apply_masks(host)
        assert np.array_equal(dev.get(), host)
        allowed = [np.flatnonzero(np.isfinite(row)) for row in host]
        tokens = np.array([rng.choice(a) if len(a) else 35 for a in allowed], dtype=np.int64)
        on_device = GPUArray(tokens) if rng.random() < 0.5 else tokens
        assert np.array_equal(gpu.commit(on_device), cpu.commit(tokens))
    assert {"gramc_dfa_fill_bitmask", "gramc_dfa_apply_f32", "gramc_dfa_advance_i64",
            "gramc_apply_bitmask_f32", "gramc_scatter_bitmask_rows", "gramc_scatter_i32"} <= set(calls)
    with pytest.raises(GramcError, match="use device='cpu'"):
        gpu.apply_masks(np.zeros((4, VOCAB.size), np.float32))
