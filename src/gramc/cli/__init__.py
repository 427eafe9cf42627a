"""gramc.cli."""
