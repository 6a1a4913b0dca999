"""Code run in a fresh Python interpreter, for tests of what gets imported (the test
process has imported everything already). A package missing is simulated by a finder on
``sys.meta_path`` that refuses to import it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import assay

#: the folder holding the assay package this process imported: the fresh interpreter
#: imports the same copy (a worktree's src/ rather than the installed one)
ASSAY_ROOT = str(Path(assay.__file__).resolve().parent.parent)

#: a finder refusing the top-level packages in BLOCKED, as if they were not installed
BLOCKER = """
import sys

class _Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Blocker())
"""


def run_fresh(
    code: str, cwd: Path, blocked: tuple[str, ...] = (), prelude: str = ""
) -> dict[str, Any]:
    """Run ``code`` (dedented) in a fresh interpreter in ``cwd``, offline, with the
    packages in ``blocked`` refused and ``prelude`` run first; the code prints one JSON
    object as its last line, which is returned. It imports the same assay as this process."""
    script = f"BLOCKED = {blocked!r}\n" + (BLOCKER if blocked else "") + prelude
    done = subprocess.run(
        [sys.executable, "-c", script + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": ASSAY_ROOT,
            "HOME": str(cwd),
            "ASSAY_CACHE_DIR": str(cwd / "cache"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        },
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
