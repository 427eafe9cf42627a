"""gramc.integrations."""
