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


@pytest.fixture
def cpuinfo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Point the precision module at a /proc/cpuinfo of our own making."""
    from assay.models import precision

    def write(flags: str) -> None:
        (tmp_path / "cpuinfo").write_text(f"processor\t: 0\nflags\t\t: {flags}\n\n")
        monkeypatch.setattr(precision, "CPUINFO", tmp_path / "cpuinfo")
        precision.native_bf16_cpu.cache_clear()

    yield write
    precision.native_bf16_cpu.cache_clear()


@pytest.mark.parametrize(
    ("flags", "device_name", "expected"),
    [
        ("fpu sse avx2 avx512f amx_bf16 amx_tile", "cpu", "bfloat16"),  # Sapphire Rapids
        ("fpu sse avx2 avx512f avx512_bf16", "cpu", "bfloat16"),  # Zen 4, Cooper Lake
        ("fpu sse avx2 avx512f avx512bw", "cpu", "float32"),  # bf16 only emulated
        ("fpu sse avx2 amx_bf16", "cuda", "float32"),  # the GPU path stays float32
    ],
)
def test_auto_precision_is_bfloat16_only_on_a_cpu_that_computes_it(
    cpuinfo, flags, device_name, expected
):
    from assay.models.precision import resolve_precision

    cpuinfo(flags)
    assert resolve_precision("auto", device_name) == expected
    assert resolve_precision("float32", device_name) == "float32"
    assert resolve_precision("bfloat16", device_name) == "bfloat16"


def test_an_unknown_precision_is_refused_by_name():
    from assay.models.precision import resolve_precision

    with pytest.raises(ValueError, match="precision must be one of auto, float32, bfloat16"):
        resolve_precision("int4", "cpu")


#: pairs of the kinds the suites send: supported, contradicted, unrelated, and a window
#: long enough to be cut at 128 word pieces
SPEED_PAIRS = [
    ("A dog runs through the park after a red ball.", "An animal is outside."),
    ("The museum opened in 1998 and closes at 6 pm.", "The museum opened in 2005."),
    ("Paris is the capital of France.", "The invoice is processed within 3 days."),
    (
        "In region 7, the premium plan costs 25 dollars a month for customers of plan 12. "
        "In region 8, delivery takes two weeks for customers of plan 13.",
        "Delivery takes two weeks in region 8.",
    ),
    (
        " ".join(["Marie Curie was a physicist and chemist who researched radioactivity."] * 12),
        "Marie Curie researched radioactivity.",
    ),
]


def test_the_shipped_entailment_model_in_bfloat16_stays_within_tolerance_of_float32():
    """The fast path (bfloat16, forced here so the test runs on any CPU) against float32 on
    the shipped model: every probability within BF16_TOLERANCE, the same label each pair,
    and the name says which format ran."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("torch")
    from assay.models.entailment import BF16_TOLERANCE, EntailmentModel

    exact = EntailmentModel(precision="float32")
    fast = EntailmentModel(precision="bfloat16")
    assert (exact.name, exact.precision) == ("assay-entailment-minilm-l6", "float32")
    assert (fast.name, fast.precision) == ("assay-entailment-minilm-l6/bf16", "bfloat16")
    want, got = exact.probabilities(SPEED_PAIRS), fast.probabilities(SPEED_PAIRS)
    assert np.abs(got - want).max() <= BF16_TOLERANCE
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-5)
    assert list(got.argmax(axis=1)) == list(want.argmax(axis=1))
    # the supported pair is entailed and the changed date contradicted, in both formats
    assert want[0, 0] > 0.5 and got[0, 0] > 0.5
    assert want[1, 2] > 0.5 and got[1, 2] > 0.5


def test_the_model_precision_setting_reaches_the_entailment_model(monkeypatch):
    """``model_precision`` (ASSAY_MODEL_PRECISION) is the way to turn the fast path off:
    float32 runs the shipped model in float32 and its name has no /bf16."""
    from assay.core.config import AssayConfig
    from assay.engine.resources import Resources

    monkeypatch.setenv("ASSAY_MODEL_PRECISION", "float32")
    model = Resources(AssayConfig()).entailment
    assert model.precision == "float32"
    assert not model.name.endswith("/bf16")
