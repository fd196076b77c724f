"""Checkpoints: one `.ait` file per saved object (docs/reference/checkpoint.md)."""
