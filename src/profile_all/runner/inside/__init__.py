"""Inside a pass's process: the worker, the pass's run, its steps."""
