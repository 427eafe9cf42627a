"""gramc.runtime."""
