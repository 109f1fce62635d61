"""Benchmarks of the engine (scripts, not tests): ``python -m integration.bench.<name>``."""
