"""Lab 18: a sharded, checksummed checkpoint that resumes bit for bit on K' != K ranks."""
from __future__ import annotations

import hashlib
import io

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, graded_after

SHARED_FOLDER = "ckpt"  # every rank sees the checkpoints, as on a cluster's shared file system
UNIMPORTABLE = ("scaleoutai.parallel", "scaleoutai.infra")  # elastic.py (gather + reshard), integrity.py (manifest)

HEAVY_BALL = 0.9
SAYS = ("the lab asks for one shard file per rank (only a 32-byte sha256 digest goes to rank 0) and a manifest "
        "committed last; a checkpoint gathered to rank 0 does not")
# (K, rows, n, steps, every, dtype, backend): uninterrupted runs; n < K gives empty blocks
TRAIN = [(1, 6, 4, 7, 3, "float64", "sim"), (2, 9, 5, 8, 2, "float64", "sim"), (3, 10, 7, 9, 4, "float32", "sim"),
         (5, 12, 6, 7, 3, "float64", "sim"), (8, 6, 5, 6, 2, "float64", "sim"), (2, 8, 5, 6, 7, "float64", "sim"),
         (2, 8, 4, 6, 3, "float64", "process")]
# (K, K', rows, n, steps, every, crashing rank, how, step, dtype, damage): how = "step" (it dies at its first
# send of that step), "digest" (it dies sending the digest of that checkpoint), "stop" (the job ran that many
# steps); damage = (kind, shard) applied to the newest committed checkpoint before the restart
RUNS = [(2, 2, 10, 5, 12, 3, 1, "step", 8, "float64", None),
        (3, 3, 9, 7, 10, 2, 0, "step", 7, "float32", None),    # the manifest writer crashes
        (4, 4, 8, 6, 9, 4, 3, "step", 3, "float64", None),     # before the first checkpoint: from scratch
        (3, 3, 10, 6, 9, 3, 2, "digest", 6, "float64", None),  # shards of step 6 written, never committed
        (2, 3, 10, 5, 12, 3, 1, "step", 8, "float64", None),
        (3, 2, 9, 7, 10, 2, 1, "step", 7, "float32", None),
        (4, 1, 8, 6, 9, 2, 2, "step", 7, "float64", None),
        (1, 3, 8, 5, 9, 2, None, "stop", 6, "float64", None),
        (3, 5, 10, 4, 8, 2, 1, "step", 5, "float64", None),     # K' > n: empty blocks
        (5, 8, 12, 6, 8, 3, 4, "digest", 6, "float32", None),
        (3, 3, 10, 6, 10, 2, 1, "step", 7, "float64", ("flip", 1)),
        (2, 3, 10, 5, 10, 3, 1, "step", 8, "float64", ("truncate", 0)),
        (3, 2, 9, 7, 10, 2, 2, "step", 9, "float32", ("delete", 2)),
        (2, 2, 8, 4, 9, 2, 1, "step", 7, "float64", ("manifest", None)),
        (3, 2, 9, 9, 12, 2, 1, "step", 9, "float64", ("two", (2, 0))),  # each new rank sees one bad checkpoint
        (4, 2, 8, 5, 9, 3, 0, "step", 8, "float64", ("flip", 1))]
RANDOM = 2  # property runs: random K, K', sizes, crash and damage (seeded rng)
ATOMIC_KILLS = (700, 9000, 30000)  # bytes into a 40 KB rewrite where the grader kills atomic_write


