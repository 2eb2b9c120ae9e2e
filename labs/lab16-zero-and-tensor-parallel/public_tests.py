"""Public tests for lab 16: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.nn import adam_update
from scaleoutai.grading.public import check


def _check_quantize(quantize_blocks, dequantize_blocks):
    x = np.array([0.9, -2.0, 0.5, 0.0, 0.0, 0.0, 3e-3, -1e-3, 2e-3])
    codes, scales = quantize_blocks(x, 3)
    assert codes.dtype == np.int8 and codes.shape == (9,), f"codes: {codes.dtype}, {codes.shape}; want int8, (9,)"
    assert scales.dtype == x.dtype and scales.shape == (3,), f"scales: {scales.dtype}, {scales.shape}"
    np.testing.assert_array_equal(codes, [57, -127, 32, 0, 0, 0, 127, -42, 85], err_msg="codes of x in blocks of 3")
    np.testing.assert_allclose(scales, [2 / 127, 0.0, 3e-3 / 127], rtol=1e-12, err_msg="one scale per block")
    back = dequantize_blocks(codes, scales, 3)
    assert np.all(np.abs(back - x) <= np.repeat(scales, 3) / 2 + 1e-15), "|dequantized - x| > scale / 2"
    c32, s32 = quantize_blocks(x.astype(np.float32)[:7], 4)
    assert s32.dtype == np.float32 and c32.shape == (7,) and s32.shape == (2,), "float32, a short last block"
    e, es = quantize_blocks(np.zeros(0), 4)
    assert e.size == 0 and es.size == 0, "an empty shard has no codes and no scales"


def _check_step(zero_init, qwz_adam_step, quantize_blocks, dequantize_blocks, K, psi, qblock, steps=3, lr=0.01):
    rng = np.random.default_rng(K * 10 + psi)
    p0 = rng.standard_normal(psi)
    grads = rng.standard_normal((steps, K, psi))

    def worker(comm):
        state = zero_init(comm, p0)
        for s in range(steps):
            w = qwz_adam_step(comm, grads[s, comm.rank], state, lr, qblock)
        held = sum(a.size for a in state.values() if isinstance(a, np.ndarray) and a.dtype.kind == "f")
        return w, state["master"], held

    res = cluster.run(worker, K, backend="sim", timeout=60, quiet=True)
    want, m, v = p0.copy(), np.zeros(psi), np.zeros(psi)
    for s in range(steps):
        adam_update(want, grads[s].sum(axis=0), m, v, s + 1, lr)
    shards = np.array_split(want, K)
    deq = np.concatenate([dequantize_blocks(*quantize_blocks(b, qblock), qblock) for b in shards])
    for r in range(K):
        w, master, held = res.values[r]
        np.testing.assert_allclose(master, shards[r], rtol=1e-9, atol=1e-9, err_msg=f"K={K}, rank {r}'s master shard")
        np.testing.assert_allclose(w, deq, rtol=1e-9, atol=1e-12, err_msg=f"K={K}, rank {r}'s int8 weights")
        assert held <= 3 * -(-psi // K), f"rank {r}'s state holds {held} values; keep master, m, v of your shard"


NOTE = ("public tests passed; the grader also tries K > Psi, zero blocks, mixed magnitudes, float32, memory, "
        "what goes on the wire and real processes")


@check
def block_quantization(quantize_blocks, dequantize_blocks):
    _check_quantize(quantize_blocks, dequantize_blocks)


@check
def qwz_adam_steps(quantize_blocks, dequantize_blocks, zero_init, qwz_adam_step):
    for K, psi, qblock in ((1, 10, 4), (2, 16, 4), (3, 20, 3)):
        _check_step(zero_init, qwz_adam_step, quantize_blocks, dequantize_blocks, K, psi, qblock)
