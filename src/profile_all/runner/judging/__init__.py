"""After the passes: how each ended, what the run's numbers are worth (overheads, doubts),
and the run's Report."""
