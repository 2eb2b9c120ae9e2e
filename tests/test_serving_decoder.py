"""The tiny NumPy decoder: a cached decode step equals the uncached forward, greedy tokens agree."""
import numpy as np
import pytest

from scaleoutai.serving.decoder import (ContiguousCache, decode_step, decoder_forward, decoder_init, generate,
                                        reference_generate)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 2e-4)])
def test_cached_decode_steps_equal_the_uncached_forward_at_every_position(dtype, tol):
    params = decoder_init(vocab=50, d_model=24, n_heads=3, n_layers=2, d_ff=40, max_len=32, seed=1, dtype=dtype)
    toks = np.random.default_rng(0).integers(0, 50, size=(3, 9))
    full = decoder_forward(params, toks)
    cache = ContiguousCache(params, 3)
    for t in range(9):
        step = decode_step(params, toks[:, t], np.full(3, t), cache)
        assert step.dtype == dtype
        np.testing.assert_allclose(step, full[:, t], rtol=tol, atol=tol)


def test_greedy_generation_with_the_cache_emits_the_reference_tokens_for_ragged_prompts():
    params = decoder_init(vocab=40, d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=40, seed=3)
    rng = np.random.default_rng(1)
    prompts = [rng.integers(0, 40, size=n) for n in (1, 5, 2, 8)]
    got = generate(params, prompts, max_new=7)
    assert got == [reference_generate(params, p, 7) for p in prompts]
    assert all(len(g) == 7 for g in got)


def test_a_cache_that_forgets_a_token_changes_the_output():
    params = decoder_init(vocab=30, d_model=16, n_heads=2, n_layers=1, d_ff=16, max_len=16, seed=5)

    class Forgetful(ContiguousCache):
        def read(self, layer, seq, length):
            lo = 1 if length > 1 else 0  # drops the first token once there is another to attend to
            return self.k[layer, seq, lo:length], self.v[layer, seq, lo:length]

    toks = np.arange(6)
    full = decoder_forward(params, toks[None])[0]
    cache = Forgetful(params, 1)
    last = [decode_step(params, toks[t:t + 1], np.array([t]), cache)[0] for t in range(6)][-1]
    assert not np.allclose(last, full[-1], atol=1e-6)


def test_bad_tokens_and_positions_are_one_clear_error():
    params = decoder_init(vocab=10, max_len=4)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 10\)"):
        decoder_forward(params, np.array([[3, 10]]))
    with pytest.raises(ValueError, match="past max_len=4"):
        generate(params, [np.array([1, 2, 3])], max_new=3)
    with pytest.raises(ValueError, match="at least one token"):
        generate(params, [np.array([], dtype=int)], max_new=1)


def test_gqa_with_as_many_kv_heads_as_heads_is_the_old_decoder_bit_for_bit():
    old = decoder_init(vocab=50, d_model=24, n_heads=3, n_layers=2, d_ff=40, max_len=32, seed=1)
    new = decoder_init(vocab=50, d_model=24, n_heads=3, n_layers=2, d_ff=40, max_len=32, seed=1, n_kv_heads=3)
    for a, b in zip(old["blocks"], new["blocks"]):
        assert all(np.array_equal(a[key], b[key]) for key in a)
    toks = np.random.default_rng(0).integers(0, 50, size=(2, 7))
    assert np.array_equal(decoder_forward(old, toks), decoder_forward(new, toks))
    c_old, c_new = ContiguousCache(old, 2), ContiguousCache(new, 2)
    for t in range(7):
        assert np.array_equal(decode_step(old, toks[:, t], np.full(2, t), c_old),
                              decode_step(new, toks[:, t], np.full(2, t), c_new))


@pytest.mark.parametrize("n_heads,n_kv_heads", [(4, 2), (4, 1), (6, 3), (6, 2)])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 2e-4)])
def test_gqa_cached_decoding_equals_mha_with_the_kv_heads_repeated(n_heads, n_kv_heads, dtype, tol):
    from scaleoutai.serving.decoder import kv_width, repeat_kv_heads

    d = 8 * n_heads
    gqa = decoder_init(vocab=40, d_model=d, n_heads=n_heads, n_layers=2, d_ff=32, max_len=24, seed=2, dtype=dtype,
                       n_kv_heads=n_kv_heads)
    assert gqa["blocks"][0]["Wk"].shape == (d, 8 * n_kv_heads) == gqa["blocks"][0]["Wv"].shape
    mha = repeat_kv_heads(gqa)
    assert mha["config"]["n_kv_heads"] == n_heads and mha["blocks"][0]["Wk"].shape == (d, d)
    toks = np.random.default_rng(3).integers(0, 40, size=(3, 10))
    full = decoder_forward(mha, toks)  # nn.block_forward: plain multi-head attention
    cache = ContiguousCache(gqa, 3)
    assert cache.k.shape[-1] == kv_width(gqa) == 8 * n_kv_heads  # the cache stores KV heads only
    for t in range(10):  # decode_step attends each group of query heads to its own KV head, no repeat
        np.testing.assert_allclose(decode_step(gqa, toks[:, t], np.full(3, t), cache), full[:, t], rtol=tol,
                                   atol=tol)
    assert generate(gqa, [toks[0, :4]], 6) == [reference_generate(mha, toks[0, :4], 6)]


def test_gqa_kv_heads_must_divide_the_query_heads():
    with pytest.raises(ValueError, match="must divide n_heads=4"):
        decoder_init(d_model=32, n_heads=4, n_kv_heads=3)
