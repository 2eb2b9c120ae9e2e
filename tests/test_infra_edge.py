"""Chapter 34: split inference over the communicator against the unsplit network and the latency model,
int8 compression of the edge half, offloading policies over a Markov link, and ONNX + onnxruntime."""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from scaleoutai import cluster, datasets, nn
from scaleoutai.infra import edge
from scaleoutai.infra import offload as off

SIZES = [24, 8, 40, 6, 16, 5]  # L = 5 layers: a narrow cut after layers 1 and 3, wide ones after 2 and 4
L = len(SIZES) - 1
# Dyadic costs: every FLOP count / F, alpha and bytes * beta is exact in binary, so the simulated
# time must equal the model bit for bit, not merely to rounding.
ALPHA, BETA = 2.0 ** -7, 2.0 ** -18
FLOPS = [2.0 ** (20 + 3 * r) for r in range(8)]


def _cuts(K: int, seed: int) -> list[int]:
    return sorted(np.random.default_rng(seed).integers(0, L + 1, K - 1).tolist())


@pytest.fixture(scope="module")
def params():
    return nn.mlp_init(SIZES, seed=3)


@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])  # 8 tiers > L + 1: some tiers get no layers at all
@pytest.mark.parametrize("batch", [1, 7])
def test_split_output_equals_the_unsplit_network_for_every_world_size_and_cut(params, K, batch):
    x = np.random.default_rng(K).standard_normal((batch, SIZES[0]))
    whole = edge.forward_layers(edge._float32(params), x.astype(np.float32), 0, L)
    np.testing.assert_allclose(whole, nn.mlp_forward(params, x)[0], rtol=0, atol=1e-4)  # float32 vs float64
    for seed in range(3):
        cuts = _cuts(K, seed)
        got, _ = edge.run_split_inference(params, x, cuts, FLOPS[:K], ALPHA, BETA, timeout=30)
        np.testing.assert_array_equal(got, whole)  # float32 activations cross unchanged: bit for bit
        for act in edge.ACTS:
            for int8_edge in (False, True):
                got, _ = edge.run_split_inference(params, x, cuts, FLOPS[:K], ALPHA, BETA, act, int8_edge, timeout=30)
                np.testing.assert_array_equal(got, edge.reference_split_inference(params, x, cuts, act, int8_edge))


@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("act", edge.ACTS)
def test_simulated_time_and_bytes_equal_the_latency_model_exactly(params, K, act):
    x = np.random.default_rng(0).standard_normal((6, SIZES[0]))
    for seed in range(4):
        cuts = _cuts(K, seed)
        _, res = edge.run_split_inference(params, x, cuts, FLOPS[:K], ALPHA, BETA, act, timeout=30)
        assert res.sim_time == edge.chain_time(SIZES, cuts, 6, FLOPS[:K], ALPHA, BETA, act)
        bounds = edge.stage_bounds(cuts, L)
        hops = [bounds[r + 1] for r in edge._used(bounds)][:-1]
        assert sum(s.bytes_sent for s in res.stats) == sum(edge.cut_bytes(SIZES, c, 6, act) for c in hops)


def test_two_tier_time_is_edge_plus_link_plus_server_and_nothing_crosses_when_all_is_local():
    fl = edge.layer_flops(SIZES, 4)
    for c in range(L):
        want = fl[:c].sum() / 1e6 + 1e-3 + 4 * 4 * SIZES[c] * 1e-7 + fl[c:].sum() / 1e9
        assert edge.split_time(SIZES, c, 4, 1e6, 1e9, 1e-3, 1e-7) == pytest.approx(want, rel=1e-14)
    assert edge.split_time(SIZES, L, 4, 1e6, 1e9, 1e-3, 1e-7) == pytest.approx(fl.sum() / 1e6, rel=1e-14)
    assert edge.cut_bytes(SIZES, 2, 4, "int8") == 4 * SIZES[2] + 4


