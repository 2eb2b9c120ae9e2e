# mutant: the chapter's checkpoint and resume (elastic._worker, save_checkpoint, latest_checkpoint, reshard) adapted by hand: every block gathered to rank 0, which writes one .npz atomically; a restart re-splits it
# loses: reshard, traffic, commit, checksum
# says: the lab asks for one shard file per rank
# score-at-most: 50
import zipfile


def _save_npz(path, state):
    directory = os.path.dirname(os.path.abspath(path))  # noqa: F821
    fd, tmp = tempfile.mkstemp(prefix=".ckpt-", suffix=".tmp", dir=directory)  # noqa: F821
    try:
        with os.fdopen(fd, "wb") as f:  # noqa: F821
            np.savez(f, **state)  # noqa: F821
            f.flush()
            os.fsync(f.fileno())  # noqa: F821
        os.replace(tmp, path)  # noqa: F821
    except BaseException:
        if os.path.exists(tmp):  # noqa: F821
            os.unlink(tmp)  # noqa: F821
        raise


def _latest(ckpt_dir):
    names = re.compile(r"^ckpt-(\d{8})\.npz$")  # noqa: F821
    steps = sorted((int(m.group(1)) for m in map(names.match, os.listdir(ckpt_dir)) if m), reverse=True)  # noqa: F821
    for step in steps:
        try:
            with np.load(os.path.join(ckpt_dir, f"ckpt-{step:08d}.npz"), allow_pickle=False) as z:  # noqa: F821
                return step, {k: z[k] for k in z.files}
        except (zipfile.BadZipFile, ValueError, EOFError, OSError):
            continue  # a torn file: fall back to the one before
    return None


def _gather(comm, x, root=0):
    if comm.rank != root:
        comm.send(x, root)
        return None
    return [x if q == root else comm.recv(q) for q in range(comm.size)]


def train_sharded(comm, data, w0, steps, lr, ckpt_dir, every):
    A, b = data[:, :-1], data[:, -1]
    n, K, r = A.shape[1], comm.size, comm.rank
    lo, hi = block(n, K, r)  # noqa: F821
    os.makedirs(ckpt_dir, exist_ok=True)  # noqa: F821
    found = _latest(ckpt_dir)
    if found:
        start, ck = found
        w = np.array_split(ck["w"], K)[r].astype(w0.dtype)  # noqa: F821  (reshard: concatenate, then split)
        mom = np.array_split(ck["mom"], K)[r].astype(w0.dtype)  # noqa: F821
    else:
        start, w, mom = 0, w0.copy(), np.zeros_like(w0)  # noqa: F821
    for s in range(start, steps):
        g = gradient(A, b, all_gather(comm, w))[lo:hi]  # noqa: F821
        mom = MU * mom + g  # noqa: F821
        w = w - lr * mom
        if (s + 1) % every == 0:
            ws, ms = _gather(comm, w), _gather(comm, mom)
            if r == 0:
                _save_npz(os.path.join(ckpt_dir, f"ckpt-{s + 1:08d}.npz"),  # noqa: F821
                          {"w": np.concatenate(ws), "mom": np.concatenate(ms), "K": K})  # noqa: F821
            comm.barrier()
    return np.stack([w, mom])  # noqa: F821
