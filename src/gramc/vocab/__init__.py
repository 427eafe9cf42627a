"""gramc.vocab."""
