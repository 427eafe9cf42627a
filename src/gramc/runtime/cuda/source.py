"""The CUDA C sources of gramc's kernels and their parsed signatures.

The ``.cu`` files beside this module are the single source of the kernels: the PyCUDA backend
compiles them for the device, and the host emulation (:mod:`gramc.runtime.cuda.emulation`)
compiles the same files as C++ for the tests. Both launch a kernel by name with the argument
types parsed here from its ``extern "C" __global__`` declaration, so a signature change in
the source cannot silently desynchronise the two.

>>> sorted(kernel_specs())[:3]
['gramc_apply_bitmask_bf16', 'gramc_apply_bitmask_f16', 'gramc_apply_bitmask_f32']
>>> kernel_specs()["gramc_scatter_i32"].params
('i', 'P', 'P', 'P')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

#: The kernel sources, in dependency order (dfa.cu includes bitmask.cu).
SOURCE_FILES = ("bitmask.cu", "dfa.cu")

#: The file the device module is compiled from (it includes every other source).
MAIN_SOURCE = "dfa.cu"

_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', re.S)


@dataclass(frozen=True)
class KernelSpec:
    """A kernel's name, source file and parameter kinds.

    ``params`` holds one PyCUDA ``prepare`` code per parameter: ``"P"`` (any pointer),
    ``"i"`` (int) or ``"q"`` (long long).
    """

    name: str
    source: str
    params: tuple[str, ...]


def source_dir() -> Path:
    """The directory holding the ``.cu`` files."""
    return Path(__file__).resolve().parent


def read_source(name: str = MAIN_SOURCE) -> str:
    """The text of one kernel source file."""
    return (source_dir() / name).read_text(encoding="utf-8")


def device_source() -> str:
    """One self-contained translation unit for the device: every source, includes inlined.

    Includes of gramc's own files are dropped (each file is already in the text, in
    dependency order); the emulation shim include sits under ``#ifdef GRAMC_HOST_EMULATION``
    and is dropped too. A source without ``#include`` lets PyCUDA hash it for its compile
    cache without running the preprocessor.
    """
    parts = []
    for filename in SOURCE_FILES:
        lines = read_source(filename).splitlines()
        parts.append("\n".join(ln for ln in lines if not ln.lstrip().startswith("#include")))
    return "\n".join(parts) + "\n"


def _param_code(decl: str) -> str:
    decl = " ".join(decl.split())
    if "*" in decl:
        return "P"
    words = decl.split()[:-1]  # drop the parameter name
    kind = " ".join(w for w in words if w != "const")
    codes = {"int": "i", "long long": "q"}
    if kind not in codes:
        raise ValueError(f"kernel parameter {decl!r}: only pointers, int and long long are allowed")
    return codes[kind]


@cache
def kernel_specs() -> dict[str, KernelSpec]:
    """Every kernel declared in :data:`SOURCE_FILES`, by name."""
    specs: dict[str, KernelSpec] = {}
    for filename in SOURCE_FILES:
        for m in _KERNEL.finditer(read_source(filename)):
            params = tuple(_param_code(p) for p in m.group(2).split(",") if p.strip())
            specs[m.group(1)] = KernelSpec(m.group(1), filename, params)
    return specs
