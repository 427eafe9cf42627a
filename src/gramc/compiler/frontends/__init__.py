"""gramc.compiler.frontends."""
