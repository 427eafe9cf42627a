"""The PyCUDA backend: gramc's kernels on a real GPU.

PyCUDA is imported here lazily, on the first :func:`backend` call, never by ``import gramc``.
The kernel sources (``bitmask.cu``, ``dfa.cu``) are compiled once per process with
``SourceModule`` on first use (PyCUDA also caches the cubin on disk), on the device's primary
context, the one torch and CuPy use, so their tensors can be passed straight in.

Arrays cross without copies: CUDA torch tensors (float32, float16, bfloat16) through
``data_ptr()``, and anything exposing ``__cuda_array_interface__`` (CuPy, Numba, PyCUDA's own
``GPUArray``). Kernels run on PyCUDA's current stream (the legacy default stream unless
``stream=`` is given), which orders them with torch's default stream.

The reference semantics of every kernel are the numpy loops quoted in the ``.cu`` files and
:mod:`gramc.bitmask`; tests/test_cuda_kernels.py checks the same source on the host.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from gramc.errors import BackendUnavailableError
from gramc.runtime.cuda.device import Backend, DeviceView, cuda_view
from gramc.runtime.cuda.source import device_source, kernel_specs

INSTALL_HINT = "install the CUDA extra: pip install gramc[cuda]"

_lock = threading.Lock()
_backend: "PyCUDABackend | None" = None


def _import_pycuda():
    try:
        import pycuda.driver as drv
    except ImportError as e:  # pycuda missing, or its extension cannot load libcuda
        raise BackendUnavailableError(
            f"device='cuda' needs PyCUDA, which could not be imported ({e}); {INSTALL_HINT} "
            "(it needs the CUDA toolkit and an NVIDIA driver)"
        ) from e
    try:
        drv.init()
        count = drv.Device.count()
    except Exception as e:  # pycuda raises its own error classes for driver failures
        raise BackendUnavailableError(f"device='cuda': the CUDA driver did not start ({e})") from e
    if count == 0:
        raise BackendUnavailableError("device='cuda': no CUDA device found")
    return drv


def find_nvcc() -> str:
    """nvcc on PATH, else in $CUDA_HOME/bin or /usr/local/cuda*/bin (PyCUDA compiles with it)."""
    import glob
    import os
    import shutil

    found = shutil.which("nvcc")
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda",
             *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    for root in roots:
        path = os.path.join(root, "bin", "nvcc")
        if root and os.path.exists(path):
            return path
    raise BackendUnavailableError("device='cuda' compiles its kernels with nvcc, which was not found "
                                  "(PATH, $CUDA_HOME/bin, /usr/local/cuda*/bin): install the CUDA toolkit")


def backend(device_id: int = 0) -> "PyCUDABackend":
    """The process-wide PyCUDA backend (created on first call; kernels compile on first use).

    Raises:
        BackendUnavailableError: PyCUDA is not installed, no driver, or no device.
    """
    global _backend
    with _lock:
        if _backend is None:
            _backend = PyCUDABackend(device_id)
        return _backend


class PyCUDABackend(Backend):
    """Device memory through ``pycuda.gpuarray`` and kernels through prepared calls."""

    name = "cuda"

    def __init__(self, device_id: int = 0, stream: Any = None):
        super().__init__()
        drv = _import_pycuda()
        self._drv = drv
        ctx = drv.Context.get_current()
        if ctx is None:  # share the primary context with torch / CuPy
            ctx = drv.Device(device_id).retain_primary_context()
            ctx.push()
            import atexit

            atexit.register(_pop_context, ctx)
        self.context = ctx
        self.stream = stream
        self._functions: dict[str, Any] | None = None
        from pycuda import gpuarray

        self._gpuarray = gpuarray

    # ------------------------------------------------------------ compile (once)

    def _compile(self) -> dict[str, Any]:
        from pycuda.compiler import SourceModule

        try:
            module = SourceModule(device_source(), nvcc=find_nvcc(), no_extern_c=True)
        except Exception as e:  # nvcc missing or a compile error: say so with the log
            raise BackendUnavailableError(f"device='cuda': compiling gramc's kernels failed: {e}") from e
        functions = {}
        for name, spec in kernel_specs().items():
            fn = module.get_function(name)
            fn.prepare("".join(spec.params))
            functions[name] = fn
        self._module = module  # keep the module loaded
        return functions

    def launch(self, name: str, grid, block, args) -> None:
        if self._functions is None:
            self._functions = self._compile()
        fn = self._functions[name]
        args = tuple(int(a) for a in args)
        if self.stream is None:
            fn.prepared_call(grid, block, *args)
        else:
            fn.prepared_async_call(grid, block, self.stream, *args)

    def synchronize(self) -> None:
        if self.stream is None:
            self.context.synchronize()
        else:
            self.stream.synchronize()

    # ------------------------------------------------------------ memory

    def alloc(self, shape, dtype):
        return self._gpuarray.zeros(shape, dtype=dtype)

    def upload(self, host: np.ndarray):
        return self._gpuarray.to_gpu(np.ascontiguousarray(host))

    def copy_to_device(self, dst, host: np.ndarray) -> None:
        host = np.ascontiguousarray(host)
        if self.stream is None:
            self._drv.memcpy_htod(int(dst.gpudata), host)
        else:
            self._drv.memcpy_htod_async(int(dst.gpudata), host, self.stream)

    def download(self, src, out: np.ndarray | None = None) -> np.ndarray:
        if self.stream is None:
            return src.get(ary=out)
        got = src.get_async(stream=self.stream, ary=out)
        self.stream.synchronize()
        return got

    def pinned(self, shape, dtype) -> np.ndarray:
        return self._drv.pagelocked_zeros(shape, dtype)

    def view(self, obj) -> DeviceView:
        return cuda_view(obj)

    def is_device_array(self, obj) -> bool:
        if type(obj).__module__.split(".")[0] == "torch":
            return bool(getattr(obj, "is_cuda", False))
        return hasattr(obj, "__cuda_array_interface__")


def _pop_context(ctx) -> None:
    try:
        ctx.pop()
    except Exception:  # the interpreter is exiting; the driver cleans up
        pass
