"""cprofile (tracer): every Python function call of the target, with cProfile.

Writes `artifacts/cprofile.prof`, which `pstats.Stats`, SnakeViz (`profile-all view RUN`)
and gprof2dot open. Its rows are read back from that file, so a run and `profile-all
ingest` of the same file give the same rows.
"""

from __future__ import annotations

import cProfile

from profile_all.backends.base import Artifact, Backend, Collected, PassContext
from profile_all.fileio import atomic_path
from profile_all.ingest.pstats_reader import read_pstats


class CProfile(Backend):
    name = "cprofile"
    kind = "tracer"
    measures = "calls, self and cumulative time of every Python function"
    native_file = "cprofile.prof (SnakeViz: profile-all view RUN)"

    def start(self, ctx: PassContext) -> None:
        self._profile = cProfile.Profile()
        self._profile.enable()

    def stop(self, ctx: PassContext) -> None:
        self._profile.disable()

    def collect(self, ctx: PassContext) -> Collected:
        path = ctx.artifact_path("cprofile.prof")
        with atomic_path(path) as tmp:
            self._profile.dump_stats(tmp)
        artifact = Artifact(self.name, str(path.relative_to(ctx.artifacts_dir.parent)),
                            "SnakeViz", "profile-all view {run_dir}")
        return Collected(read_pstats(path), [artifact])
