"""The models' speed paths: threads sized to the cores the process may use (affinity
mask and cgroup CPU quota), and the fast path's values against float32."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from assay.models import device


def _no_cgroup(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    for name in ("CGROUP_V2_CPU_MAX", "CGROUP_V1_QUOTA", "CGROUP_V1_PERIOD"):
        monkeypatch.setattr(device, name, folder / f"absent-{name}")


def test_threads_follow_the_affinity_mask_not_the_host(monkeypatch, tmp_path):
    _no_cgroup(monkeypatch, tmp_path)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5})
    assert device.available_cores() == 3
    assert device.model_threads() == 3


@pytest.mark.parametrize(
    ("cpu_max", "expected"),
    [("150000 100000\n", 2), ("50000 100000\n", 1), ("400000 100000\n", 4), ("max 100000\n", 6)],
)
def test_threads_stop_at_the_cgroup_v2_quota(monkeypatch, tmp_path, cpu_max, expected):
    _no_cgroup(monkeypatch, tmp_path)
    (tmp_path / "cpu.max").write_text(cpu_max)
    monkeypatch.setattr(device, "CGROUP_V2_CPU_MAX", tmp_path / "cpu.max")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(6)))
    # 1.5 CPUs -> 2 threads (ceil), 0.5 -> 1, 4 of 6 cores -> 4, no limit -> the 6 cores
    assert device.available_cores() == expected


@pytest.mark.parametrize(("quota", "expected"), [("200000", 2), ("-1", 8)])
def test_threads_stop_at_the_cgroup_v1_quota(monkeypatch, tmp_path, quota, expected):
    _no_cgroup(monkeypatch, tmp_path)
    (tmp_path / "quota").write_text(quota)
    (tmp_path / "period").write_text("100000")
    monkeypatch.setattr(device, "CGROUP_V1_QUOTA", tmp_path / "quota")
    monkeypatch.setattr(device, "CGROUP_V1_PERIOD", tmp_path / "period")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    assert device.available_cores() == expected


def test_an_unreadable_quota_is_no_limit_and_omp_num_threads_wins(monkeypatch, tmp_path):
    _no_cgroup(monkeypatch, tmp_path)
    (tmp_path / "cpu.max").write_text("garbage")
    monkeypatch.setattr(device, "CGROUP_V2_CPU_MAX", tmp_path / "cpu.max")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert device.model_threads() == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert device.model_threads() == 1
