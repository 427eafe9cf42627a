"""The runtime: load artifacts and drive matchers. Never imports the compiler."""

from gramc.runtime.artifact import Artifact, from_bytes, load
from gramc.runtime.matcher import DFAMatcher, Matcher

__all__ = ["Artifact", "Matcher", "DFAMatcher", "load", "from_bytes"]
