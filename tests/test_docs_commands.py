"""Every shell block of the README and of docs/ runs as written, from the clone's folder
(here a scratch folder that sees the clone's `scripts/`), in the order a reader meets them;
every link between the pages leads to a file that exists. Blocks fenced `text` are
syntax or need what this machine lacks (several machines, minutes of benchmarks)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
#: a block's line naming the optional modules its next commands need: `# needs: lightning`
NEEDS = re.compile(r"^#\s*needs:\s*(.+)$")


def _blocks() -> list[tuple[str, int, str]]:
    return [(page.relative_to(REPO).as_posix(), number, block.group(1))
            for page in PAGES
            for number, block in enumerate(SHELL_BLOCK.finditer(page.read_text()), start=1)]


@pytest.fixture(scope="module")
def clone_folder(tmp_path_factory) -> Path:
    """A folder where `scripts/` is the clone's and `reports/` is new."""
    folder = tmp_path_factory.mktemp("reader")
    (folder / "scripts").symlink_to(REPO / "scripts")
    return folder


def test_the_pages_have_shell_blocks():
    assert {page for page, _number, _block in _blocks()} >= {"README.md", "docs/distributed.md"}


@pytest.mark.parametrize("page, number, block", _blocks(),
                         ids=[f"{page}#{number}" for page, number, _ in _blocks()])
def test_a_shell_block_runs_as_written(clone_folder, page, number, block):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
           f"{os.environ.get('PATH', '')}", "OMP_NUM_THREADS": "1"}
    skipped: list[str] = []
    missing: list[str] = []
    for command in [line for line in block.splitlines() if line.strip()]:
        needs = NEEDS.match(command)
        if needs:
            missing = [module for module in needs.group(1).split()
                       if importlib.util.find_spec(module) is None]
            continue
        if missing:
            skipped.append(f"{command} (needs {', '.join(missing)}: make test-extras)")
            continue
        done = subprocess.run(["bash", "-c", command], cwd=clone_folder, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{page} block {number}: {command}\n{done.stderr[-3000:]}"
    if skipped:
        pytest.skip("; ".join(skipped))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPO).as_posix())
def test_every_link_leads_to_a_file(page):
    targets = [target for target in LINK.findall(page.read_text())
               if "://" not in target]
    missing = [target for target in targets if not (page.parent / target).exists()]
    assert missing == []
    if page.name == "README.md":  # the guide leads to every reference page
        assert {f"docs/{doc.name}" for doc in PAGES[1:]} <= set(targets)
