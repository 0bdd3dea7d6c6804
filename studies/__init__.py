"""Optimisation studies built on the workbench."""
