"""Chapter 22: int8 quantization bounds, the KV cache's memory, static batching's waste, the roofline counts,
and the production tools (torchao int8, transformers' KV cache) beside ours."""
import os
import warnings

import numpy as np
import pytest

from scaleoutai.serving import efficiency as ef
from scaleoutai.serving import quantize as qz
from scaleoutai.serving.decoder import (ContiguousCache, decoder_forward, decoder_init, generate,
                                        reference_generate)

# relative slack on the rounding bounds: the clamped code at +max|W| is off by half a step plus the
# rounding of a 255-step product, ~255 eps of the dtype
DTYPES = [(np.float32, 1e-4), (np.float64, 1e-12)]


def _weight(shape, dtype, seed=0, outlier=None):
    W = np.random.default_rng(seed).standard_normal(shape)
    if outlier is not None:
        W[:, outlier] *= 50.0  # one output channel 50x larger than the rest
    return W.astype(dtype)


# --- quantization ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,slack", DTYPES)
@pytest.mark.parametrize("levels", ["restricted", "full"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_dequantized_weights_are_within_half_a_step_of_the_floats(dtype, slack, levels, axis):
    W = _weight((37, 23), dtype, outlier=5)
    W[:, 7] = 0.0  # an all-zero output column
    W[4, :] = 0.0  # and an all-zero row
    q, s = qz.quantize_int8(W, axis=axis, levels=levels)
    assert q.dtype == np.int8 and s.dtype == dtype and s.shape == (W.shape[axis],)
    lo = -127 if levels == "restricted" else -128
    assert q.min() >= lo and q.max() <= 127
    deq = qz.dequantize(q, s, axis=axis)
    step = s[None, :] if axis == -1 else s[:, None]
    assert np.all(np.abs(W - deq) <= step / 2 * (1 + slack))
    assert np.all(deq[W == 0] == 0)
    used = np.abs(q.astype(int)).max(axis=0 if axis == -1 else 1)  # |int8(-128)| overflows in int8
    assert np.all(used[np.abs(W).max(axis=0 if axis == -1 else 1) > 0] >= 127)  # every nonzero channel spans the range


@pytest.mark.parametrize("dtype,slack", DTYPES)
def test_per_tensor_quantization_obeys_the_bound_with_one_step(dtype, slack):
    W = _weight((20, 30), dtype, seed=1)
    q, s = qz.naive_quantize_int8(W)
    assert s.shape == (1,) and np.isclose(s[0], np.abs(W).max() / 127, rtol=slack)
    assert np.all(np.abs(W - qz.dequantize(q, s)) <= s[0] / 2 * (1 + slack))


@pytest.mark.parametrize("dtype,slack", DTYPES)
@pytest.mark.parametrize("rows", [1, 4, 33])
def test_int8_linear_error_is_bounded_by_sum_abs_x_times_half_a_step(dtype, slack, rows):
    W = _weight((48, 40), dtype, seed=2, outlier=3)
    x = np.random.default_rng(3).standard_normal((rows, 48)).astype(dtype)
    b = np.random.default_rng(4).standard_normal(40).astype(dtype)
    q, s = qz.quantize_int8(W)
    y = qz.int8_linear(x, q, s, b)
    assert y.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(y, x @ qz.dequantize(q, s) + b, rtol=tol, atol=tol)
    bound = qz.matmul_error_bound(x, s)
    err = np.abs(x @ W + b - y)
    assert np.all(err <= bound * (1 + slack) + tol)
    assert err.max() > 0  # it really is quantized


def test_dynamic_int8_linear_accumulates_in_int32_and_obeys_the_two_sided_bound():
    W = _weight((64, 24), np.float64, seed=5)
    x = np.random.default_rng(6).standard_normal((7, 64))
    q, s = qz.quantize_int8(W)
    y = qz.int8_linear_dynamic(x, q, s)
    qx, sx = qz.quantize_int8(x, axis=0)
    exact = (qx.astype(np.int64) @ q.astype(np.int64)) * sx[:, None] * s[None, :]
    np.testing.assert_allclose(y, exact, rtol=1e-12)
    # |xW - x^ W^| <= |x - x^| |W| + |x^| |W - W^| <= sx/2 sum_i |W_ij| + sum_i |x^_i| s_j / 2
    xhat = qz.dequantize(qx, sx, axis=0)
    bound = sx[:, None] / 2 * np.abs(W).sum(0)[None, :] + qz.matmul_error_bound(xhat, s)
    assert np.all(np.abs(x @ W - y) <= bound * (1 + 1e-12))


def test_per_channel_beats_per_tensor_on_a_weight_with_an_outlier_channel():
    W = _weight((64, 32), np.float64, seed=7, outlier=11)
    x = np.random.default_rng(8).standard_normal((16, 64))
    errs = {}
    for name, (q, s) in {"per_channel": qz.quantize_int8(W), "per_tensor": qz.naive_quantize_int8(W)}.items():
        normal = np.arange(32) != 11
        errs[name] = np.abs(x @ W - qz.int8_linear(x, q, s))[:, normal].mean()
    assert errs["per_tensor"] > 20 * errs["per_channel"]  # the outlier's step is ~50x every other column's
    same = _weight((64, 32), np.float64, seed=7)  # without the outlier the two are within a small factor
    e_c = np.abs(x @ same - qz.int8_linear(x, *qz.quantize_int8(same))).mean()
    e_t = np.abs(x @ same - qz.int8_linear(x, *qz.naive_quantize_int8(same))).mean()
    assert e_t < 3 * e_c


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_quantized_decoder_keeps_greedy_tokens_and_stores_weights_in_int8(dtype):
    params = decoder_init(vocab=64, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=48, seed=0, dtype=dtype)
    Q = qz.quantize_decoder(params)
    n_matrix = ef.matrix_params(params)
    itemsize = np.dtype(dtype).itemsize
    assert Q.float_nbytes == n_matrix * itemsize
    n_scales = 2 * (4 * 32 + 64 + 32) + 64  # one per output column of every quantized matrix
    assert Q.nbytes == n_matrix + n_scales * itemsize
    toks = np.random.default_rng(1).integers(0, 64, size=(4, 24))
    rep = qz.quantization_report(params, Q.params, toks)
    assert 0 < rep["relative_error"] < 0.1 and rep["top1_agreement"] >= 0.9
    for layer in range(2):
        for name in ("Wq", "W1", "W2"):
            q, s = Q.codes[(layer, name)]
            assert q.dtype == np.int8
            assert np.all(np.abs(params["blocks"][layer][name] - Q.params["blocks"][layer][name])
                          <= s / 2 * (1 + 1e-5))
    prompt = toks[0, :5]  # the cache is exact for the quantized model too
    assert generate(Q.params, [prompt], 10) == [reference_generate(Q.params, prompt, 10)]


def test_per_tensor_decoder_is_worse_when_a_layer_has_an_outlier_channel():
    params = decoder_init(vocab=64, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=48, seed=2)
    params["blocks"][0]["W2"][:, 3] *= 40.0
    toks = np.random.default_rng(2).integers(0, 64, size=(4, 24))
    chan = qz.quantization_report(params, qz.quantize_decoder(params).params, toks)
    tens = qz.quantization_report(params, qz.quantize_decoder(params, per_channel=False).params, toks)
    assert tens["max_abs_error"] > 3 * chan["max_abs_error"]


def test_bad_quantization_input_is_one_clear_error():
    with pytest.raises(TypeError, match="float array"):
        qz.quantize_int8(np.ones((3, 3), dtype=int))
    with pytest.raises(ValueError, match="2-D weight matrix"):
        qz.quantize_int8(np.ones(3))
    with pytest.raises(ValueError, match="levels must be"):
        qz.quantize_int8(np.ones((3, 3)), levels="int4")
    with pytest.raises(TypeError, match="int8 codes"):
        qz.dequantize(np.ones((3, 3)), np.ones(3))
    q, s = qz.quantize_int8(np.ones((4, 3)))
    with pytest.raises(ValueError, match="cannot multiply"):
        qz.int8_linear(np.ones((2, 3)), q, s)


# --- KV cache, batching, roofline counts ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layers,d,seqs,T", [(1, 8, 1, 5), (2, 32, 3, 40), (4, 16, 8, 17)])
def test_kv_cache_bytes_formula_equals_the_contiguous_cache(dtype, layers, d, seqs, T):
    params = decoder_init(d_model=d, n_heads=2, n_layers=layers, max_len=64, dtype=dtype)
    cache = ContiguousCache(params, seqs, max_len=T)
    assert ef.kv_cache_bytes(params, T, seqs, itemsize=np.dtype(dtype).itemsize) == cache.nbytes
    assert ef.kv_cache_bytes(params, T, seqs) == 2 * layers * T * d * 8 * seqs


def test_matrix_params_counts_every_matrix_a_token_multiplies():
    params = decoder_init(vocab=50, d_model=24, n_heads=3, n_layers=3, d_ff=40, max_len=16)
    counted = params["head"].size + sum(b[k].size for b in params["blocks"] for k in ("Wq", "Wk", "Wv", "Wo", "W1", "W2"))
    assert ef.matrix_params(params) == counted


def test_decode_intensity_grows_with_the_batch_and_prefill_intensity_with_the_prompt():
    cfg = decoder_init(vocab=256, d_model=128, n_heads=4, n_layers=2, d_ff=512, max_len=512)["config"]
    one = ef.decode_cost(cfg, context=0, batch=1)
    assert one.flops == 2 * ef.matrix_params(cfg)
    assert 0.2 < one.intensity < 0.25  # 2 FLOPs per 8-byte weight, less the activations
    for B in (2, 8, 32):
        assert ef.decode_cost(cfg, 0, B).intensity == pytest.approx(B * one.intensity, rel=0.05 * B / 8 + 0.01)
    p = [ef.prefill_cost(cfg, T).intensity for T in (16, 64, 256)]
    assert p[0] < p[1] < p[2] and p[2] > 16  # ~ T / 4 FLOP per byte at float64
    assert ef.prefill_cost(cfg, 64).flops == pytest.approx(64 * ef.decode_cost(cfg, 0).flops, rel=0.2)


@pytest.mark.parametrize("batch_size", [1, 2, 3, 5, 8, 20])
def test_static_batches_emit_the_reference_tokens_and_count_their_padding(batch_size):
    params = decoder_init(vocab=40, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=40, seed=3)
    rng = np.random.default_rng(batch_size)
    prompts = [rng.integers(0, 40, size=n) for n in (1, 5, 2, 8, 3, 6, 4)]
    news = [7, 2, 9, 1, 4, 6, 3]
    got, stats = ef.static_generate(params, prompts, news, batch_size)
    assert got == [reference_generate(params, p, n) for p, n in zip(prompts, news)]
    assert stats == ef.padding_waste([len(p) for p in prompts], news, batch_size)
    assert stats.useful == sum(len(p) + n - 1 for p, n in zip(prompts, news))
    assert (stats.waste == 0) == (batch_size == 1)


def test_equal_requests_waste_nothing_and_ragged_ones_waste_more_with_bigger_batches():
    assert ef.padding_waste([4] * 8, [6] * 8, 4).waste == 0
    rng = np.random.default_rng(0)
    p, n = rng.integers(1, 64, 256), rng.integers(1, 128, 256)
    w = [ef.padding_waste(p, n, B).waste for B in (1, 4, 16, 64)]
    assert w[0] == 0 and w[0] < w[1] < w[2] < w[3]


def test_measure_roofline_turns_the_two_timings_into_flops_and_bytes_per_second(monkeypatch):
    from scaleoutai import perf

    seen = []

    def fake_measure(fn, *args, **kwargs):  # timings are never asserted: fix them and check the arithmetic
        seen.append(fn)
        return perf.Timing((0.5,) if fn is np.matmul else (0.25,))

    monkeypatch.setattr(ef.perf, "measure", fake_measure)
    peak, bw = ef.measure_roofline(matmul_n=64, copy_bytes=2**21, repeats=1)
    assert seen == [np.matmul, np.copyto]
    assert peak == 2 * 64 ** 3 / 0.5 and bw == 2 * 2**21 / 0.25  # a copy reads and writes every byte


def test_decode_sits_left_and_long_prefill_right_of_any_plausible_ridge():
    cfg = decoder_init(vocab=256, d_model=128, n_heads=4, n_layers=2, d_ff=512, max_len=1024)["config"]
    # CPUs and GPUs have ridges of about 1 to 300 FLOP/byte; float64 decode at B = 1 is 1/4 FLOP/byte
    assert ef.decode_cost(cfg, 16, 1).intensity < 1 and ef.prefill_cost(cfg, 1024).intensity > 100
    peak, bw = ef.measure_roofline(matmul_n=128, copy_bytes=2**22, repeats=1)  # runs here; its values are noise
    assert np.isfinite(peak) and np.isfinite(bw) and peak > 0 and bw > 0


def test_decode_throughput_is_tokens_per_second_and_bad_sizes_are_clear_errors():
    params = decoder_init(max_len=32)
    assert ef.decode_throughput(params, batch=2, context=4, steps=3, repeats=1) > 0
    with pytest.raises(ValueError, match="exceeds max_len=32"):
        ef.decode_throughput(params, batch=1, context=30, steps=5)
    with pytest.raises(ValueError, match="one max_new >= 1 per prompt"):
        ef.static_generate(params, [np.array([1])], [1, 2], 1)
    with pytest.raises(TypeError, match="decoder's params"):
        ef.kv_cache_bytes({"d_model": 3}, 4)


# --- production: torchao int8 and transformers' KV cache --------------------------------------------------

def _torchao():
    warnings.filterwarnings("ignore", message=".*Enum subclass.*")
    pytest.importorskip("torch")
    return pytest.importorskip("torchao.quantization")


@pytest.mark.parametrize("outlier", [None, 3])
def test_torchao_int8_weight_only_has_our_codes_scales_and_outputs(outlier):
    import torch

    tq = _torchao()
    W = _weight((48, 40), np.float32, seed=9, outlier=outlier)  # ours: (in, out); torch: (out, in)
    lin = torch.nn.Linear(48, 40, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(W.T.copy()))
    model = torch.nn.Sequential(lin)
    tq.quantize_(model, tq.Int8WeightOnlyConfig())
    w = model[0].weight
    assert type(w).__name__ == "Int8Tensor" and w.qdata.dtype == torch.int8  # it ran: the weight is int8 now
    q, s = qz.quantize_int8(W, axis=-1, levels="full")  # torchao's convention: max|W| / 127.5, [-128, 127]
    np.testing.assert_array_equal(w.qdata.numpy(), q.T)
    np.testing.assert_array_equal(w.scale.numpy().reshape(-1), s)
    x = np.random.default_rng(10).standard_normal((5, 48)).astype(np.float32)
    with torch.no_grad():
        y = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(y, qz.int8_linear(x, q, s), rtol=1e-4, atol=1e-4)
    assert np.all(np.abs(x @ W - y) <= qz.matmul_error_bound(x, s) * (1 + 1e-5) + 1e-4)
    # the restricted scheme of the chapter has steps 127.5/127 larger and the same bound
    s_r = qz.quantize_int8(W)[1]
    np.testing.assert_allclose(s_r / s, 127.5 / 127, rtol=1e-6)


@pytest.fixture(scope="module")
def gpt2_pair():
    os.environ["HF_HUB_OFFLINE"] = "1"
    pytest.importorskip("transformers")
    _torchao()  # transformers imports torchao when present: keep its warnings quiet
    params = decoder_init(vocab=64, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=64, seed=4)
    return params, ef.to_gpt2(params)


def test_gpt2_holding_our_weights_gives_our_logits(gpt2_pair):
    import torch

    params, model = gpt2_pair
    toks = np.random.default_rng(5).integers(0, 64, size=(3, 30))
    with torch.no_grad():
        hf = model(torch.from_numpy(toks)).logits.numpy()
    np.testing.assert_allclose(hf, decoder_forward(params, toks), rtol=1e-9, atol=1e-9)


def test_transformers_generates_our_tokens_with_and_without_its_kv_cache(gpt2_pair):
    import torch

    params, model = gpt2_pair
    rng = np.random.default_rng(6)
    prompts = [rng.integers(0, 64, size=n) for n in (1, 6, 11)]
    ours = generate(params, prompts, 20)
    for prompt, want in zip(prompts, ours):
        assert want == reference_generate(params, prompt, 20)
        ids = torch.from_numpy(prompt[None])
        for use_cache in (True, False):
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=20, min_new_tokens=20,
                                 do_sample=False, use_cache=use_cache)
            assert out[0, len(prompt):].tolist() == want, use_cache


def test_torchao_dynamic_int8_equals_our_int32_accumulation():
    import torch

    tq = _torchao()
    W = _weight((48, 40), np.float32, seed=11, outlier=2)
    lin = torch.nn.Linear(48, 40, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(W.T.copy()))
    model = torch.nn.Sequential(lin)
    tq.quantize_(model, tq.Int8DynamicActivationInt8WeightConfig())
    w = model[0].weight
    assert type(w).__name__ == "Int8Tensor" and w.act_quant_kwargs is not None  # activations are quantized too
    q, s = qz.quantize_int8(W, levels="full")
    np.testing.assert_array_equal(w.qdata.numpy(), q.T)
    x = np.random.default_rng(12).standard_normal((6, 48)).astype(np.float32)
    with torch.no_grad():
        y = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(y, qz.int8_linear_dynamic(x, q, s, levels="full"), rtol=1e-5, atol=1e-5)
    assert np.abs(y - qz.int8_linear_dynamic(x, q, s)).max() > 1e-4  # the activation levels matter: not vacuous


def test_kv_bytes_per_token_takes_kv_heads_llama3_8b_is_128_kib_in_bf16():
    m = ef.OPEN_MODELS["Llama-3-8B"]
    assert (m.n_layers, m.n_kv_heads, m.head_dim) == (32, 8, 128)
    assert ef.kv_bytes_per_token(32, 8, 128, itemsize=2) == m.kv_bytes_per_token() == 128 * 1024
    assert ef.OPEN_MODELS["Llama-2-7B (MHA)"].kv_bytes_per_token() == 512 * 1024  # one K/V head per query head
    assert ef.OPEN_MODELS["SmolLM2-135M"].kv_bytes_per_token() == 2 * 30 * 3 * 64 * 2
    # 80 GB holds 8.03e9 * 2 bytes of weights and floor(63.94e9 / (4096 * 131072)) sequences of 4096 tokens
    assert ef.max_batch(m, 4096, 80e9) == int((80e9 - 8.03e9 * 2) // (4096 * 131072)) == 119
    assert ef.max_batch(ef.OPEN_MODELS["Llama-3-70B"], 4096, 80e9) == 0  # 141 GB of bf16 weights do not fit


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_our_decoders_kv_cache_formula_takes_kv_heads_and_matches_the_cache_object(n_kv_heads):
    params = decoder_init(vocab=40, d_model=32, n_heads=4, n_layers=3, d_ff=48, max_len=20, seed=0,
                          n_kv_heads=n_kv_heads)
    cache = ContiguousCache(params, 5, max_len=20)
    assert cache.nbytes == ef.kv_cache_bytes(params, 20, 5) == 2 * 3 * 20 * n_kv_heads * 8 * 8 * 5
    # P counts Wk and Wv at their GQA width
    assert ef.matrix_params(params) == sum(b[w].size for b in params["blocks"] for w in
                                           ("Wq", "Wk", "Wv", "Wo", "W1", "W2")) + params["head"].size
    assert ef.decode_cost(params, 10, 2).bytes == 8 * (ef.matrix_params(params) + 2 * (2 * 3 * 10 * 8 * n_kv_heads
                                                                                       + 2 * 32))


def test_the_decode_throughput_model_reads_the_kv_cache_as_well_as_the_weights():
    from scaleoutai.perf import hardware

    m, gpu = ef.OPEN_MODELS["Llama-2-7B (MHA)"], hardware.H100_SXM
    weights_only = ef.decode_tokens_per_s(m, 64, 512, gpu, kv=False)
    both = ef.decode_tokens_per_s(m, 64, 512, gpu)
    assert weights_only == pytest.approx(64 * gpu.hbm_bandwidth / (m.params * 2))
    assert both == pytest.approx(64 * gpu.hbm_bandwidth / (m.params * 2 + 64 * 512 * 512 * 1024))
    assert weights_only / both > 2  # the cache of 64 sequences at 512 tokens outweighs the weights
    gqa = ef.OPEN_MODELS["Mistral-7B"]
    assert ef.decode_tokens_per_s(gqa, 64, 512, gpu) > 1.5 * ef.decode_tokens_per_s(m, 64, 512, gpu)
