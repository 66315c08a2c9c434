"""Nsight Systems report files (`.nsys-rep`, `.qdrep`): a binary format that only the `nsys`
program reads. Where nsys is on PATH, the report is exported to sqlite in a temporary
directory (`nsys export --type sqlite`) and that export is read; where it is not, the file
is refused in one line that says how to export it elsewhere."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from profile_all.readers import IngestError
from profile_all.readers.nsys_sqlite import read_export

#: what such a file starts with (the format's old name)
MAGIC = b"NVIDIA Tegra Profiler Report"
EXPORT_TIMEOUT_SECONDS = 600


def export_command(nsys: str, report: Path, output: Path) -> list[str]:
    return [nsys, "export", "--type", "sqlite", "--force-overwrite", "true",
            "--output", str(output), str(report)]


def _export(nsys: str, report: Path, output: Path) -> None:
    """nsys export of `report` (named in messages as the user gave it) into `output`."""
    try:
        done = subprocess.run(export_command(nsys, report.resolve(), output),
                              capture_output=True,
                              text=True, timeout=EXPORT_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        raise IngestError(f"{report}: nsys export took more than {EXPORT_TIMEOUT_SECONDS} s; "
                          "export it yourself (nsys export --type sqlite) and ingest the "
                          ".sqlite") from None
    except OSError as error:
        raise IngestError(f"{report}: nsys could not be run ({error.strerror})") from None
    if done.returncode != 0 or not output.is_file():
        said = " ".join((done.stderr or done.stdout).split())[-300:]
        raise IngestError(f"{report}: nsys export --type sqlite failed "
                          f"(exit code {done.returncode}){': ' + said if said else ''}")


def read_nsys_rep(path: str | Path) -> tuple[list[list[Any]], dict[str, Any]]:
    """The rows and facts of the report's sqlite export (see nsys_sqlite.read_export)."""
    path = Path(path)
    nsys = shutil.which("nsys")
    if nsys is None:
        raise IngestError(
            f"{path}: an Nsight Systems report, which only the nsys program reads, and nsys "
            f"is not on PATH: install Nsight Systems, or run `nsys export --type sqlite "
            f"{path}` where it is and ingest the .sqlite it writes")
    with tempfile.TemporaryDirectory(prefix="profile-all-nsys-") as scratch:
        output = Path(scratch) / f"{path.stem}.sqlite"
        _export(nsys, path, output)
        rows, facts = read_export(output)
    return rows, {**facts, "report": "nsys-rep"}
