"""OpenMDAO components wrapping workbench responses (see issue: OpenMDAO components)."""
