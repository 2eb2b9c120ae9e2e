"""Prefill/decode disaggregation (Chapter 23): the KV transfer is the alpha-beta message of the prompt's
cache, every request is served once, a slow link is what kills it and a fast one lowers the TPOT of
long prompts below colocated serving on the same number of GPUs."""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai.cluster import Network
from scaleoutai.serving import disaggregation as dg
from scaleoutai.serving import router as rt
from scaleoutai.serving.efficiency import OPEN_MODELS
from scaleoutai.serving.step_cost import StepCost

STEP = StepCost.for_open_model("Llama-3-8B", "H100 SXM", mfu=0.5)


@pytest.mark.parametrize("tokens", [1, 17, 2048])
@pytest.mark.parametrize("itemsize", [1, 2, 4])
def test_kv_transfer_bytes_is_two_layers_kv_heads_head_dim_itemsize_per_token(tokens, itemsize):
    m = OPEN_MODELS["Llama-3-8B"]
    assert dg.kv_transfer_bytes(tokens, m.n_layers, m.n_kv_heads, m.head_dim, itemsize) == \
        2 * 32 * 8 * 128 * itemsize * tokens
    assert dg.kv_transfer_bytes(1, 32, 8, 128, 2) == 131072 == STEP.kv_bytes_per_token


@pytest.mark.parametrize("prompt, out", [(100, 2), (1000, 7)])
def test_one_request_pays_prefill_then_the_alpha_beta_transfer_then_its_decode_steps(prompt, out):
    net = Network(alpha=2e-5, beta=1 / 10e9)
    req = dg.uniform_workload(1, 1.0, prompt, out, seed=2)
    res, transfer = dg.simulate_disaggregated(req, 1, 1, STEP, net)
    first = req[0].arrival + STEP.seconds(prompt, 0, 0)
    assert res.first[0] == pytest.approx(first, rel=1e-12)
    assert transfer[0] == pytest.approx(net.message_time(dg.kv_transfer_bytes(prompt, 32, 8, 128, 2)), rel=1e-12)
    decode = sum(STEP.seconds(0, 1, prompt + k) for k in range(1, out))
    assert res.finish[0] == pytest.approx(first + transfer[0] + decode, rel=1e-12)


@pytest.mark.parametrize("split", [(1, 1), (1, 3), (3, 2)])
def test_every_request_is_served_once_in_order_of_its_phases(split):
    reqs = dg.uniform_workload(80, 30.0, 300, 20, seed=4)
    reqs[3] = rt.FleetRequest(3, reqs[3].arrival, reqs[3].prompt, reqs[3].output[:1])  # one token: no decode
    res, transfer = dg.simulate_disaggregated(reqs, *split, STEP, Network(alpha=1e-5, beta=1e-10))
    assert np.all(res.first > res.arrival) and np.all(res.finish >= res.first + transfer)
    assert transfer[3] == 0 and res.finish[3] == res.first[3]
    assert res.output_tokens.sum() == sum(r.max_new for r in reqs)


def test_a_link_slower_than_the_prefill_output_makes_the_transfer_queue_grow():
    reqs = dg.uniform_workload(300, 12.0, 2048, 50, seed=5)
    need = dg.min_link_bandwidth(reqs, STEP)
    p99 = {}
    for bw in (need / 4, need * 4, need * 40):
        res, transfer = dg.simulate_disaggregated(reqs, 2, 2, STEP, Network(alpha=1e-5, beta=1 / bw))
        p99[bw] = (np.percentile(transfer, 99), np.percentile(res.tpot(), 99))
    slow, fast, fastest = (p99[b] for b in sorted(p99))
    one = 2048 * STEP.kv_bytes_per_token / (need / 4)
    assert slow[0] > 20 * one  # queued far behind its own transfer time
    assert slow[1] > fast[1] >= fastest[1]  # TPOT falls as the link gets faster


def test_with_a_fast_link_disaggregation_cuts_the_tpot_of_long_prompts_below_colocated():
    reqs = dg.uniform_workload(400, 12.0, 2048, 100, seed=6)
    col = dg.simulate_colocated(reqs, 4, STEP)
    dis, _ = dg.simulate_disaggregated(reqs, 2, 2, STEP, Network(alpha=1e-5, beta=1 / 50e9))
    assert np.percentile(dis.tpot(), 99) < np.percentile(col.tpot(), 99)
    assert dis.output_tokens.sum() == col.output_tokens.sum()


def test_no_pool_may_be_empty():
    with pytest.raises(ValueError, match="at least one"):
        dg.simulate_disaggregated(dg.uniform_workload(2, 1.0, 8, 2), 0, 2, STEP, Network())
