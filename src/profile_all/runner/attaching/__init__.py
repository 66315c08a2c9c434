"""`profile-all attach PID`: a process that is already running, profiled without harm."""
