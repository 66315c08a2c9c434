"""`%load_ext profile_all`, then a cell that starts with `%%profile_all [options]`: the
cell's code is written to a script and profiled by `profile-all run`, with the options of
the magic's line as on the command line (`-b wallclock -b cprofile --timeout 60`, and
`-- ARGS` for the script's own arguments); its progress shows in the cell as it runs, and
the cell's value is the Report, which displays itself.

The cell runs as a script, in the passes' processes: the notebook's variables are not the
script's, and what the script defines does not come back to the notebook (only the
report does). Without `-o` the run goes to a temporary folder (its path is said).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from profile_all.errors import UsageError
from profile_all.render.notebook import show_reports_as_html

_OUT = ("-o", "--out")


def _out_of(options: list[str]) -> str | None:
    """The run folder the options name (`-o DIR`, `--out DIR`, `--out=DIR`), or None."""
    for position, option in enumerate(options):
        if option in _OUT and position + 1 < len(options):
            return options[position + 1]
        if option.startswith("--out="):
            return option.partition("=")[2]
    return None


#: what a notebook's kernel sets so that its children draw colours and live displays,
#: which a cell shows as escape codes (a spinner redrawn over and over)
_COLOURED = ("FORCE_COLOR", "CLICOLOR_FORCE", "CLICOLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")


def _plain_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _COLOURED}
    return {**env, "TERM": "dumb"}


def profile_cell(line: str, cell: str) -> Any:
    """The cell profiled as a script (see the module's doc); its Report. UsageError with
    profile-all's own message where the run wrote no report."""
    import profile_all as pa

    words = shlex.split(line)
    options, script_args = (words[:words.index("--")], words[words.index("--") + 1:]) \
        if "--" in words else (words, [])
    folder = Path(tempfile.mkdtemp(prefix="profile-all-cell-"))
    script = folder / "cell.py"
    script.write_text(cell, encoding="utf-8")
    out = _out_of(options)
    if out is None:
        out = str(folder / "run")
        options += ["-o", out]
    command = [sys.executable, "-m", "profile_all", "run", *options, str(script), "--",
               *script_args]
    said = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1, env=_plain_env()) as running:
        for printed in running.stdout:  # as it comes: the cell shows the run's progress
            print(printed, end="", flush=True)
            said.append(printed)
    if not (Path(out) / "meta.json").is_file():
        last = next((text.strip() for text in reversed(said) if text.strip()), "")
        raise UsageError(f"%%profile_all wrote no report (exit code {running.returncode})"
                         + (f": {last}" if last else ""))
    return pa.load(out)


def load_ipython_extension(ipython: Any) -> None:
    """IPython's hook for `%load_ext profile_all`: registers the `%%profile_all` magic,
    and Reports' HTML display (not yet registered where profile_all was imported before
    the shell started)."""
    ipython.register_magic_function(profile_cell, magic_kind="cell", magic_name="profile_all")
    show_reports_as_html()
