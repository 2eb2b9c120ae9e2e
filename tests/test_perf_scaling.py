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
