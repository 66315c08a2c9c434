"""How a pass's worker is started: by itself, or on torch's own launcher for several ranks.

With several ranks, every pass is `python -m torch.distributed.run [options] -m
profile_all.runner.inside.worker SPEC`: torchrun sets RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR, ... as it would for `torchrun train.py`, each rank's worker runs the pass's
backends around the target and writes its own result, and torchrun's failure handling (one
rank fails: the others are stopped with SIGTERM) ends the pass. `--max-restarts` stays 0:
a restarted rank would measure its work twice.
"""

from __future__ import annotations

import re
import sys
from dataclasses import asdict, dataclass

from profile_all import validate
from profile_all.errors import UsageError

_NPROC_WORDS = ("auto", "cpu", "gpu")


@dataclass
class Launch:
    nproc_per_node: str = "1"
    nnodes: str = "1"
    node_rank: int | None = None
    rdzv_endpoint: str | None = None
    rdzv_backend: str = "c10d"
    rdzv_id: str = "profile-all"

    @property
    def distributed(self) -> bool:
        return self.nproc_per_node != "1" or self.nnodes != "1"

    @property
    def several_nodes(self) -> bool:
        return self.nnodes != "1"

    def validate(self) -> None:
        if not (self.nproc_per_node in _NPROC_WORDS
                or (self.nproc_per_node.isdigit() and int(self.nproc_per_node) >= 1)):
            raise validate.ArgumentValueError(
                "nproc_per_node (--nproc-per-node) wants a positive integer or auto, cpu, gpu; "
                             f"got {self.nproc_per_node!r}")
        if not re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", self.nnodes):
            raise UsageError(f"--nnodes wants N or MIN:MAX, got {self.nnodes!r}")
        if self.several_nodes and not self.rdzv_endpoint:
            raise UsageError("several nodes need --rdzv-endpoint HOST:PORT (the same on "
                             "every node)")
        if self.node_rank is not None and self.node_rank < 0:
            raise UsageError(f"--node-rank must be >= 0, got {self.node_rank}")

    def local_world_size(self) -> int:
        """The number of ranks on this node, as torchrun resolves `auto`, `cpu`, `gpu`."""
        if self.nproc_per_node.isdigit():
            return int(self.nproc_per_node)
        from torch.distributed.run import determine_local_world_size

        try:
            return determine_local_world_size(self.nproc_per_node)
        except ValueError as error:
            raise UsageError(f"--nproc-per-node {self.nproc_per_node}: {error}") from None

    def argv(self, pass_index: int, worker: list[str]) -> list[str]:
        """torchrun's command for one pass; `worker` is
        `-m profile_all.runner.inside.worker SPEC`."""
        argv = [sys.executable, "-m", "torch.distributed.run",
                f"--nproc-per-node={self.nproc_per_node}", f"--nnodes={self.nnodes}",
                "--max-restarts=0"]
        if self.rdzv_endpoint:
            # each pass is a rendezvous of its own: the same id on every node, not reused
            argv += [f"--rdzv-backend={self.rdzv_backend}",
                     f"--rdzv-endpoint={self.rdzv_endpoint}",
                     f"--rdzv-id={self.rdzv_id}-pass{pass_index}"]
            if self.node_rank is not None:
                argv.append(f"--node-rank={self.node_rank}")
        else:
            argv.append("--standalone")
        return argv + worker

    def to_meta(self) -> dict:
        return asdict(self)
