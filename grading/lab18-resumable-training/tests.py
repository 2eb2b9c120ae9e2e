"""Lab 18: resume after an injected crash equals the uninterrupted run."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, close

SHARED_FOLDER = "ckpt"  # every rank sees the checkpoints, as on a cluster's shared file system
UNIMPORTABLE = ("scaleoutai.parallel",)  # elastic.py holds the atomic save and the resume

HEAVY_BALL = 0.9
# (K, rows, d, steps, every, crashing rank, step it crashes in, dtype); None: no crash case
RUNS = [(2, 30, 4, 12, 3, 1, 7, "float64"),
        (3, 31, 5, 15, 4, 0, 9, "float64"),   # uneven shards, rank 0 (the writer) crashes
        (5, 23, 3, 10, 2, 3, 5, "float32"),
        (8, 6, 3, 9, 4, 7, 4, "float64"),     # K > rows: empty shards; crash right after a checkpoint
        (3, 20, 4, 8, 5, 2, 2, "float64"),    # crash before the first checkpoint: restart from scratch
        (1, 15, 3, 6, 2, None, None, "float64")]
# small K: a crash restarts every rank's sandbox, and each start runs the notebook again
MORE_RUNS = [(3, 2, 3, 6, 1, 1, 5, "float32"),  # K > rows, a checkpoint after every step, crash in the last step
             (2, 9, 3, 5, 7, None, None, "float64")]  # every > steps: no checkpoint, the folder must still exist
RANDOM = 1  # property run: random K (2-3), rows, d, steps, every, crashing rank and step, dtype (seeded rng)
TOL = {"float64": (1e-7, 1e-9), "float32": (1e-4, 1e-5)}  # (rtol, atol)
ATOMIC_DIR, ATOMIC_D = "ckpt/atomic", 3
ATOMIC_KILLS = (700, 9000, 30000)  # bytes into the new checkpoint (about 48 KB) where its writer is killed


def trajectory(shards: list[np.ndarray], w0: np.ndarray, lr: float, steps: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(w_s, v_s) for s = 0..steps on one machine, in float64."""
    full = np.concatenate([s.astype(np.float64) for s in shards])
    A, b = full[:, :-1], full[:, -1]
    w, v = w0.astype(np.float64), np.zeros(len(w0))
    out = [(w, v)]
    for _ in range(steps):
        v = HEAVY_BALL * v + A.T @ (A @ w - b)
        w = w - lr * v
        out.append((w, v))
    return out


def _train_case(p: Plan, cid: str, label: str, K: int, shards: list[np.ndarray], w0: np.ndarray, steps: int,
                lr: float, ckpt: str, every: int, data: dict, faults: dict | None = None) -> None:
    case = Case(id=cid, fn="train_resumable", label=label, world_size=K, timeout=10, faults=faults or {},
                data=data)
    for r, s in enumerate(shards):
        p.inputs[f"{cid}/data/{r}"] = s
    p.inputs[f"{cid}/w0"] = w0
    case.args = [{"key": f"{cid}/data", "per_rank": True}, {"key": f"{cid}/w0"}, {"value": steps},
                 {"value": lr}, {"value": ckpt}, {"value": every}]
    p.cases.append(case)


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, row in enumerate(RUNS):
        _run(p, rng, str(i), *row)
    _plant_incomplete(p, rng)
    _atomic(p, rng)
    for i, row in enumerate(MORE_RUNS):  # after the first cases: their inputs stay put
        _run(p, rng, str(len(RUNS) + i), *row)
    _plant_out_of_order(p, rng)
    prop = np.random.default_rng(int(rng.integers(1 << 31)))
    for i in range(RANDOM):
        K, steps = int(prop.integers(2, 4)), int(prop.integers(4, 13))
        _run(p, prop, f"x{i}", K, int(prop.integers(1, 25)), int(prop.integers(2, 6)), steps, int(prop.integers(1, 6)),
             int(prop.integers(K)), int(prop.integers(steps)), str(prop.choice(["float32", "float64"])), "random run, ")
    return p