def test_best_cut_moves_to_the_edge_as_bandwidth_falls_and_int8_offloads_at_lower_bandwidth():
    bws = np.geomspace(1e2, 1e9, 60)
    f32 = [edge.best_cut(SIZES, 16, 1e6, 1e9, 1e-3, 1 / bw)[0] for bw in bws]
    i8 = [edge.best_cut(SIZES, 16, 1e6, 1e9, 1e-3, 1 / bw, "int8")[0] for bw in bws]
    assert f32[0] == L and f32[-1] == 0 and all(a >= b for a, b in zip(f32, f32[1:]))
    assert all(a <= b for a, b in zip(i8, f32))  # 4x fewer bytes never pushes work back to the edge
    (best_two,), _ = edge.best_cuts(SIZES, 16, [1e6, 1e9], 1e-3, 1e-5)
    assert best_two == edge.best_cut(SIZES, 16, 1e6, 1e9, 1e-3, 1e-5)[0]
    cuts3, t3 = edge.best_cuts(SIZES, 16, [1e6, 1e7, 1e9], 1e-3, 1e-5)
    assert t3 <= edge.split_time(SIZES, best_two, 16, 1e6, 1e9, 1e-3, 1e-5) + 1e-15  # a fog tier never hurts


def test_int8_quantization_errors_stay_within_half_a_step_and_pack_to_n_d_plus_4_bytes():
    rng = np.random.default_rng(1)
    W = rng.standard_normal((30, 7)).astype(np.float32)
    W[:, 3] = 0.0
    for qmax in (127, 64):
        q, s = edge.quantize_per_channel(W, qmax)
        assert q.dtype == np.int8 and np.abs(q).max() <= qmax and s[3] == 1.0
        assert np.all(np.abs(W - q * s) <= s / 2 * (1 + 1e-6))
    h = rng.standard_normal((5, 9)).astype(np.float32)
    qh, sh = edge.quantize_activation(h)
    buf = edge.pack_int8(qh, sh)
    assert buf.nbytes == h.size + 4 and buf.dtype == np.uint8
    assert np.abs(edge.unpack_int8(buf, 9) - h).max() <= sh / 2 * (1 + 1e-6)
    assert np.array_equal(edge.unpack_int8(edge.pack_int8(*edge.quantize_activation(np.zeros((2, 3)))), 3), np.zeros((2, 3)))


@pytest.fixture(scope="module")
def trained():
    X, y = datasets.classification(2400, 32, classes=6, separation=4.0, seed=0)
    p = edge.fit_mlp(X[:1800], y[:1800], [32, 16, 96, 8, 48, 6], epochs=4, lr=2e-3, seed=0)
    return p, X[1800:], y[1800:]


def test_int8_edge_half_and_int8_cut_cost_at_most_one_point_of_accuracy_at_every_cut(trained):
    p, X, y = trained
    base = edge.accuracy(edge.reference_split_inference(p, X), y)
    assert base > 0.7
    for c in range(len(edge.widths(p))):
        acc = edge.accuracy(edge.reference_split_inference(p, X, [c], "int8", int8_edge=True), y)
        assert acc >= base - 0.01, (c, acc, base)


def test_int8_activations_send_four_times_fewer_bytes(params):
    x = np.ones((10, SIZES[0]))
    sent = {act: edge.run_split_inference(params, x, [2], FLOPS[:2], act=act)[1].stats[0].bytes_sent for act in edge.ACTS}
    assert sent["float32"] == 4 * 10 * SIZES[2] and sent["int8"] == 10 * SIZES[2] + 4


