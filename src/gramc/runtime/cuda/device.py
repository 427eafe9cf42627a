"""What the device path needs from a backend, and the kernel launches written once on top.

A :class:`Backend` owns memory (allocate, upload, download, pinned host buffers), wraps
caller arrays as :class:`DeviceView` (pointer, shape, element strides, dtype) and launches a
kernel by name. Two backends exist: PyCUDA on a real GPU
(:class:`gramc.runtime.cuda.kernels.PyCUDABackend`) and the host emulation used by the tests
(:class:`gramc.runtime.cuda.emulation.EmulatedBackend`). The launch geometry and argument
order of every kernel live here, shared by both, so the emulated tests exercise them too.

Nothing here imports pycuda or torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gramc.errors import GramcError

#: Element kinds of logits the kernels handle, by dtype code.
LOGIT_KERNELS = {"f32": "f32", "f16": "f16", "bf16": "bf16"}

_NUMPY_CODES = {"<f4": "f32", "<f2": "f16", "<u4": "u32", "<i4": "i32", "<i8": "i64", "|u1": "u8",
                "|b1": "u8", "<u2": "u16"}
_TORCH_CODES = {"torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16",
                "torch.int32": "i32", "torch.int64": "i64", "torch.uint8": "u8", "torch.bool": "u8",
                "torch.uint32": "u32"}
_ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "u32": 4, "i32": 4, "i64": 8, "u8": 1, "u16": 2}


@dataclass(frozen=True)
class DeviceView:
    """A caller's array as the kernels see it: address, shape, strides in elements, dtype code."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str

    @property
    def rows(self) -> int:
        return self.shape[0] if len(self.shape) == 2 else 1

    @property
    def width(self) -> int:
        return self.shape[-1] if self.shape else 1

    @property
    def row_stride(self) -> int:
        return self.strides[0] if len(self.shape) == 2 else self.width

    def as_matrix(self, what: str) -> "DeviceView":
        """This view as rows of contiguous elements (a 1-d array is one row)."""
        if len(self.shape) not in (1, 2):
            raise GramcError(f"{what} must be 1-d or 2-d, got shape {list(self.shape)}")
        if self.width > 1 and self.strides[-1] != 1 and 0 not in self.shape:
            raise GramcError(f"{what} rows must be contiguous (last stride 1), got strides {list(self.strides)}")
        if len(self.shape) == 1:
            return DeviceView(self.ptr, (1, self.width), (self.width, 1), self.dtype)
        return self


def _is_torch(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "data_ptr")


def _torch_view(t: Any) -> DeviceView:
    code = _TORCH_CODES.get(str(t.dtype))
    if code is None:
        raise GramcError(f"unsupported tensor dtype {t.dtype}")
    return DeviceView(int(t.data_ptr()), tuple(t.shape), tuple(t.stride()), code)


