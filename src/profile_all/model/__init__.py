"""Benchmarking a model: building it from a SPEC, timing it, finding its best batch."""