def _run(p: Plan, rng: np.random.Generator, i: str, K: int, n: int, d: int, steps: int, every: int, crank: int | None,
         cstep: int | None, dt: str, tag: str = "") -> None:
    X = rng.standard_normal((n, d))
    y = X @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n)
    lr = float(0.5 / np.linalg.eigvalsh(X.T @ X).max())
    full = np.column_stack([X, y]).astype(dt)
    shards = [s.copy() for s in np.array_split(full, K)]
    w0 = (0.1 * rng.standard_normal(d)).astype(dt)
    data = {"K": K, "d": d, "steps": steps, "every": every, "dtype": dt, "ref": trajectory(shards, w0, lr, steps),
            "crash_step": cstep, "crash_rank": crank}
    what = f"{tag}K={K}, {n} rows, d={d}, {steps} steps, every={every}, {dt}"
    _train_case(p, f"t{i}", f"{what}, no crash", K, shards, w0, steps, lr, f"ckpt/t{i}", every, data)
    if crank is None:
        if every > steps:  # nothing to save: ckpt_dir must exist all the same (no crash: no sandbox restarts)
            p.cases.append(Case(id=f"a{i}", fn="inspect_checkpoints", label=f"{what}: the folder after the run",
                                mode="call", args=[{"value": f"ckpt/t{i}"}, {"value": d}], timeout=5,
                                data={**data, "crash_step": steps, "crash_rank": 0}))
        return
    when = f"{what}, rank {crank} crashes in step {cstep}"
    crash = {"crash": {str(crank): 2 * (K - 1) * cstep}}  # ring allreduce: 2(K-1) sends per step
    _train_case(p, f"c{i}", when, K, shards, w0, steps, lr, f"ckpt/r{i}", every, data, crash)
    p.cases.append(Case(id=f"a{i}", fn="inspect_checkpoints", label=f"{when}: the folder after the crash",
                        mode="call", args=[{"value": f"ckpt/r{i}"}, {"value": d}], timeout=5, data=data))
    _train_case(p, f"r{i}", f"{when}, then restarted", K, shards, w0, steps, lr, f"ckpt/r{i}", every, data)


def _atomic(p: Plan, rng: np.random.Generator) -> None:
    old = {"step": 4, "params": rng.standard_normal(ATOMIC_D).tolist(), "velocity": rng.standard_normal(ATOMIC_D).tolist()}
    new = {"step": 9, "params": [0.5] * ATOMIC_D, "velocity": [0.25] * ATOMIC_D, "history": [0.0] * 6000}
    path = f"{ATOMIC_DIR}/ckpt-00000004.npz"
    p.cases.append(Case(id="s0", fn="save_checkpoint", label="a first save", mode="call",
                        args=[{"value": path}, {"value": old}], timeout=5))
    for j, cut in enumerate(ATOMIC_KILLS):  # the grader kills the writer for real at byte `cut` of the file
        p.cases.append(Case(id=f"k{j}", fn="save_checkpoint", label=f"a save over it, killed at byte {cut}",
                            mode="call", args=[{"value": path}, {"value": new}], timeout=5, data={"fsize_kill": cut}))
        p.cases.append(Case(id=f"s2{j}", fn="inspect_checkpoints", mode="call", timeout=5, data={"old": old, "new": new},
                            label=f"the folder after a save over an existing checkpoint was killed at byte {cut}",
                            args=[{"value": ATOMIC_DIR}, {"value": ATOMIC_D}]))


def _planted_problem(rng: np.random.Generator, K: int, n: int, d: int, steps: int
                     ) -> tuple[list[np.ndarray], np.ndarray, float, list[tuple[np.ndarray, np.ndarray]]]:
    """Shards, w0, lr and the uninterrupted trajectory of a float64 run whose folder the grader prepares."""
    X = rng.standard_normal((n, d))
    y = X @ rng.standard_normal(d)
    lr = float(0.5 / np.linalg.eigvalsh(X.T @ X).max())
    shards = [s.copy() for s in np.array_split(np.column_stack([X, y]), K)]
    w0 = 0.1 * rng.standard_normal(d)
    return shards, w0, lr, trajectory(shards, w0, lr, steps)


