"""The environment a run was measured in, for `Report.meta`. Nothing here imports torch:
versions come from package metadata, and GPU facts from the target's own process."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_total() -> int | None:
    """The machine's physical memory in bytes (what a peak RSS is measured against)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def collect() -> dict:
    return {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "python_executable": sys.executable,
        "os": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_total": _memory_total(),
        "packages": {name: _version(name) for name in
                     ("profile-all", "torch", "numpy", "pandas", "pyarrow", "snakeviz")},
    }