def _interface_view(iface: dict, what: str) -> DeviceView:
    typestr = iface["typestr"]
    code = _NUMPY_CODES.get(typestr)
    if code is None:
        raise GramcError(f"{what}: unsupported element type {typestr!r}")
    shape = tuple(int(s) for s in iface["shape"])
    itemsize = np.dtype(typestr).itemsize
    if iface.get("strides") is None:
        strides = tuple(int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape)))
    else:
        byte_strides = tuple(int(s) for s in iface["strides"])
        if any(s % itemsize for s in byte_strides):
            raise GramcError(f"{what}: strides {byte_strides} are not whole elements")
        strides = tuple(s // itemsize for s in byte_strides)
    return DeviceView(int(iface["data"][0]), shape, strides, code)


def host_view(obj: Any) -> DeviceView:
    """A numpy array or CPU torch tensor as a view (the host emulation's "device" arrays)."""
    if _is_torch(obj):
        if obj.device.type != "cpu":
            raise GramcError(f"the host emulation needs CPU tensors, got one on {obj.device}")
        return _torch_view(obj)
    if isinstance(obj, np.ndarray):
        code = "bf16" if obj.dtype.name == "bfloat16" else _NUMPY_CODES.get(obj.dtype.str)
        if code is None:
            raise GramcError(f"unsupported array dtype {obj.dtype}")
        strides = tuple(s // obj.itemsize for s in obj.strides)
        return DeviceView(int(obj.ctypes.data), tuple(obj.shape), strides, code)
    raise GramcError(f"expected a numpy array or a CPU torch tensor, got {type(obj).__name__}")


def cuda_view(obj: Any) -> DeviceView:
    """A device array as a view, without copying: a CUDA torch tensor (any dtype, bf16 too),
    anything with ``__cuda_array_interface__`` (CuPy, Numba, PyCUDA ``GPUArray``)."""
    if _is_torch(obj):
        if not obj.is_cuda:
            raise GramcError(f"expected a CUDA tensor, got one on {obj.device} (use device='cpu' for host arrays)")
        return _torch_view(obj)
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is not None:
        return _interface_view(iface, type(obj).__name__)
    raise GramcError(
        f"expected a CUDA array (torch tensor, CuPy array or PyCUDA GPUArray), got {type(obj).__name__}"
    )


class Backend:
    """Device memory and kernel launches; subclasses supply the memory and ``launch``.

    Args:
        block: threads per block.
        max_grid: blocks per grid dimension at most (the kernels loop over the rest).
    """

    name = "abstract"

    def __init__(self, block: int = 256, max_grid: int = 65535):
        if block < 1 or max_grid < 1:
            raise ValueError("block and max_grid must be >= 1")
        self.block = block
        self.max_grid = max_grid

    # ------------------------------------------------------------ memory (subclasses)

    def alloc(self, shape, dtype) -> Any:
        """A zeroed device array."""
        raise NotImplementedError

    def upload(self, host: np.ndarray) -> Any:
        """A new device array holding a copy of ``host``."""
        raise NotImplementedError

    def copy_to_device(self, dst: Any, host: np.ndarray) -> None:
        """Copy ``host`` (C-contiguous) into the start of device array ``dst``."""
        raise NotImplementedError

    def download(self, src: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Device array to host (into ``out`` when given)."""
        raise NotImplementedError

    def pinned(self, shape, dtype) -> np.ndarray:
        """A page-locked host array (fast, asynchronous uploads)."""
        raise NotImplementedError

    def view(self, obj: Any) -> DeviceView:
        """A caller's array as a :class:`DeviceView` (no copy)."""
        raise NotImplementedError

    def is_device_array(self, obj: Any) -> bool:
        """Does ``obj`` live where this backend's kernels can read it?"""
        raise NotImplementedError

    def launch(self, name: str, grid: tuple[int, int, int], block: tuple[int, int, int],
               args: tuple) -> None:
        raise NotImplementedError

    def synchronize(self) -> None:
        raise NotImplementedError

    def ptr(self, arr: Any) -> int:
        """The address of one of this backend's arrays (0 for None)."""
        return 0 if arr is None else self.view(arr).ptr

    # ------------------------------------------------------------ geometry

    def _grid(self, cols: int, rows: int = 1) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        bx = min(max(1, -(-cols // self.block)), self.max_grid)
        return (bx, min(max(1, rows), self.max_grid), 1), (self.block, 1, 1)

    # ------------------------------------------------------------ kernels

    def apply_bitmask(self, logits: DeviceView, n_rows: int, mask: int, mask_stride: int,
                      mask_words: int, logit_rows: int = 0, mask_rows: int = 0) -> None:
        """Kernel 1: -inf where the packed mask disallows (see ``bitmask.cu``)."""
        if n_rows:
            grid, block = self._grid(logits.width, n_rows)
            self.launch(f"gramc_apply_bitmask_{_logit_kind(logits)}", grid, block,
                        (logits.ptr, logits.row_stride, logits.width, n_rows, logit_rows, mask,
                         mask_stride, mask_words, mask_rows))

    def scatter_bitmask_rows(self, dst: DeviceView, n_rows: int, dst_rows: int, src: int,
                             src_stride: int, src_words: int) -> None:
        """Copy mask rows into ``dst`` (rows ``dst_rows[i]``), zero-padding each row."""
        if n_rows:
            grid, block = self._grid(dst.width, n_rows)
            self.launch("gramc_scatter_bitmask_rows", grid, block,
                        (dst.ptr, dst.row_stride, dst.width, n_rows, dst_rows, src, src_stride,
                         src_words))

    def scatter_i32(self, n: int, index: int, values: int, dst: int) -> None:
        """``dst[index[i]] = values[i]`` on the device."""
        if n:
            grid, block = self._grid(n)
            self.launch("gramc_scatter_i32", grid, block, (n, index, values, dst))

    def dfa_apply(self, logits: DeviceView, n_rows: int, logit_rows: int, slots: int, states: int,
                  table_of: int, tables: int) -> None:
        """Kernel 2a: each row's DFA mask gathered straight into its logits row."""
        if n_rows:
            grid, block = self._grid(logits.width, n_rows)
            self.launch(f"gramc_dfa_apply_{_logit_kind(logits)}", grid, block,
                        (logits.ptr, logits.row_stride, logits.width, n_rows, logit_rows, slots,
                         states, table_of, tables))

    def dfa_fill_bitmask(self, out: DeviceView, n_rows: int, out_rows: int, slots: int,
                         states: int, table_of: int, tables: int) -> None:
        """Kernel 2b: each row's DFA mask gathered into a packed bitmask buffer."""
        if n_rows:
            grid, block = self._grid(out.width, n_rows)
            self.launch("gramc_dfa_fill_bitmask", grid, block,
                        (out.ptr, out.row_stride, out.width, n_rows, out_rows, slots, states,
                         table_of, tables))

    def dfa_advance(self, tokens: DeviceView, n_rows: int, rows: int, slots: int, states: int,
                    table_of: int, tables: int, accepted: int) -> None:
        """Kernel 2c: advance each row's DFA state by its token (int32 or int64 tokens)."""
        if tokens.dtype not in ("i32", "i64"):
            raise GramcError(f"tokens must be int32 or int64, got {tokens.dtype}")
        if n_rows:
            grid, block = self._grid(n_rows)
            stride = tokens.strides[0] if tokens.strides else 1
            self.launch(f"gramc_dfa_advance_{tokens.dtype}", grid, block,
                        (n_rows, tokens.ptr, stride, rows, slots, states, table_of, tables,
                         accepted))


def _logit_kind(view: DeviceView) -> str:
    kind = LOGIT_KERNELS.get(view.dtype)
    if kind is None:
        raise GramcError(f"logits must be float32, float16 or bfloat16, got {view.dtype}")
    return kind