def test_markov_link_is_a_pure_function_of_the_seed_and_stays_at_the_given_rate():
    s1, bw1 = datasets.markov_link([1e4, 1e5, 1e6], 5000, stay=0.8, seed=7)
    s2, bw2 = datasets.markov_link([1e4, 1e5, 1e6], 5000, stay=0.8, seed=7)
    assert np.array_equal(s1, s2) and np.array_equal(bw1, bw2) and set(s1) == {0, 1, 2}
    assert abs(np.mean(s1[1:] == s1[:-1]) - 0.8) < 0.03
    assert np.all(np.abs(np.diff(s1)) <= 1)  # neighbouring states only
    assert not np.array_equal(s1, datasets.markov_link([1e4, 1e5, 1e6], 5000, stay=0.8, seed=8)[0])


def test_oracle_is_never_slower_than_any_policy_and_threshold_acts_on_the_last_measurement():
    _, trace = datasets.markov_link([3e3, 3e4, 3e5, 3e6], 400, stay=0.7, seed=2)
    args = (trace, SIZES, 16, 1e6, 1e9, 1e-3)
    runs = {pol: off.simulate_offloading(pol, *args, threshold=1e5) for pol in off.POLICIES}
    for pol in off.POLICIES:
        assert np.all(runs["oracle"]["latency"] <= runs[pol]["latency"] + 1e-15), pol
    assert np.all(runs["local"]["cut"] == L) and np.all(runs["offload"]["cut"] == 0)
    prev = np.concatenate([trace[:1], trace[:-1]])
    assert np.array_equal(runs["threshold"]["cut"], np.where(prev > 1e5, 0, L))
    flat = off.simulate_offloading("adaptive", np.full(50, 3e4), *args[1:])
    assert np.array_equal(flat["latency"], off.simulate_offloading("oracle", np.full(50, 3e4), *args[1:])["latency"])
    e = off.Energy()
    assert runs["local"]["energy"][0] == pytest.approx(e.p_compute * edge.layer_flops(SIZES, 16).sum() / 1e6)
    s = off.summarize(runs["offload"], deadline=0.05)
    assert s["miss_rate"] == np.mean(runs["offload"]["latency"] > 0.05) and s["energy"] == runs["offload"]["energy"].mean()


@pytest.mark.parametrize("act", edge.ACTS)
def test_a_lost_activation_or_a_crashed_server_still_returns_the_answer_at_the_modelled_time(params, act):
    x = np.random.default_rng(5).standard_normal((3, SIZES[0]))
    want = edge.reference_split_inference(params, x, [2], act)
    for faults, lost in ((None, False), (cluster.Faults(drop={0: {0}}), True)):
        res = cluster.run(off.offload_with_fallback, 2, args=(params, x, 2, FLOPS[:2]), kwargs=dict(act=act),
                          network=cluster.Network(alpha=ALPHA, beta=BETA), faults=faults, timeout=30)
        np.testing.assert_allclose(res.values[0], want, rtol=0, atol=1e-6)  # server-side vs edge-side float32
        assert res.sim_time == off.fallback_time(SIZES, 2, 3, FLOPS[:2], ALPHA, BETA, lost, act)
    res = cluster.run(off.offload_with_fallback, 2, args=(params, x, 2, FLOPS[:2]), kwargs=dict(act=act),
                      faults=cluster.Faults(crash={1: 0}), timeout=30)
    assert isinstance(res.values[1], cluster.RankCrashed)
    np.testing.assert_array_equal(res.values[0], want)


def test_bad_inputs_are_one_clear_value_error(params):
    x = np.ones((2, SIZES[0]))
    with pytest.raises(ValueError, match="non-decreasing"):
        edge.chain_time(SIZES, [3, 1], 1, [1, 1, 1], 0, 0)
    with pytest.raises(ValueError, match="activation format"):
        edge.cut_bytes(SIZES, 1, 1, "fp8")
    with pytest.raises(ValueError, match="one FLOP/s per tier"):
        edge.chain_time(SIZES, [1], 1, [1.0], 0, 0)
    with pytest.raises(cluster.RankError, match="need 1 cuts"):
        cluster.run(edge.split_inference, 2, args=(params, x, [1, 2], [1.0, 1.0, 1.0]), timeout=10)
    with pytest.raises(ValueError, match="offloading policy"):
        off.choose_cut("random", SIZES, 1, 1.0, 1.0, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="positive bytes per second"):
        datasets.markov_link([0.0, 1.0], 10)
    with pytest.raises(ValueError, match="qmax"):
        edge.quantize_per_channel(np.ones((2, 2)), 200)


