"""Chapter 35: the differential-privacy ledger against Chapter 14's accountant and Opacus, its budget
refusal and its signed file."""
from __future__ import annotations

import json
import warnings

import pytest

from scaleoutai.infra import reliability as rl

KEY = b"chapter-35-test-key-0123456789ab"  # the same key as test_infra_checkpoints.py

# --- differential-privacy budget --------------------------------------------------------------------------

def test_per_step_rdp_equals_chapter_14s_accountant():
    from scaleoutai.ml import privacy as pv

    for q, sigma in ((0.01, 1.0), (0.1, 0.7), (0.5, 2.0), (1e-3, 0.5), (1.0, 1.3), (0.0, 1.0)):
        for order in (2, 3, 8, 32, 128, 256):
            a, b = rl.rdp_subsampled_gaussian(q, sigma, order), pv.rdp_step(q, sigma, order)
            assert abs(a - b) <= 1e-12 * abs(b), (q, sigma, order)
    assert abs(rl.PrivacyLedger(100, 1e-5).epsilon_with(0.02, 1.1, 500) - pv.epsilon(0.02, 1.1, 500, 1e-5)) < 1e-10


def test_ledger_across_runs_equals_opacus_rdp_accountant():
    from opacus.accountants import RDPAccountant

    runs = [("pretrain", 0.01, 1.1, 2000), ("finetune", 0.05, 1.5, 300), ("again", 0.002, 0.8, 5000)]
    ledger = rl.PrivacyLedger(50.0, 1e-5)
    acc = RDPAccountant()
    for name, q, sigma, steps in runs:
        ledger.charge(name, q, sigma, steps)
        acc.history.append((sigma, q, steps))  # Opacus's history: (noise multiplier, sample rate, steps)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = acc.get_epsilon(1e-5, alphas=list(rl.ORDERS))
        assert abs(ledger.spent() - theirs) <= 1e-6 * theirs
    assert ledger.spent() < ledger.naive_spent()  # composing in RDP beats adding epsilons


def test_ledger_refuses_a_run_over_budget_and_stays_unchanged():
    ledger = rl.PrivacyLedger(3.0, 1e-5)
    ledger.charge("first", 0.01, 1.0, 1000)
    before, runs = ledger.spent(), list(ledger.runs)
    fit = ledger.max_steps(0.01, 1.0)
    assert ledger.epsilon_with(0.01, 1.0, fit) <= 3.0 < ledger.epsilon_with(0.01, 1.0, fit + 1)
    with pytest.raises(rl.BudgetExceeded, match=f"at most {fit} such steps fit"):
        ledger.charge("second", 0.01, 1.0, fit + 1)
    assert ledger.spent() == before and ledger.runs == runs
    assert ledger.charge("second", 0.01, 1.0, fit) <= 3.0
    assert ledger.max_steps(0.01, 1.0) == 0
    with pytest.raises(ValueError, match="delta"):
        rl.PrivacyLedger(1.0, 0.0)


def test_ledger_file_is_signed_so_a_deleted_run_is_caught(tmp_path):
    ledger = rl.PrivacyLedger(8.0, 1e-5)
    ledger.charge("a", 0.01, 1.0, 1000)
    ledger.charge("b", 0.02, 1.2, 400)
    path = tmp_path / "ledger.json"
    ledger.save(path, KEY)
    back = rl.PrivacyLedger.load(path, KEY)
    assert back.runs == ledger.runs and back.spent() == ledger.spent()
    data = json.loads(path.read_text())
    data["runs"] = data["runs"][:1]
    path.write_text(json.dumps(data))
    with pytest.raises(rl.IntegrityError, match="edited"):
        rl.PrivacyLedger.load(path, KEY)
