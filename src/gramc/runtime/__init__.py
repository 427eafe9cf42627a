"""The runtime: load artifacts and drive matchers. Never imports the compiler."""

import sys

from gramc import bitmask
from gramc.runtime.artifact import Artifact
from gramc.runtime.matcher import DFAMatcher, Matcher
from gramc.runtime.reader import from_bytes, load

# The bitmask layout moved to gramc.bitmask (the automata below the runtime need it too);
# gramc.runtime.bitmask was documented, so it stays importable as the same module.
sys.modules[f"{__name__}.bitmask"] = bitmask

__all__ = ["Artifact", "Matcher", "DFAMatcher", "load", "from_bytes"]
