"""Running a target: the plan of passes, each pass in its process, and the run folder."""
