"""Dense, numpy-only automata and vocabulary binding, shared by the compiler and the runtime.

This package sits below both: the compiler builds these tables, the runtime loads and binds
them (an unbound artifact, or lazy mode, binds at run time), and neither needs the other.
"""
