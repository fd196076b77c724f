"""Helpers around external libraries, at AITune's import paths (docs/guide.md, "Coming from AITune")."""
