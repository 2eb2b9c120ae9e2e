"""Tiled attention with the online softmax equals naive attention and torch's SDPA; its HBM count."""
import numpy as np
import pytest

from scaleoutai.serving.flash_attention import (Traffic, blocks_for_sram, flash_attention, flash_attention_traffic,
                                                naive_attention, naive_attention_traffic)

TOL = {np.float64: 1e-12, np.float32: 2e-6}


def _qkv(shape_q, M, dtype, seed=0, spread=1.0):
    rng = np.random.default_rng(seed)
    *lead, N, d = shape_q
    q = rng.standard_normal(shape_q) * spread
    k = rng.standard_normal((*lead, M, d)) * spread
    v = rng.standard_normal((*lead, M, d))
    return q.astype(dtype), k.astype(dtype), v.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("N,d,bq,bk", [(64, 16, 16, 16), (50, 8, 7, 13), (33, 32, 64, 5), (17, 4, 1, 1),
                                       (40, 16, 40, 40)])
def test_tiled_attention_equals_naive_for_blocks_that_do_and_do_not_divide_the_length(dtype, causal, N, d, bq, bk):
    q, k, v = _qkv((2, 3, N, d), N, dtype)
    got = flash_attention(q, k, v, causal=causal, block_q=bq, block_k=bk)
    want = naive_attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), causal=causal)
    assert got.dtype == dtype and got.shape == q.shape
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])


def test_rectangular_non_causal_attention_and_large_scores_stay_finite():
    q, k, v = _qkv((5, 8), 23, np.float64, spread=30.0)  # scores of several hundred: exp would overflow unshifted
    got = flash_attention(q, k, v, block_q=2, block_k=6)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, naive_attention(q, k, v), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-6), (np.float64, 1e-12)])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_attention_equals_torch_scaled_dot_product_attention(dtype, tol, causal):
    torch = pytest.importorskip("torch")
    q, k, v = _qkv((2, 4, 45, 16), 45, dtype, seed=3)
    ref = torch.nn.functional.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k),
                                                           torch.from_numpy(v), is_causal=causal).numpy()
    for bq, bk in ((8, 8), (10, 7), (45, 64)):
        np.testing.assert_allclose(flash_attention(q, k, v, causal=causal, block_q=bq, block_k=bk), ref,
                                   rtol=tol, atol=tol)


def test_a_missing_rescale_is_caught():
    """Without the c = exp(m_old - m_new) correction the blocks are summed under different maxima."""
    q, k, v = _qkv((16, 8), 16, np.float64, seed=4, spread=2.0)
    s = q @ k.T / np.sqrt(8)
    wrong = np.zeros_like(q)
    for j in range(0, 16, 4):  # each block normalised against its own max, no rescaling
        p = np.exp(s[:, j:j + 4] - s[:, j:j + 4].max(axis=1, keepdims=True))
        wrong += p @ v[j:j + 4]
    wrong /= np.exp(s - s.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True)
    assert not np.allclose(wrong, naive_attention(q, k, v), atol=1e-3)
    np.testing.assert_allclose(flash_attention(q, k, v, block_q=16, block_k=4), naive_attention(q, k, v), atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("N,d,bq,bk,heads", [(64, 16, 16, 16, 1), (50, 8, 7, 13, 3), (100, 32, 32, 64, 2)])
def test_the_loop_moves_exactly_the_counted_elements(causal, N, d, bq, bk, heads):
    q, k, v = _qkv((heads, N, d), N, np.float64)
    t = Traffic()
    flash_attention(q, k, v, causal=causal, block_q=bq, block_k=bk, traffic=t)
    assert t == flash_attention_traffic(N, d, bq, bk, causal=causal, heads=heads)


def test_traffic_formulas_and_growth():
    naive = naive_attention_traffic(1024, 64)
    assert naive.total == 4 * 1024 * 64 + 4 * 1024 ** 2
    # non-causal tiled traffic = 2 N d + 2 d N ceil(N / block_q)
    assert flash_attention_traffic(1024, 64, 64, 128).total == 2 * 1024 * 64 + 2 * 64 * 1024 * 16
    bq, bk = blocks_for_sram(100 * 1024, 128, itemsize=2)
    assert (bq, bk) == (100, 100)
    r = [naive_attention_traffic(N, 128).total / flash_attention_traffic(N, 128, bq, bk).total
         for N in (1024, 4096, 16384)]
    assert all(x > 1.4 for x in r) and r[-1] >= r[0] - 0.05
    # a larger SRAM (larger blocks) moves less
    assert flash_attention_traffic(4096, 128, 128, 128).total < flash_attention_traffic(4096, 128, 32, 32).total
    with pytest.raises(ValueError, match="cannot hold"):
        blocks_for_sram(256, 128)


def test_shape_errors_are_clear():
    q, k, v = _qkv((4, 8), 6, np.float64)
    with pytest.raises(ValueError, match="as many queries as keys"):
        flash_attention(q, k, v, causal=True)
    with pytest.raises(ValueError, match="block sizes"):
        flash_attention(q, k, v, block_q=0)
