"""The one accelerator table (perf.hardware) and the roofline time of a decode step."""
from __future__ import annotations

import dataclasses

import pytest

from scaleoutai.perf import hardware as hw
from scaleoutai.perf import ridge_point, roofline, scaling


def test_table_holds_the_spec_sheet_values_of_five_gpus():
    # (bandwidth B/s, dense bf16 FLOP/s, memory B) from the vendors' datasheets, sparsity NOT included
    want = {"NVIDIA A10G": (600e9, 70e12, 24e9), "NVIDIA L4": (300e9, 121e12, 24e9),
            "NVIDIA A100 80GB SXM": (2039e9, 312e12, 80e9), "NVIDIA H100 SXM": (3350e9, 989e12, 80e9),
            "NVIDIA H200": (4800e9, 989e12, 141e9)}
    got = {n: (a.hbm_bandwidth, a.bf16_flops, a.memory_bytes) for n, a in hw.ACCELERATORS.items()}
    assert got == want


def test_rows_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.H100_SXM.hbm_bandwidth = 1.0  # type: ignore[misc]


def test_h200_is_an_h100_with_more_and_faster_memory():
    assert hw.H200.bf16_flops == hw.H100_SXM.bf16_flops
    assert hw.H200.hbm_bandwidth > hw.H100_SXM.hbm_bandwidth and hw.H200.memory_bytes > hw.H100_SXM.memory_bytes


def test_scaling_peak_comes_from_the_table():
    assert scaling.H100_BF16_PEAK == hw.H100_SXM.bf16_flops == 989e12


@pytest.mark.parametrize("name", ["H100 SXM", "nvidia-h100-sxm", "H100_SXM", "NVIDIA H100 SXM"])
def test_accelerator_lookup_ignores_case_spaces_and_vendor(name):
    assert hw.accelerator(name) is hw.H100_SXM
    assert hw.accelerator(hw.L4) is hw.L4


def test_unknown_accelerator_names_the_table():
    with pytest.raises(KeyError, match="NVIDIA H200"):
        hw.accelerator("TPU v5e")


@pytest.mark.parametrize("g", list(hw.ACCELERATORS.values()), ids=lambda g: g.name)
def test_ridge_equals_perf_ridge_point(g):
    assert g.ridge == pytest.approx(ridge_point(g.bf16_flops, g.hbm_bandwidth), rel=1e-12)


@pytest.mark.parametrize("g", list(hw.ACCELERATORS.values()), ids=lambda g: g.name)
@pytest.mark.parametrize("weights,kv,flops", [(14e9, 0.0, 14e9), (14e9, 5.6e9, 64 * 14e9), (1e6, 1e6, 1e15),
                                              (0.0, 0.0, 0.0)])
def test_decode_step_is_the_roofline_max_and_agrees_with_perf_roofline(g, weights, kv, flops):
    t = hw.decode_step_seconds(weights, kv, flops, g)
    assert t == pytest.approx(max((weights + kv) / g.hbm_bandwidth, flops / g.bf16_flops), rel=1e-12)
    if flops > 0 and weights + kv > 0:  # the same bound read from Chapter 3's roofline: flops / attainable FLOP/s
        intensity = flops / (weights + kv)
        assert t == pytest.approx(flops / roofline(intensity, g.bf16_flops, g.hbm_bandwidth), rel=1e-12)


def test_7b_decode_at_batch_one_is_memory_bound_and_kv_reads_add_time():
    # 7B in bf16 = 14 GB of weights, 2 P = 14 GFLOP per token: far below the ridge, so bytes decide
    w = 14e9
    t0 = hw.decode_step_seconds(w, 0.0, 14e9, "H100 SXM")
    assert t0 == pytest.approx(w / 3350e9, rel=1e-12)
    t1 = hw.decode_step_seconds(w, 0.4 * w, 14e9, "H100 SXM")
    assert t1 == pytest.approx(1.4 * t0, rel=1e-12)
    # the same step is compute-bound once the batch's FLOPs pass the ridge
    flops = 2 * w * hw.H100_SXM.ridge
    assert hw.decode_step_seconds(w, 0.0, flops, "H100 SXM") == pytest.approx(flops / 989e12, rel=1e-12)


@pytest.mark.parametrize("bad", [dict(weight_bytes=-1.0), dict(kv_bytes_read=float("nan")), dict(flops=-5.0)])
def test_decode_step_rejects_negative_or_nan_inputs(bad):
    args = dict(weight_bytes=1.0, kv_bytes_read=1.0, flops=1.0) | bad
    with pytest.raises(ValueError, match=next(iter(bad))):
        hw.decode_step_seconds(gpu="L4", **args)
