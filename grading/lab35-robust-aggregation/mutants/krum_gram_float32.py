# mutant: Krum's distances through the Gram matrix ||a||^2 + ||b||^2 - 2a.b in the input's dtype: exact on small integers, cancels on float32 vectors far from 0
# loses: krum, multi_krum
# says: differences first
REPLACE = [("    dist = ((V64[:, None, :] - V64[None, :, :]) ** 2).sum(axis=-1)",
            "    norms = (V * V).sum(axis=1)\n"
            "    dist = (norms[:, None] + norms[None, :] - 2 * (V @ V.T)).astype(np.float64)")]
