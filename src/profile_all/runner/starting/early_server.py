"""The fork server of a `profile-all run` or `model` command, started as the command starts.

A run's passes wait for the fork server's `import torch` (1 s and more on a small
machine, torch._dynamo another second). The server starts once the command line is read,
the backends are chosen and the target is checked, 0.25 s into the command (the CLI's
own imports, Typer's and Rich's, are most of it). So the command's entry point starts one
first, with `import torch` alone, as a guess that the run will want it; the run takes it
(`take`), tells it the rest of its modules and waits for it as for any other. Where the
guess was wrong (the run forks nothing, or its passes import something else first, or
their environment differs, or the command is refused), the server is ended unused: it had
run nothing but its imports.

Measured gain: a default run of the demo (train_mlp.py --steps 100), whole commands,
medians (scripts/bench/process_tricks.py, 3 rounds, one thread, 2-core VM, 2026-11-28):
3.19 s against 3.26 s started once the run is set up, 0.07 s (0.11 s in a first round);
small, and kept for it: the first pass of every run waits for that import.
"""

from __future__ import annotations

from profile_all.runner.starting import kept_servers
from profile_all.runner.starting.server_handle import ForkServer, fork_available, worker_env

#: what every pass imports first wherever a pass imports torch: the guess's modules
FIRST = ["torch"]
#: the commands whose runs fork their passes from a server
COMMANDS = ("run", "model")
#: options after which no pass is forked from a server
UNFORKED = ("--fresh-processes", "--nproc-per-node", "--nnodes", "--help")

_early: ForkServer | None = None


def start_for(argv: list[str]) -> None:
    """Start the server now when `argv` (the command's, without the program) is a run that
    will likely fork its passes from one."""
    global _early
    own = argv[:argv.index("--")] if "--" in argv else argv
    if not own or own[0] not in COMMANDS or not fork_available() or any(
            option.split("=")[0] in UNFORKED for option in own) or _repeated(own) \
            or kept_servers.holding():  # the run likely takes the one kept (pa.keep_servers)
        return
    _early = ForkServer(FIRST, worker_env(), more_later=True)


def _repeated(own: list[str]) -> bool:
    """`run --repeat N`, N > 1: its timing passes start in fresh interpreters and the
    others in windows of the first one's steps, so that the run starts a server only where
    a pass asks for one (orchestrator._server)."""
    for place, option in enumerate(own):
        name, _, value = option.partition("=")
        if name == "--repeat":
            value = value or (own[place + 1] if place + 1 < len(own) else "")
            return own[0] == "run" and value.isdigit() and int(value) > 1
    return False


def take(modules: list[str], env: dict[str, str]) -> ForkServer | None:
    """The server started early, told to import the rest of `modules`, where it began as a
    server of `modules` in `env` would have; else None (and it is ended)."""
    global _early
    early, _early = _early, None
    if early is None:
        return None
    if modules[:len(FIRST)] != FIRST or early.env != env:
        early.close()
        return None
    try:
        early.import_more(modules[len(FIRST):])
    except OSError:  # it is gone already (killed as it started): a new one then
        early.close()
        return None
    return early


def discard() -> None:
    """End a server started early that no run took (the command ended before it ran)."""
    global _early
    early, _early = _early, None
    if early is not None:
        early.close()
