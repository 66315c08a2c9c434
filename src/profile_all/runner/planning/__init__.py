"""Before anything runs: the run's arguments checked, the passes planned, what each is told."""
