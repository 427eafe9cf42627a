"""gramc: a grammar compiler for constrained decoding."""

__version__ = "0.1.0"
