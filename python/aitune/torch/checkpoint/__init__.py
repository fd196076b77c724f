"""Checkpoints: one `.ait` file per saved object (SPEC §10)."""
