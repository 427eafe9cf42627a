"""numba, or a :class:`~gramc.errors.BackendUnavailableError` that names the extra bringing it.

The token walks run compiled with numba: binding a compile to a vocabulary (an unbound
artifact's too, when it is loaded with one), and, at run time, the artifacts that walk tokens
as they decode (PDA artifacts check the tokens that cross a rule boundary on the stack;
counted artifacts walk their counters). A bound DFA artifact's masks are stored rows and need
no walk, so the runtime-only install (``pip install gramc``) leaves numba out; ``gramc[numba]`` and ``gramc[compile]`` bring it. The modules that compile kernels
import it from here (``from gramc.automata.jit import numba``): where it is missing, the first
walk says what to install instead of failing on an ``ImportError`` deep inside.
"""

from __future__ import annotations

from gramc.errors import BackendUnavailableError

try:
    import numba
except ImportError as e:
    raise BackendUnavailableError(
        "walking tokens through a vocabulary (binding a compile, or decoding with a PDA or "
        "counted artifact) needs numba, "
        "which the runtime-only install of gramc leaves out: pip install 'gramc[numba]' "
        "(or 'gramc[compile]', which includes it)") from e

__all__ = ["numba"]
