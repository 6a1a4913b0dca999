"""Installed size of a fresh ``pip install assay-eval`` (or with extras) in a new venv.

Makes an empty venv (its site-packages is the zero point), installs this checkout into it
(not editable, so Assay's own files count), and prints the MB of the 15 largest installed
distributions, the MB of files added to site-packages and the MiB they take on disk. With
``--extras`` naming ``models``, ``all`` or ``dev``, torch==2.13.0 (the CPU build, as
./scripts/setup installs it) goes in first: an unpinned torch would pull a multi-GB CUDA
build.

    python benchmarks/install_size.py                 # the base install
    python benchmarks/install_size.py --extras all    # everything
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCH = "torch==2.13.0"

#: run with the venv's interpreter: MB per installed distribution, from its RECORD
SIZES = """
import importlib.metadata as md, json, os
sizes = {}
for dist in md.distributions():
    total = 0
    for file in dist.files or []:
        path = file.locate()
        if os.path.isfile(path):
            total += os.path.getsize(path)
    sizes[dist.metadata["Name"]] = total / 1e6
print(json.dumps(sizes))
"""


def folder_size(path: Path) -> tuple[float, float]:
    """MB (10**6 bytes) of the files under ``path``, and the MiB they and the folders take
    on disk (what ``du -sm`` says; small files round up to whole blocks)."""
    entries = [path, *path.rglob("*")]
    stats = [e.lstat() for e in entries]
    files = sum(s.st_size for e, s in zip(entries, stats, strict=True) if e.is_file())
    disk = sum(s.st_blocks * 512 for s in stats)
    return files / 1e6, disk / 2**20


def site_packages(venv: Path) -> Path:
    return next(venv.glob("lib/python*/site-packages"))


def make_venv(venv: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return venv / "bin" / "python"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extras", default="", help="comma-separated extras, e.g. models,server")
    parser.add_argument("--top", type=int, default=15, help="distributions to list")
    args = parser.parse_args()
    extras = [e.strip() for e in args.extras.split(",") if e.strip()]
    target = f"{ROOT}[{','.join(extras)}]" if extras else str(ROOT)
    with tempfile.TemporaryDirectory(prefix="assay-size-") as tmp:
        empty = Path(tmp) / "empty"
        make_venv(empty)
        zero_files, zero_disk = folder_size(site_packages(empty))
        python = make_venv(Path(tmp) / "venv")
        pip = [str(python), "-m", "pip", "install", "-q", "--no-cache-dir"]
        if {"models", "all", "dev"} & set(extras):
            subprocess.run([*pip, TORCH], check=True)
        subprocess.run([*pip, target], check=True)
        report = subprocess.run(
            [str(python), "-c", SIZES], capture_output=True, text=True, check=True
        ).stdout
        files, disk = folder_size(site_packages(Path(tmp) / "venv"))
    sizes = json.loads(report)
    for name in ("pip", "setuptools"):  # the empty venv's own, counted in the zero point
        sizes.pop(name, None)
    print(f"pip install {'assay-eval' + (f'[{args.extras}]' if extras else '')}")
    for name, mb in sorted(sizes.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{mb:9.1f} MB  {name}")
    print(f"{files - zero_files:9.1f} MB  added to site-packages ({len(sizes)} distributions)")
    print(f"{disk - zero_disk:9.1f} MiB on disk (du -sm)")


if __name__ == "__main__":
    main()