def _plant_out_of_order(p: Plan, rng: np.random.Generator) -> None:
    """A folder whose checkpoint of step 8 was written before the one of step 2 (a rerun of an old job wrote
    it later): the newest checkpoint is the highest step, not the file written last."""
    K, n, d, steps, every, dt = 3, 14, 3, 10, 2, "float64"
    shards, w0, lr, ref = _planted_problem(rng, K, n, d, steps)
    folder = "ckpt/order"
    for j, step in enumerate((4 * every, every)):
        state = {"step": step, "params": ref[step][0].tolist(), "velocity": ref[step][1].tolist()}
        p.cases.append(Case(id=f"o{j}", fn="save_checkpoint", label=f"a checkpoint of step {step}", mode="call",
                            timeout=5, args=[{"value": f"{folder}/ckpt-{step:08d}.npz"}, {"value": state}]))
    data = {"K": K, "d": d, "steps": steps, "every": every, "dtype": dt, "ref": ref, "crash_step": 4 * every}
    _train_case(p, "ro", f"K={K}, {n} rows, d={d}, {steps} steps, every={every}, restarted on a folder whose checkpoint "
                f"of step {4 * every} was written before the one of step {every}", K, shards, w0, steps, lr, folder,
                every, data)


def _plant_incomplete(p: Plan, rng: np.random.Generator) -> None:
    """A folder whose newest file named like a checkpoint lacks its velocity (as a torn save leaves it),
    with a good checkpoint before it: the restart must skip the one that does not load."""
    K, n, d, steps, every, dt = 2, 16, 3, 9, 3, "float64"
    shards, w0, lr, ref = _planted_problem(rng, K, n, d, steps)
    folder = "ckpt/planted"
    good = {"step": every, "params": ref[every][0].tolist(), "velocity": ref[every][1].tolist()}
    torn = {"step": 2 * every, "params": ref[2 * every][0].tolist()}
    for j, state in enumerate((good, torn)):
        p.cases.append(Case(id=f"p{j}", fn="save_checkpoint", label=f"a checkpoint of step {state['step']}",
                            mode="call", timeout=5, args=[{"value": f"{folder}/ckpt-{state['step']:08d}.npz"},
                                                          {"value": state}]))
    data = {"K": K, "d": d, "steps": steps, "every": every, "dtype": dt, "ref": ref, "crash_step": 2 * every}
    _train_case(p, "rp", f"K={K}, {n} rows, d={d}, {steps} steps, every={every}, restarted on a folder whose newest "
                f"checkpoint (step {2 * every}) lacks its velocity", K, shards, w0, steps, lr, folder, every, data)


def _final(res: CaseResult, what: str) -> None:
    dt, d = res.case.data["dtype"], res.case.data["d"]
    rtol, atol = TOL[dt]
    want = res.case.data["ref"][-1][0]
    for r in range(res.case.world_size):
        close(res.value(r, what, dtype=dt, shape=(d,)), want, rtol, atol, f"rank {r}'s {what}")


def trained(res: CaseResult):
    _final(res, "final params")
    return 1.0, ""


def resumed(res: CaseResult):
    _final(res, "final params after the restart")
    K, steps, every, c = (res.case.data[k] for k in ("K", "steps", "every", "crash_step"))
    per_step = 2 * (K - 1)
    sent = res.stats(0)["messages_sent"]
    if sent % per_step:
        raise Fail(f"rank 0 sent {sent} messages in the restarted run, not a multiple of the {per_step} that one "
                   f"allreduce_sum takes at K={K}: call allreduce_sum exactly once per step and send nothing else")
    start = steps - sent // per_step
    if start > c:
        raise Fail(f"the restart ran only {steps - start} steps, as if it resumed from step {start}; only {c} steps "
                   f"had finished before the crash")
    if c - start > every:
        raise Fail(f"the restart redid {c - start} steps (it resumed from step {start}); with a checkpoint every "
                   f"{every} steps it should redo at most {every}: resume from the newest checkpoint")
    return 1.0, ""


