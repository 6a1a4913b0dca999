"""The human-labelled development data some tests read (STS-B dev, TruthfulQA questions
1-400, ...): ``ASSAY_DEV_DATA`` or ``/work/shared/data``, as the benchmarks read it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DEV_DATA = Path(os.environ.get("ASSAY_DEV_DATA", "/work/shared/data"))


def dev_file(name: str) -> Path:
    """The path of a development data file; the test is skipped, saying why, without it."""
    path = DEV_DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not here (the development data; set ASSAY_DEV_DATA)")
    return path
