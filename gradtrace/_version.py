"""The package's version: one literal, which pyproject.toml reads too (importing
importlib.metadata to look it up cost `gradtrace --help` a sixth of its time)."""

__version__ = "0.1.0"
