"""Tensor-parallel inference equals the dense decoder for every K."""
import numpy as np
import pytest

from scaleoutai import cluster
from scaleoutai.serving.decoder import decoder_forward, decoder_init
from scaleoutai.serving.tensor_inference import block_bytes, run_tp_forward, shard_decoder


@pytest.mark.parametrize("K", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 1e-4)])
def test_tensor_parallel_forward_equals_the_dense_decoder(K, dtype, tol):
    # 6 heads and d_ff = 20: K = 5 and 8 split them unevenly, K = 8 leaves ranks with no heads
    params = decoder_init(vocab=30, d_model=24, n_heads=6, n_layers=2, d_ff=20, max_len=16, seed=2, dtype=dtype)
    toks = np.random.default_rng(K).integers(0, 30, size=(2, 7))
    res = cluster.run(run_tp_forward, K, args=(params, toks), timeout=60)
    want = decoder_forward(params, toks)
    for logits, _ in res.values:
        assert logits.dtype == dtype
        np.testing.assert_allclose(logits, want, rtol=tol, atol=tol)


def test_each_rank_holds_its_share_of_the_block_weights():
    params = decoder_init(d_model=32, n_heads=4, n_layers=2, d_ff=64)
    full = block_bytes(shard_decoder(params, 1, 0))
    parts = [block_bytes(shard_decoder(params, 4, r)) for r in range(4)]
    replicated = sum(b[k].nbytes for b in params["blocks"] for k in ("ln1_g", "ln1_b", "ln2_g", "ln2_b", "b2"))
    assert sum(parts) == full + 3 * replicated
    assert max(parts) < full / 4 + replicated + 1


def test_a_rank_that_skips_its_all_reduce_part_changes_the_answer():
    params = decoder_init(vocab=20, d_model=16, n_heads=2, n_layers=1, d_ff=16, max_len=8, seed=4)
    toks = np.arange(5)[None]
    shard = shard_decoder(params, 2, 0)

    def only_rank0(comm):
        s = shard_decoder(params, 2, comm.rank) if comm.rank == 0 else shard_decoder(params, 2, 0)
        from scaleoutai.serving.tensor_inference import tp_decoder_forward
        return tp_decoder_forward(comm, s, toks)

    res = cluster.run(only_rank0, 2, timeout=60)
    assert not np.allclose(res.values[0], decoder_forward(params, toks), atol=1e-6)
    assert shard["blocks"][0]["heads"] == 1


@pytest.mark.slow
def test_tensor_parallel_forward_on_processes_equals_the_dense_decoder():
    params = decoder_init(vocab=30, d_model=24, n_heads=3, n_layers=2, d_ff=20, max_len=16, seed=2)
    toks = np.random.default_rng(0).integers(0, 30, size=(2, 6))
    res = cluster.run(run_tp_forward, 2, backend="process", args=(params, toks), timeout=120)
    for logits, _ in res.values:
        np.testing.assert_allclose(logits, decoder_forward(params, toks), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n_kv_heads", [1, 2, 3])
@pytest.mark.parametrize("K", [1, 2, 3, 4, 7])
def test_tensor_parallel_forward_of_a_gqa_decoder_equals_the_dense_decoder(K, n_kv_heads):
    """A rank holds whole GQA groups (KV heads with their query heads); K > n_kv_heads leaves ranks headless."""
    params = decoder_init(vocab=30, d_model=24, n_heads=6, n_layers=2, d_ff=20, max_len=16, seed=3,
                          n_kv_heads=n_kv_heads)
    tokens = np.random.default_rng(1).integers(0, 30, size=(2, 9))
    res = cluster.run(run_tp_forward, K, args=(params, tokens), backend="sim", timeout=60)
    want = decoder_forward(params, tokens)
    for logits, _ in res.values:
        np.testing.assert_allclose(logits, want, rtol=1e-10, atol=1e-10)
    kv_cols = [shard_decoder(params, K, r)["blocks"][0]["Wk"].shape[1] for r in range(K)]
    assert sum(kv_cols) == n_kv_heads * 4 and all(c % 4 == 0 for c in kv_cols)  # whole KV heads of d_h = 4