def _table(res: CaseResult, d: int, folder: str, hint: str) -> np.ndarray:
    t = res.value(0, "checkpoint table", dtype="float64")
    if t.ndim != 2 or t.shape[1] != 2 + 2 * d:
        raise Fail("inspect_checkpoints() returned a table of the wrong shape: restore the given function")
    if len(t) == 1 and t[0, 0] == -1:
        raise Fail(f"there is no folder {folder}: {hint} (or it still raises NotImplementedError)")
    torn = [i for i in range(len(t)) if t[i, 0] != 1]
    if torn:
        raise Fail(f"{len(torn)} of the {len(t)} checkpoint files in {folder} do not load (torn or incomplete): "
                   f"write a temporary file in the same folder, then os.replace it over the checkpoint")
    return t


def intact(res: CaseResult):
    d, every, c, dt = (res.case.data[k] for k in ("d", "every", "crash_step", "dtype"))
    folder = res.case.args[0]["value"]
    t = _table(res, d, folder, "train_resumable() must create ckpt_dir before training")
    rtol, atol = TOL[dt]
    ref = res.case.data["ref"]
    for row in t:
        step = int(row[1]) if np.isfinite(row[1]) else -1
        if step % every or not 0 < step <= c:
            raise Fail(f"a checkpoint holds step {row[1]:g}; after a crash in step {c} only steps {every}, "
                       f"{2 * every}, ... up to {c} may have been saved")
        close(row[2:2 + d], ref[step][0], rtol, atol, f"params in the checkpoint of step {step}")
        close(row[2 + d:], ref[step][1], rtol, atol, f"velocity in the checkpoint of step {step}")
    newest = max((int(row[1]) for row in t), default=0)
    # the crashed rank had finished step c; rank 0 had finished it too if it crashed itself, and at least step
    # c - 1 otherwise (its step-c messages reached the crashed rank), with the save of that step
    due = {c // every * every} | ({(c - 1) // every * every} if res.case.data["crash_rank"] != 0 and c > 0 else set())
    if newest not in due:
        raise Fail(f"the newest checkpoint is of step {newest}, but {c} steps had finished when the run stopped: "
                   f"rank 0 saves after every step that is a multiple of every={every}")
    return 1.0, ""


def atomic(res: CaseResult):
    t = _table(res, ATOMIC_D, ATOMIC_DIR, "save_checkpoint() must create the folder of its path")
    if len(t) == 0:
        raise Fail("the checkpoint of the first save is gone: a save whose writer is killed must leave the old file "
                   "in place (and the first save must accept lists and numbers as values)")
    if len(t) > 1:
        raise Fail(f"the folder holds {len(t)} checkpoint files after two saves to one path; name temporary files "
                   f"differently from checkpoints (e.g. '.tmp-...')")
    row = t[0]
    for name in ("old", "new"):
        st = res.case.data[name]
        want = np.concatenate([[1.0, st["step"]], st["params"], st["velocity"]])
        if np.allclose(row, want, rtol=1e-12, atol=0):
            return 1.0, ""
    raise Fail("the checkpoint holds neither the old state nor the new one: a save must write the state it is given")


TESTS = [
    Test("train", "trains without a crash like one machine (K = 1, 2, 3, 5, 8)",
         select=lambda c: c.id.startswith("t"), check=trained),
    Test("resume", "a restart after an injected crash (or on a folder whose newest checkpoint does not load) ends "
                   "like the uninterrupted run, redoing at most `every` steps",
         select=lambda c: c.id.startswith("r"), check=resumed),
    Test("intact", "after a crash every checkpoint loads and holds the state of its step",
         select=lambda c: c.id.startswith("a"), check=intact),
    Test("atomic", "a save whose writer is killed half-way leaves the previous checkpoint intact",
         select=lambda c: c.id.startswith("s2"), check=atomic),
]
