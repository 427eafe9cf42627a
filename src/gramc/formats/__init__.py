"""gramc.formats."""
