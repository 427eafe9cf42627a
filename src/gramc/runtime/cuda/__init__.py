"""gramc.runtime.cuda."""
