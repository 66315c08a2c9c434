"""The memory backend: a sampler process, line-by-line memory, mprofile.dat."""