# --- production: torch.onnx.export (dynamo) and onnxruntime ------------------------------------------

@pytest.fixture(scope="module")
def onnx_models(trained, tmp_path_factory):
    pytest.importorskip("onnxruntime")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    p, X, _ = trained
    d = tmp_path_factory.mktemp("onnx")
    f32 = edge.export_onnx(p, 3, str(d / "edge.onnx"))
    logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic's "consider pre-processing" notice
    paths = {"float32": f32}
    for name, rr in (("int8", False), ("int8_rr", True)):
        paths[name] = str(d / f"{name}.onnx")
        quantize_dynamic(f32, paths[name], weight_type=QuantType.QInt8, per_channel=True, reduce_range=rr)
    return paths


def _session(path):
    import onnxruntime as ort

    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def test_onnxruntime_runs_the_exported_edge_half_like_torch_and_ours(trained, onnx_models):
    import torch

    p, X, _ = trained
    x = X[:100].astype(np.float32)
    ours = edge.forward_layers(edge._float32(p), x, 0, 3)
    got = _session(onnx_models["float32"]).run(None, {"x": x})[0]
    with torch.no_grad():
        ref = edge.torch_layers(p, 0, 3)(torch.from_numpy(x)).numpy()
    scale = np.abs(ours).max()
    assert got.shape == ours.shape and np.abs(got - ours).max() <= 1e-5 * scale and np.abs(ref - ours).max() <= 1e-5 * scale
    assert _session(onnx_models["float32"]).run(None, {"x": x[:3]})[0].shape == (3, 8)  # dynamic batch axis


def test_onnxruntime_dynamic_quantization_has_our_int8_weights_and_stays_close_to_float(trained, onnx_models):
    import onnx
    from onnx import numpy_helper

    p, X, _ = trained
    p32 = edge._float32(p)
    for name, qmax in (("int8", 127), ("int8_rr", 64)):
        inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(onnx_models[name]).graph.initializer}
        codes = sorted(k for k in inits if k.endswith("weight_Transposed_quantized"))
        assert len(codes) == 3
        ours = edge.quantize_mlp(p32, qmax)
        for i, k in enumerate(codes):
            assert np.array_equal(inits[k], ours[f"q{i}"]), (name, i)
            np.testing.assert_allclose(inits[k.replace("_quantized", "_scale")], ours[f"s{i}"], rtol=1e-6)
            assert not inits[k.replace("_quantized", "_zero_point")].any()  # symmetric weights
    weight_bytes = {n: sum(numpy_helper.to_array(i).nbytes for i in onnx.load(path).graph.initializer
                           if i.name.endswith(("weight", "_quantized"))) for n, path in onnx_models.items()}
    assert weight_bytes["int8"] * 4 == weight_bytes["float32"]  # the weights: 4x fewer bytes
    assert os.path.getsize(onnx_models["int8"]) < os.path.getsize(onnx_models["float32"])  # plus scales and graph
    x = X.astype(np.float32)
    f = edge.forward_layers(p32, x, 0, 3)
    scale = np.abs(f).max()
    rr = _session(onnx_models["int8_rr"]).run(None, {"x": x})[0]
    ours = edge.int8_forward_layers(edge.quantize_mlp(p32), x, 0, 3, 5)
    assert np.abs(rr - f).max() <= 0.05 * scale and np.abs(ours - f).max() <= 0.05 * scale
    assert np.abs(rr - ours).max() <= 0.05 * scale
