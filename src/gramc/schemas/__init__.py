"""gramc.schemas."""
