"""Part IV reference model: hand-written gradients against central finite differences in float64."""
import numpy as np
import pytest

from scaleoutai import nn


def _close(a, b, rtol=1e-5, atol=1e-8):
    for k in b:
        np.testing.assert_allclose(a[k], b[k], rtol=rtol, atol=atol, err_msg=k)


@pytest.mark.parametrize("sizes", [[3, 5, 2], [4, 6, 7, 3], [2, 1]])
def test_mlp_gradients_match_finite_differences(sizes):
    rng = np.random.default_rng(1)
    p = nn.mlp_init(sizes, seed=2)
    x, t = rng.standard_normal((5, sizes[0])), rng.standard_normal((5, sizes[-1]))

    def f(pp):
        return nn.mse_loss(nn.mlp_forward(pp, x)[0], t)[0]

    y, cache = nn.mlp_forward(p, x)
    assert y.shape == (5, sizes[-1])
    dx, g = nn.mlp_backward(p, cache, nn.mse_loss(y, t)[1])
    assert set(g) == set(p) and all(g[k].shape == p[k].shape for k in p)
    _close(g, nn.numerical_gradient(f, p))
    num_dx = nn.numerical_gradient(lambda d: nn.mse_loss(nn.mlp_forward(p, d["x"])[0], t)[0], {"x": x.copy()})
    np.testing.assert_allclose(dx, num_dx["x"], rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("shape,n_heads", [((2, 4, 8), 2), ((5, 6), 3), ((1, 3, 4), 1)])
def test_block_gradients_match_finite_differences(shape, n_heads):
    d = shape[-1]
    rng = np.random.default_rng(3)
    p = nn.block_init(d, n_heads, 2 * d, seed=4)
    x, w = rng.standard_normal(shape), rng.standard_normal(shape)

    def f(pp, xx=x):
        return float((nn.block_forward(pp, xx, n_heads)[0] * w).sum())

    y, cache = nn.block_forward(p, x, n_heads)
    assert y.shape == x.shape
    dx, g = nn.block_backward(p, cache, w, n_heads)
    assert set(g) == set(p) and all(g[k].shape == p[k].shape for k in p)
    _close(g, nn.numerical_gradient(f, p))
    np.testing.assert_allclose(dx, nn.numerical_gradient(lambda dd: f(p, dd["x"]), {"x": x.copy()})["x"],
                               rtol=1e-5, atol=1e-8)


def test_block_attention_is_causal():
    p = nn.block_init(8, 2, 16, seed=0)
    x = np.random.default_rng(0).standard_normal((1, 5, 8))
    x2 = x.copy()
    x2[0, 3:] += 1.0  # changing later tokens must not change earlier outputs
    y, y2 = nn.block_forward(p, x, 2)[0], nn.block_forward(p, x2, 2)[0]
    np.testing.assert_array_equal(y[0, :3], y2[0, :3])
    assert not np.allclose(y[0, 3:], y2[0, 3:])


def test_softmax_cross_entropy_gradient_and_value():
    rng = np.random.default_rng(5)
    logits, labels = rng.standard_normal((4, 3, 6)), rng.integers(0, 6, size=(4, 3))
    loss, d = nn.softmax_cross_entropy(logits, labels)
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    ref = -np.mean(np.log(np.take_along_axis(p, labels[..., None], -1)))
    assert loss == pytest.approx(ref, rel=1e-12)
    num = nn.numerical_gradient(lambda q: nn.softmax_cross_entropy(q["z"], labels)[0], {"z": logits.copy()})
    np.testing.assert_allclose(d, num["z"], rtol=1e-5, atol=1e-9)


def test_flatten_unflatten_round_trip_in_sorted_key_order():
    p = nn.block_init(4, 2, 6, seed=1, dtype=np.float32)
    v = nn.flatten(p)
    assert v.dtype == np.float32 and v.size == sum(a.size for a in p.values())
    assert np.array_equal(v[:p["W1"].size], p["W1"].ravel())  # "W1" sorts first (uppercase)
    q = nn.unflatten(v, p)
    assert list(q) == sorted(p) and all(np.array_equal(q[k], p[k]) and q[k].dtype == np.float32 for k in p)
    h = nn.unflatten(v.astype(np.float16), p)
    assert all(a.dtype == np.float16 for a in h.values())
    with pytest.raises(ValueError, match="expected"):
        nn.unflatten(v[:-1], p)


def test_mlp_init_shapes_dtype_and_bad_sizes():
    p = nn.mlp_init([3, 4, 2], seed=0, dtype=np.float32)
    assert sorted(p) == ["W0", "W1", "b0", "b1"]
    assert p["W0"].shape == (3, 4) and p["b1"].shape == (2,) and p["W1"].dtype == np.float32
    with pytest.raises(ValueError, match="sizes"):
        nn.mlp_init([3])


def test_adam_step_matches_closed_form_first_step_and_sgd_skips_frozen():
    p = {"a": np.array([1.0, -2.0]), "b": np.array([3.0])}
    g = {"a": np.array([0.5, -4.0])}
    st = nn.adam_init(p)
    nn.adam_step(p, g, st, lr=0.1)
    # first Adam step moves by lr * sign(g) (up to eps)
    np.testing.assert_allclose(p["a"], [0.9, -1.9], rtol=1e-7)
    assert st["t"] == 1 and p["b"][0] == 3.0
    nn.sgd_step(p, {"b": np.array([1.0])}, lr=0.5)
    assert p["b"][0] == 2.5 and p["a"][0] == pytest.approx(0.9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_causal_attention_keeps_the_input_dtype(dtype):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 5, 8)).astype(dtype) for _ in range(3))
    out, cache = nn.causal_attention_forward(q, k, v, 2)
    assert out.dtype == dtype
    assert all(g.dtype == dtype for g in nn.causal_attention_backward(cache, np.ones_like(out)))
