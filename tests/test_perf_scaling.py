"""Scaling laws and MFU (Chapter 19) against hand arithmetic and the closed form."""
from __future__ import annotations

import math

import numpy as np
import pytest

from scaleoutai.perf import scaling


def test_chinchilla_loss_flops_and_mfu_match_hand_arithmetic():
    # Chinchilla itself: N = 70e9, D = 1.4e12. 70e9^0.34 = e^(0.34 * 24.9717) = 4867.8; 1.4e12^0.28 = 2517.2
    assert scaling.chinchilla_loss(70e9, 1.4e12) == pytest.approx(1.69 + 406.4 / 4867.8 + 410.7 / 2517.2, rel=1e-4)
    assert scaling.chinchilla_loss(70e9, 1.4e12) == pytest.approx(1.9366, abs=1e-4)
    assert scaling.training_flops(70e9, 1.4e12) == pytest.approx(5.88e23)
    assert scaling.mfu(3000, 7e9) == pytest.approx(6 * 7e9 * 3000 / 989e12)  # = 0.1274
    assert scaling.mfu(1e6, 1e9, peak_flops=6e15) == pytest.approx(1.0)
    np.testing.assert_allclose(scaling.chinchilla_loss(np.array([1e9, 1e10]), 1e11),
                               [scaling.chinchilla_loss(1e9, 1e11), scaling.chinchilla_loss(1e10, 1e11)])


@pytest.mark.parametrize("C", [1e18, 5.88e23, 1e26])
def test_compute_optimal_search_matches_closed_form_and_spends_the_budget(C):
    N, Dt = scaling.compute_optimal(C)
    Nc, Dc = scaling.compute_optimal_closed_form(C)
    assert N == pytest.approx(Nc, rel=1e-5) and Dt == pytest.approx(Dc, rel=1e-5)
    assert scaling.training_flops(N, Dt) == pytest.approx(C, rel=1e-12)
    for f in (0.5, 2.0):  # moving N either way at fixed C raises the loss
        assert scaling.chinchilla_loss(N * f, C / (6 * N * f)) > scaling.chinchilla_loss(N, Dt)
    # the parametric fit wants more tokens per parameter than the D = 20 N rule, increasingly so with C
    assert Dt / N > 20
    N20 = math.sqrt(C / 120)  # C = 6 N (20 N)
    assert scaling.chinchilla_loss(N20, 20 * N20) >= scaling.chinchilla_loss(N, Dt)


def test_scaling_functions_reject_bad_budgets():
    with pytest.raises(ValueError, match="compute budget"):
        scaling.compute_optimal(0)
    with pytest.raises(ValueError, match="peak_flops"):
        scaling.mfu(1, 1, peak_flops=0)


# PaLM 540B (Chowdhery et al. 2022, Appendix B): 238.3k tokens/s on 6144 TPU v4 chips of 275 TFLOP/s bf16;
# 118 layers, 48 heads of 256 (h = 12288), sequence 2048, 540.35e9 parameters.
PALM = dict(N=540.35e9, layers=118, hidden=48 * 256, seq=2048)
PALM_TOKENS_PER_S, PALM_PEAK = 238.3e3, 6144 * 275e12


def test_mfu_reproduces_palm_540b_with_and_without_the_attention_term():
    assert scaling.mfu(PALM_TOKENS_PER_S, PALM["N"], PALM_PEAK) == pytest.approx(0.457, abs=5e-4)
    assert scaling.mfu(PALM_TOKENS_PER_S, peak_flops=PALM_PEAK, **PALM) == pytest.approx(0.462, abs=5e-4)


def test_hfu_counts_recomputation_and_never_falls_below_mfu():
    base = scaling.mfu(PALM_TOKENS_PER_S, peak_flops=PALM_PEAK, **PALM)
    none = scaling.hfu(PALM_TOKENS_PER_S, peak_flops=PALM_PEAK, recompute="none", **PALM)
    sel = scaling.hfu(PALM_TOKENS_PER_S, peak_flops=PALM_PEAK, recompute="selective", **PALM)
    full = scaling.hfu(PALM_TOKENS_PER_S, peak_flops=PALM_PEAK, recompute="full", **PALM)
    assert none == pytest.approx(base) and base < sel < full
    assert full == pytest.approx(4 / 3 * base, rel=1e-12)  # one more forward: 8 N + 16 l h s over 6 N + 12 l h s
    with pytest.raises(ValueError, match="recompute"):
        scaling.hfu(1.0, 1.0, recompute="some")


# Megatron-LM's 1T row (Narayanan et al. SC 2021, Table 1): 128 layers, h = 25600, s = 2048, V = 51200,
# batch 3072 on 3072 A100s (312 TFLOP/s bf16) at 163 TFLOP/s per GPU = 52% of peak.
MEGA = dict(layers=128, hidden=25600, seq=2048, vocab=51200, batch=3072)


def test_megatron_eq3_is_full_recompute_hardware_flops_of_the_layers_plus_logits():
    l, h, s, V, B = MEGA["layers"], MEGA["hidden"], MEGA["seq"], MEGA["vocab"], MEGA["batch"]
    layer_params = 12 * l * h * h  # per block: 4h^2 attention + 8h^2 MLP weights
    layers_hw = scaling.hardware_flops_per_token(layer_params, l, h, s, recompute="full")
    logits = 3 * 2 * h * V  # forward and backward of the output layer, not recomputed
    assert scaling.megatron_flops_per_iteration(B, s, l, h, V) == pytest.approx(B * s * (layers_hw + logits), rel=1e-12)
    assert (layer_params + V * h) / 1e9 == pytest.approx(1008, abs=1)  # the table's 1008 B parameters
    # A run at the table's 163 TFLOP/s per GPU, counted per token, is 52% of peak in this accounting.
    per_token = scaling.megatron_flops_per_iteration(B, s, l, h, V) / (B * s)
    tokens_per_s = 163e12 * 3072 / per_token
    assert per_token * tokens_per_s / (3072 * 312e12) == pytest.approx(0.522, abs=1e-3)
    assert scaling.mfu(tokens_per_s, layer_params, 3072 * 312e12, l, h, s) < 163 / 312  # MFU drops the recompute
