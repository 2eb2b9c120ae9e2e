"""Public tests for lab 10: run them from the notebook's last cell. The grader runs more, hidden ones."""
import numpy as np

from scaleoutai import cluster
from scaleoutai.grading.public import check

NOTE = "public tests passed; the grader also checks K = 1, 3, 5, 7, several steps, bytes, training and processes"


@check
def sign_compress_packs_and_scales(sign_compress, sign_decompress):
    p = np.array([1.0, -2.0, 3.0, -4.0])
    packed, sc = sign_compress(p)
    assert packed.dtype == np.uint8 and packed.tolist() == [0b10100000], "signs 1 for +, coordinate 0 in the top bit"
    assert sc.shape == (1,) and sc.dtype == p.dtype and sc[0] == 2.5, "the scale is ||p||_1 / d"
    assert sign_decompress(packed, sc, 4).tolist() == [2.5, -2.5, 2.5, -2.5], "C(p) = scale * sign(p)"


@check
def zeros_are_positive(sign_compress):
    packed, sc = sign_compress(np.zeros(3, dtype=np.float32))
    assert packed.tolist() == [0b11100000] and sc.dtype == np.float32, "zero is +1; padding bits are 0"


@check
def error_feedback_allreduce(ef_sign_allreduce):
    grads = [np.array([3.0, -1.0, 0.5, 2.0]), np.array([0.0, 4.0, -0.5, 1.0])]
    def worker(comm):
        return ef_sign_allreduce(comm, grads[comm.rank], np.zeros(4))

    res = cluster.run(worker, 2, timeout=60)
    for r, (avg, residual) in enumerate(res.values):
        assert np.allclose(avg, [1.5, -0.125, 0.125, 1.5]), f"rank {r}: the average of the two C(p) is wrong"
    assert np.allclose(res.values[0][1], [1.375, 0.625, -1.125, 0.375]), "rank 0 keeps back p - C(p)"
    assert np.allclose(res.values[1][1], [-1.375, 2.625, 0.875, -0.375]), "rank 1 keeps back p - C(p)"