def trajectory(shards: list[np.ndarray], w0: np.ndarray, lr: float, steps: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(w_s, m_s) for s = 0..steps on one machine, in the data's dtype, with the notebook's gradient."""
    full = np.concatenate(shards)
    A, b = full[:, :-1], full[:, -1]
    w, m = w0.astype(full.dtype), np.zeros(len(w0), dtype=full.dtype)
    out = [(w, m)]
    for _ in range(steps):
        resid = (A * w).sum(axis=1) - b
        m = HEAVY_BALL * m + (A * resid[:, None]).sum(axis=0)
        w = w - lr * m
        out.append((w, m))
    return out


def _lo_hi(n: int, K: int, r: int) -> tuple[int, int]:
    size, rest = divmod(n, K)
    return r * size + min(r, rest), (r + 1) * size + min(r + 1, rest)


def _problem(rng: np.random.Generator, rows: int, n: int, steps: int, dt: str):
    A = rng.standard_normal((rows, n))
    data = np.column_stack([A, A @ rng.standard_normal(n) + 0.1 * rng.standard_normal(rows)]).astype(dt)
    lr = float(0.5 / np.linalg.eigvalsh(A.T @ A).max())
    w0 = (0.1 * rng.standard_normal(n)).astype(dt)
    return data, w0, lr, trajectory([data], w0, lr, steps)


def _train(p: Plan, cid: str, label: str, K: int, data, w0, steps, lr, folder, every, info: dict,
           faults: dict | None = None, backend: str = "sim") -> None:
    n = len(w0)
    case = Case(id=cid, fn="train_sharded", label=label, world_size=K, timeout=10, faults=faults or {},
                backend=backend, data={**info, "K": K, "record_messages": backend == "sim" and not faults})
    blocks = [w0[slice(*_lo_hi(n, K, r))].copy() for r in range(K)]
    p.add_in_order(case, [("data", data), ("w0", blocks), ("=", steps), ("=", lr), ("=", folder), ("=", every)])


def _inspect(p: Plan, cid: str, label: str, folder: str, n: int, info: dict) -> None:
    p.cases.append(Case(id=cid, fn="inspect_checkpoints", label=label, mode="call", timeout=5, data=info,
                        args=[{"value": folder}, {"value": n}]))


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (K, rows, n, steps, every, dt, backend) in enumerate(TRAIN):
        data, w0, lr, ref = _problem(rng, rows, n, steps, dt)
        what = f"K={K}, n={n}, {steps} steps, every={every}, {dt}{', 2 processes' if backend != 'sim' else ''}"
        info = {"ref": ref, "steps": steps, "every": every, "dtype": dt, "start": 0, "n": n}
        _train(p, f"t{i}", f"{what}, no crash", K, data, w0, steps, lr, f"ckpt/t{i}", every, info, backend=backend)
        if backend == "sim":
            _inspect(p, f"it{i}", f"{what}: the step folders after the run", f"ckpt/t{i}", n,
                     {**info, "K": K, "committed": list(range(every, steps + 1, every)), "open": []})
    runs = list(RUNS)
    prop = np.random.default_rng(int(rng.integers(1 << 31)))
    for _ in range(RANDOM):
        K, K2, n, every = int(prop.integers(2, 5)), int(prop.integers(2, 6)), int(prop.integers(2, 9)), 2
        c = 2 * int(prop.integers(2, 5)) + 1  # not a checkpoint step: the crash lands in the same step either way
        runs.append((K, K2, int(prop.integers(2, 12)), n, 10, every, int(prop.integers(K)), "step", c,
                     str(prop.choice(["float32", "float64"])), (str(prop.choice(["flip", "truncate", "delete"])),
                                                                 int(prop.integers(min(K, n))))))
    for i, row in enumerate(runs):
        _run(p, rng, f"{i}", *row, tag="random run, " if i >= len(RUNS) else "")
    _atomic(p, rng)
    return p


def _run(p: Plan, rng, i, K, K2, rows, n, steps, every, crank, how, c, dt, damage, tag="") -> None:
    data, w0, lr, ref = _problem(rng, rows, n, steps, dt)
    folder = f"ckpt/r{i}"
    info = {"ref": ref, "steps": steps, "every": every, "dtype": dt, "n": n}
    what = f"{tag}K={K} -> K'={K2}, n={n}, {steps} steps, every={every}, {dt}"
    if how == "stop":
        when, newest, opened = f"{what}, the first job ran {c} steps", c // every * every, []
        _train(p, f"c{i}", when, K, data, w0, c, lr, folder, every, info)
    else:
        before = (c - 1) // every if crank else 0  # digests rank crank sent before step c
        sends = (K - 1) * c + before if how == "step" else (K - 1) * (c + 1) + c // every - 1
        newest = (c - 1) // every * every if how == "step" else c - every
        opened = [c] if how == "digest" else []
        when = (f"{what}, rank {crank} crashes in step {c}" if how == "step" else
                f"{what}, rank {crank} crashes after writing its shard of step {c}, before sending its digest")
        _train(p, f"c{i}", when, K, data, w0, steps, lr, folder, every, info, faults={"crash": {str(crank): sends}})
    committed = list(range(every, newest + 1, every))
    _inspect(p, f"a{i}", f"{when}: the step folders after the crash", folder, n,
             {**info, "K": K, "committed": committed, "open": opened})
    start = newest
    if damage:
        kind, shard = damage
        hits = [(newest, shard)] if kind != "two" else [(newest, shard[0]), (newest - every, shard[1])]
        for j, (step, q) in enumerate(hits):
            name = "manifest.json" if kind == "manifest" else f"shard-{q:05d}.npy"
            path = f"{folder}/step-{step:08d}/{name}"
            p.cases.append(Case(id=f"d{i}-{j}", fn="damage", label=f"{what}: the grader damages the newest checkpoint",
                                mode="call", timeout=5, data={"path": path},
                                args=[{"value": path}, {"value": "truncate" if kind == "manifest" else
                                                        "flip" if kind == "two" else kind}]))
        start = max(0, newest - every * len(hits))
        info["candidates"] = [s for s in reversed(committed) if not (kind == "manifest" and s == newest)]
        info["bad"] = [] if kind == "manifest" else [(step, _lo_hi(n, K, q)) for step, q in hits]
        what = (f"{what}, after a crash in step {c}: the grader " +
                ("truncated the manifest" if kind == "manifest" else
                 f"{'flipped a bit of' if kind in ('flip', 'two') else kind + 'd'} a shard") +
                f" of the newest checkpoint{' and one of the checkpoint before it' if kind == 'two' else ''}")
    else:
        what = when
    info = {**info, "start": start, "damaged": [newest] if damage else [], "changed": K2 != K}
    _train(p, f"{'x' if damage else 'r'}{i}", f"{what}, then restarted on {K2} ranks", K2, data, w0, steps, lr,
           folder, every, info)


def _atomic(p: Plan, rng: np.random.Generator) -> None:
    old = rng.integers(0, 256, 3000).astype(np.uint8)
    new = rng.integers(0, 256, 40000).astype(np.uint8)
    path = "ckpt/atomic/step-00000004/manifest.json"
    p.inputs["at/old"], p.inputs["at/new"] = old, new
    p.cases.append(Case(id="s0", fn="atomic_write", label="a first write", mode="call", args=[
        {"value": path}, {"key": "at/old"}], timeout=5))
    for j, cut in enumerate(ATOMIC_KILLS):  # the grader kills the writer for real at byte `cut` of the file
        p.cases.append(Case(id=f"k{j}", fn="atomic_write", label=f"a rewrite killed at byte {cut}", mode="call",
                            args=[{"value": path}, {"key": "at/new"}], timeout=5, data={"fsize_kill": cut}))
        p.cases.append(Case(id=f"v{j}", fn="file_bytes", mode="call", timeout=5, data={"old": old},
                            label=f"the file after a rewrite was killed at byte {cut}", args=[{"value": path}]))


def _block(res: CaseResult, r: int) -> np.ndarray:
    c = res.case
    lo, hi = _lo_hi(c.data["n"], c.world_size, r)
    w, m = c.data["ref"][c.data["steps"]]
    return np.stack([w[lo:hi], m[lo:hi]])


def _values(res: CaseResult) -> None:
    dt = res.case.data["dtype"]
    for r in range(res.case.world_size):
        want = _block(res, r)
        got = res.value(r, "[w; m] block", dtype=dt, shape=want.shape)
        bad = int(np.sum(got != want))
        if bad or not np.array_equal(got, want):
            raise Fail(f"rank {r}'s final [w; m] block differs from the uninterrupted run in {bad} of {want.size} "
                       f"entries (compared bit for bit)")


def _steps_run(res: CaseResult) -> int | None:
    c = res.case
    if c.world_size < 2 or c.backend != "sim":
        return None
    n0 = _lo_hi(c.data["n"], c.world_size, 0)[1]
    return sum(1 for s, d, a in res.messages if s == 0 and d == 1 and a.dtype == np.dtype(c.data["dtype"])
               and a.shape == (n0,))


def trained(res: CaseResult):
    _values(res)
    return 1.0, ""


def _start(res: CaseResult) -> None:
    ran, c = _steps_run(res), res.case.data
    if ran is None:
        return
    start, want = c["steps"] - ran, c["start"]
    if start > want and start in c.get("damaged", []):
        raise Fail(f"the restart ran {ran} steps, as if it resumed from step {start}, whose checkpoint the grader "
                   f"had damaged (if that shard file did not exist, the folders are not laid out as the lab asks). "
                   f"Check every shard you read against the manifest's sha256 and agree with the other ranks on "
                   f"the newest checkpoint all of you can read: {SAYS}")
    if start != want:
        first = [a for s, d, a in res.messages if s == 0 and d == 1][:1]
        note = ("" if first and first[0].dtype == np.int8 else " (your ranks do not open with the all-gather of the "
                "int8 flags, so a crash the grader injects at a message count falls elsewhere: see the traffic test)")
        raise Fail(f"the restart ran {ran} steps, as if it resumed from step {start}; the newest checkpoint that "
                   f"every rank can verify is of step {want}: resume from it{note}")


def _flags(res: CaseResult) -> None:
    d, K2 = res.case.data, res.case.world_size
    for r in range(K2 if "candidates" in d and K2 > 1 else 0):
        lo, hi = _lo_hi(d["n"], K2, r)
        want = [0 if any(s == t and max(lo, a) < min(hi, z) for t, (a, z) in d["bad"]) else 1 for s in d["candidates"]]
        first = [a for s, q, a in res.messages if s == r and q == (r + 1) % K2][:1]
        if not first or first[0].dtype != np.int8 or first[0].tolist() != want:
            raise Fail(f"rank {r}'s int8 flags (one per committed checkpoint, newest first) are not 1 exactly for the "
                       f"checkpoints whose shards overlapping its block verify: each rank reads and checks only the "
                       f"old shards its new block overlaps, and the all-gather of the flags combines the parts")


def resumed(res: CaseResult):
    try:
        _values(res)
    except Fail as exc:
        if not res.case.data.get("damaged"):
            raise
        raise Fail(f"{exc}: the grader damaged the newest checkpoint; a shard whose sha256 does not match the "
                   f"manifest must not be used. {SAYS}") from None
    _start(res)
    _flags(res)
    return 1.0, ""


def traffic(res: CaseResult):
    graded_after(lambda: (_values(res), _start(res)), "the final blocks and the step a restart resumes from")
    c = res.case
    K, dt, every, n = c.world_size, np.dtype(c.data["dtype"]), c.data["every"], c.data["n"]
    start = c.data["start"]
    for r in range(K):
        lo, hi = _lo_hi(n, K, r)
        for q in range(K):
            if q == r:
                continue
            got = [a for s, d, a in res.messages if s == r and d == q]
            want = [("flags",)] + [x for s in range(start + 1, c.data["steps"] + 1) for x in
                                   [("block", s)] + ([("digest", s)] if q == 0 and r > 0 and s % every == 0 else [])]
            if len(got) != len(want):
                digests = ", one digest per checkpoint" if q == 0 else ""
                raise Fail(f"rank {r} sent rank {q} {len(got)} messages; the lab's protocol is {len(want)}: one int8 "
                           f"flag array at the start, one block per step{digests} and nothing else. {SAYS}")
            for a, (kind, *step) in zip(got, want):
                if kind == "flags" and (a.dtype != np.int8 or a.ndim != 1):
                    raise Fail(f"rank {r}'s first message to rank {q} is a {a.dtype} array of shape {a.shape}, not the "
                               f"int8 flags (one per candidate checkpoint) that the restart agreement all-gathers")
                if kind == "block" and (a.dtype != dt or a.shape != (hi - lo,)):
                    raise Fail(f"rank {r} sent rank {q} a {a.dtype} array of shape {a.shape} where its w block "
                               f"({hi - lo} values) was due. {SAYS}")
                if kind == "digest":
                    buf = io.BytesIO()
                    w, m = c.data["ref"][step[0]]
                    np.save(buf, np.stack([w[lo:hi], m[lo:hi]]), allow_pickle=False)
                    if a.dtype != np.uint8 or a.tobytes() != hashlib.sha256(buf.getvalue()).digest():
                        raise Fail(f"the digest rank {r} sent for step {step[0]} is not the sha256 of np.save of its "
                                   f"(2, {hi - lo}) block [w; m] at that step. {SAYS}")
    return 1.0, ""


def committed(res: CaseResult):
    d = res.case.data
    n, t = d["n"], res.value(0, "checkpoint table", dtype="float64")
    if t.ndim != 2 or t.shape[1] != 4 + 2 * n:
        raise Fail("inspect_checkpoints() returned a table of the wrong shape: restore the given function")
    if len(t) == 1 and t[0, 0] == -1:
        raise Fail("there is no checkpoint folder: train_sharded() must create ckpt_dir before training")
    steps = sorted(d["committed"] + d["open"])
    if [int(x) for x in t[:, 0]] != steps:
        raise Fail(f"the checkpoint folder holds step folders {[int(x) for x in t[:, 0]]}, expected {steps}: every "
                   f"`every` steps each rank writes step-<8 digits>/shard-<rank>.npy. {SAYS}")
    for row in t:
        s = int(row[0])
        if s in d["open"] and row[1] != 0:
            raise Fail(f"step {s} has a manifest although a rank crashed before its digest reached rank 0: rank 0 "
                       f"must write the manifest only after every rank's digest has arrived (it is the commit point)")
        if s in d["committed"]:
            if row[1] != 1 or row[2] != d["K"] or row[3] != 1:
                raise Fail(f"the checkpoint of step {s} is not committed by {d['K']} ranks with shards that match "
                           f"their sha256 in manifest.json (row: committed={row[1]:g}, world_size={row[2]:g}, "
                           f"verified={row[3]:g}). {SAYS}")
            w, m = d["ref"][s]
            if not np.array_equal(row[4:], np.concatenate([w, m]).astype(np.float64)):
                raise Fail(f"the shards of step {s} do not hold the state [w; m] after step {s}")
    return 1.0, ""


def damaged(res: CaseResult):
    got = res.value(0, "damage status", dtype="float64", shape=(1,))
    if got[0] != 1:
        raise Fail(f"the grader found no file {res.case.data['path']} to damage after the crash: {SAYS}, and "
                   f"every shard is listed with its sha256 in the manifest of its step folder")
    return 1.0, ""


def atomic(res: CaseResult):
    got = res.value(0, "file content")
    old = res.case.data["old"]
    if got.dtype != np.uint8 or not np.array_equal(got, old):
        raise Fail(f"after the rewrite was killed the file holds {got.size} bytes, not the old content: write a "
                   f"temporary file in the same folder, then os.replace it over the path")
    return 1.0, ""


TESTS = [
    Test("train", "uninterrupted runs equal one machine bit for bit (K = 1, 2, 3, 5, 8, 2 processes)",
         select=lambda c: c.id.startswith("t"), check=trained),
    Test("resume", "a restart on the same K after a crash ends on the uninterrupted bits, from the newest checkpoint",
         select=lambda c: c.id.startswith("r") and not c.data["changed"], check=resumed),
    Test("reshard", "a restart on K' != K ranks ends on the uninterrupted bits, from the newest checkpoint",
         select=lambda c: c.id.startswith("r") and c.data["changed"], check=resumed),
    Test("traffic", "per step one block to each rank, per checkpoint one 32-byte digest to rank 0, nothing else",
         select=lambda c: c.id[0] in "tr" and c.data.get("record_messages") and c.world_size > 1, check=traffic),
    Test("commit", "step folders: K shards and a manifest with their sha256, written last; no manifest if a digest "
                   "never arrived", select=lambda c: c.id[0] in "ia", check=committed),
    Test("checksum", "after the grader damages a shard or a manifest, the restart verifies, agrees and falls back",
         select=lambda c: c.id[0] in "xd", check=lambda res: (damaged if res.case.id[0] == "d" else resumed)(res)),
    Test("atomic", "a write the grader kills half-way leaves the old file", select=lambda c: c.id.startswith("v"),
         check=atomic),
]
