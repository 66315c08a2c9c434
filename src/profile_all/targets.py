"""What is profiled. A script target runs exactly as `python script.py args` would run it."""

from __future__ import annotations

import os
import runpy
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profile_all.errors import UsageError


@dataclass
class ScriptTarget:
    path: str
    args: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """Short name for the run directory."""
        return Path(self.path).stem

    @property
    def command(self) -> list[str]:
        return ["python", self.path, *self.args]

    def validate(self) -> None:
        """Fail early, before any pass runs, on a script that python itself would refuse."""
        path = Path(self.path)
        if not path.exists():
            raise UsageError(f"script not found: {self.path}")
        if path.is_dir():
            raise UsageError(f"{self.path} is a directory, not a Python script")
        try:
            with tokenize.open(path) as source_file:  # honours PEP 263 encoding lines
                source = source_file.read()
        except (OSError, SyntaxError, UnicodeDecodeError) as error:
            raise UsageError(f"cannot read script {self.path}: {error}") from None
        try:
            compile(source, str(path), "exec", dont_inherit=True)
        except SyntaxError as error:
            raise UsageError(
                f"{self.path}:{error.lineno}: syntax error: {error.msg}") from None
        except ValueError as error:  # e.g. null bytes
            raise UsageError(f"{self.path}: not a Python script: {error}") from None

    def to_spec(self) -> dict[str, Any]:
        return {"kind": "script", "path": self.path, "args": list(self.args)}

    def run(self, *, own_process: bool) -> None:
        """Run the script in this process, as `python script.py args` does.

        `own_process`: this process exists only for the target (a worker), so sys.path[0]
        is replaced by the script's folder as python does; otherwise it is put in front
        and sys.argv and sys.path are restored afterwards.
        """
        script_dir = os.path.dirname(os.path.abspath(self.path))
        saved_argv, saved_path = sys.argv, list(sys.path)
        sys.argv = [self.path, *self.args]
        if own_process:
            sys.path[0] = script_dir
        else:
            sys.path.insert(0, script_dir)
        try:
            runpy.run_path(self.path, run_name="__main__")
        finally:
            if not own_process:
                sys.argv, sys.path[:] = saved_argv, saved_path


def target_from_spec(spec: dict[str, Any]) -> ScriptTarget:
    if spec.get("kind") != "script":
        raise ValueError(f"unknown target kind: {spec.get('kind')!r}")
    return ScriptTarget(spec["path"], spec["args"])
