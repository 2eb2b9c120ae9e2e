"""Lab 15: bucketed DDP equals single-process training."""
from __future__ import annotations

import math

import numpy as np

from scaleoutai.grading.checks import (Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, forbidden_calls,
                                       graded_after)
from scaleoutai.parallel.ddp import make_buckets, reference_train
from scaleoutai.nn import mlp_init

# (K, layer sizes, bucket_bytes, dtype): 1 byte gives one bucket per tensor, 10**6 one bucket in all;
# 16 bytes is filled exactly by b1 of [3, 2, 2] in float64 (the bucket closes at >=, not >); K = 7 is more
# ranks than any tensor of [3, 2, 2] has values (empty ring chunks); 40 bytes in float32 makes 3 buckets of
# [5, 8, 6, 2] where 8 bytes per value would make 5 (bucket sizes are bytes of the tensors' own dtype)
ALLREDUCE = [(1, [4, 6, 3], 64, "float64"), (2, [4, 6, 3], 1, "float64"), (3, [4, 6, 3], 10**6, "float32"),
             (3, [5, 8, 6, 2], 100, "float64"), (5, [5, 8, 6, 2], 200, "float32"), (5, [3, 2, 2], 16, "float64"),
             (7, [3, 2, 2], 1, "float64"), (6, [5, 8, 6, 2], 40, "float32")]
# (K, B, layer sizes, steps, bucket_bytes, dtype, frozen, backend)
TRAIN = [(1, 12, [4, 6, 3], 3, 128, "float64", [], "sim"), (2, 12, [4, 6, 3], 3, 128, "float64", [], "sim"),
         (3, 13, [4, 6, 3], 3, 64, "float32", [], "sim"), (5, 13, [5, 8, 6, 2], 2, 200, "float64", [], "sim"),
         (5, 4, [4, 6, 3], 2, 96, "float64", [], "sim"),
         (3, 10, [5, 8, 6, 2], 3, 128, "float64", ["W0"], "sim"), (2, 9, [4, 6, 3], 2, 1, "float32", ["b1"], "sim"),
         (2, 11, [4, 6, 3], 3, 128, "float64", [], "process"),
         (7, 3, [4, 6, 3], 2, 64, "float32", [], "sim"), (6, 20, [3, 5, 2], 2, 48, "float64", [], "sim")]
RANDOM = 3  # property cases of each kind: random K, layer sizes, bucket_bytes, batch and dtype from the seeded rng
LR = 0.05
TOL = {"float64": (1e-9, 1e-9), "float32": (1e-4, 1e-4)}  # (rtol, atol per unit of max|expected|)
UNIMPORTABLE = ("scaleoutai.parallel.ddp", "scaleoutai.parallel.zero", "scaleoutai.parallel.tensor")  # the answers
FORBIDDEN_MODULES = ("scaleoutai.parallel.ddp", "scaleoutai.parallel.zero", "scaleoutai.parallel.tensor",
                     "torch.distributed", "mpi4py", "ray.util.collective")
FORBIDDEN_NAMES = ("train_ddp", "bucketed_ddp_step", "naive_ddp_step", "reference_train", "all_reduce")


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, (K, sizes, bb, dt) in enumerate(ALLREDUCE):
        _add_allreduce(p, rng, f"a{i}", K, sizes, bb, dt)
    for i, row in enumerate(TRAIN):
        _add_train(p, rng, f"t{i}", *row)
    prop = np.random.default_rng(int(rng.integers(1 << 31)))  # after the fixed cases: their inputs stay put
    for i in range(RANDOM):
        sizes = [int(v) for v in prop.integers(1, 7, size=int(prop.integers(2, 5)))]
        bb, dt = int(prop.choice([1, 8, 24, 40, 64, 100, 256, 10**6])), str(prop.choice(["float32", "float64"]))
        _add_allreduce(p, prop, f"ra{i}", int(prop.integers(1, 8)), sizes, bb, dt, "random case, ")
        sizes = [int(v) for v in prop.integers(1, 7, size=int(prop.integers(2, 5)))]
        bb, dt = int(prop.choice([1, 8, 24, 40, 64, 100, 256, 10**6])), str(prop.choice(["float32", "float64"]))
        _add_train(p, prop, f"rt{i}", int(prop.integers(1, 8)), int(prop.integers(1, 14)), sizes, 2, bb, dt, [], "sim",
                   "random case, ")
    return p


def _add_allreduce(p: Plan, rng: np.random.Generator, cid: str, K: int, sizes: list[int], bb: int, dt: str,
               tag: str = "") -> None:
    like = mlp_init(sizes, dtype=dt)
    names, shapes = list(like), [list(v.shape) for v in like.values()]
    case = Case(id=cid, fn="grader_bucketed_allreduce", world_size=K, timeout=8,
                label=f"{tag}bucketed_allreduce, K={K}, layers {sizes}, bucket_bytes={bb}, {dt}, simulator",
                data={"names": names, "shapes": shapes, "bucket_bytes": bb, "dtype": dt, "kind": "allreduce"})
    flats = [(rng.standard_normal(sum(v.size for v in like.values())) * 10).astype(dt) for _ in range(K)]
    p.add_in_order(case, [("g", flats), ("=", names), ("=", shapes), ("=", bb)])


def _add_train(p: Plan, rng: np.random.Generator, cid: str, K: int, B: int, sizes: list[int], steps: int, bb: int,
               dt: str, frozen: list[str], backend: str, tag: str = "") -> None:
    params = mlp_init(sizes, seed=int(rng.integers(1 << 30)), dtype=dt)
    names, shapes = list(params), [list(v.shape) for v in params.values()]
    X = rng.standard_normal((B, sizes[0])).astype(dt)
    Y = rng.standard_normal((B, sizes[-1])).astype(dt)
    where = "simulator" if backend == "sim" else "2 real processes"
    extra = (", K > B (empty shards)" if K > B else ", uneven shards" if B % K else "") + \
        (f", frozen {frozen}" if frozen else "")
    case = Case(id=cid, fn="grader_ddp_train", world_size=K, backend=backend,
                timeout=20 if backend == "process" else 8,
                label=f"{tag}ddp_train, K={K}, B={B}, layers {sizes}, {steps} steps, bucket_bytes={bb}, "
                      f"{dt}{extra}, {where}",
                data={"names": names, "shapes": shapes, "bucket_bytes": bb, "dtype": dt, "steps": steps,
                      "frozen": frozen, "kind": "train"})
    flat = np.concatenate([v.ravel() for v in params.values()])
    rows = np.array_split(np.arange(B), K)  # each rank process is handed its own shard only
    case.data.update(X=X, Y=Y)
    p.add_in_order(case, [("X", [X[r] for r in rows]), ("Y", [Y[r] for r in rows]), ("=", B), ("params", flat),
                          ("=", names), ("=", shapes), ("=", steps), ("=", LR), ("=", bb), ("=", frozen)])


def _split(flat: np.ndarray, case: Case) -> dict[str, np.ndarray]:
    out, off = {}, 0
    for name, shape in zip(case.data["names"], case.data["shapes"]):
        n = int(np.prod(shape))
        out[name] = flat[off:off + n].reshape(shape)
        off += n
    return out


def _expected(res: CaseResult) -> np.ndarray:
    c = res.case
    if c.data["kind"] == "allreduce":
        return np.sum(np.array(res.per_rank("g"), dtype=np.float64), axis=0)
    params = {k: v.astype(np.float64) for k, v in _split(res.shared("params"), c).items()}
    data = [(c.data["X"].astype(np.float64), c.data["Y"].astype(np.float64))]
    out, _ = reference_train(data, params, c.data["steps"], LR, frozen=c.data["frozen"])
    return np.concatenate([out[k].ravel() for k in c.data["names"]])


def _correct(res: CaseResult) -> None:
    c, ref = res.case, _expected(res)
    dt = np.dtype(c.data["dtype"])
    if c.data["kind"] == "allreduce":
        rtol, atol = 0.0, 4 * c.world_size * np.finfo(dt).eps * float(np.abs(res.per_rank("g")).sum(axis=0).max())
        what = "sum"
    else:
        rtol, scale = TOL[c.data["dtype"]]
        atol, what = scale * (1 + float(np.abs(ref).max())), "parameters after training"
    for r in range(c.world_size):
        got = res.value(r, what, dtype=dt, shape=ref.shape)
        for name, g in _split(got, c).items():
            close(g, _split(ref, c)[name], rtol, atol, f"rank {r}'s {name} ({what})")


def correct(res: CaseResult):
    _correct(res)
    return 1.0, ""


def _buckets(case: Case) -> list[list[str]]:
    dt = np.dtype(case.data["dtype"])
    trainable = {n: np.zeros(s, dt) for n, s in zip(case.data["names"], case.data["shapes"])
                 if n not in case.data.get("frozen", [])}
    return make_buckets(trainable, case.data["bucket_bytes"])


def _bounds(case: Case) -> tuple[int, int, list[list[str]]]:
    K, steps = case.world_size, case.data.get("steps", 1)
    buckets = _buckets(case)
    sizes = dict(zip(case.data["names"], (int(np.prod(s)) for s in case.data["shapes"])))
    item = np.dtype(case.data["dtype"]).itemsize
    values = sum(2 * (K - 1) * math.ceil(sum(sizes[n] for n in b) / K) for b in buckets)
    msgs = steps * len(buckets) * 2 * (K - 1)  # each message a 1-D chunk: one envelope each
    return msgs, steps * values * item + msgs * envelope_bytes(1), buckets


def messages(res: CaseResult):
    c, K = res.case, res.case.world_size
    graded_after(lambda: _correct(res), "the result")
    want, byte_bound, buckets = _bounds(c)
    per = f"{len(buckets)} bucket(s) x 2(K-1)" + (f" x {c.data['steps']} steps" if c.data["kind"] == "train" else "")
    for r in range(K):
        peers = sorted({e.peer for e in res.trace if e.kind == "send" and e.rank == r})
        if len(peers) > 1:
            raise Fail(f"rank {r} sent to ranks {peers}; in a ring all-reduce every rank sends only to its "
                       f"neighbour. Sending each bucket to one rank to be summed (a gather) and back loads "
                       f"that rank with (K-1) times the data; use one ring all-reduce per bucket")
        s = res.stats(r)
        if s["messages_sent"] != want:
            hint = ("more: one all-reduce per tensor instead of per bucket?" if s["messages_sent"] > want else
                    "fewer: buckets closed too late, or not a ring all-reduce?")
            raise Fail(f"rank {r} sent {s['messages_sent']} messages, expected {per} = {want} ({hint} close a "
                       f"bucket as soon as it holds >= bucket_bytes, walking the tensors from last to first)")
        if s["bytes_sent"] > byte_bound:
            raise Fail(f"rank {r} sent {s['bytes_sent']} bytes, more than the ring bound of {byte_bound} "
                       f"(2(K-1)*ceil(n_b/K) values per bucket of n_b values, plus a {envelope_bytes(1)}-byte header "
                       f"per 1-D message)")
    return 1.0, ""


def frozen(res: CaseResult):
    c = res.case
    init = _split(res.shared("params"), c)
    for r in range(c.world_size):
        got = _split(res.value(r, "parameters", dtype=c.data["dtype"], shape=res.shared("params").shape), c)
        for name in c.data["frozen"]:
            changed = int(np.sum(got[name] != init[name]))
            if changed:
                raise Fail(f"rank {r}'s frozen tensor {name} changed in {changed} of {init[name].size} entries; "
                           f"frozen tensors are neither updated nor communicated")
    graded_after(lambda: _correct(res), "the result")
    # all ranks together, whatever the buckets: an all-reduce of n values (a ring, or a gather and a broadcast)
    # sends exactly 2(K-1) n values in all, plus one header per (1-D) message; a frozen tensor sent adds its own
    K, steps, item = c.world_size, c.data["steps"], np.dtype(c.data["dtype"]).itemsize
    n_train = sum(int(np.prod(s)) for n, s in zip(c.data["names"], c.data["shapes"]) if n not in c.data["frozen"])
    stats = [res.stats(r) for r in range(K)]
    sent, msgs = sum(s["bytes_sent"] for s in stats), sum(s["messages_sent"] for s in stats)
    bound = steps * 2 * (K - 1) * n_train * item + msgs * envelope_bytes(1)
    if sent > bound:
        raise Fail(f"the ranks sent {sent} bytes in all, more than the {bound} bytes an all-reduce of the trainable "
                   f"tensors needs ({steps} steps x 2(K-1) x {n_train} values, plus a {envelope_bytes(1)}-byte "
                   f"header per message): leave the frozen tensors out of the buckets")
    return 1.0, ""


def own_code(res: CaseResult):
    graded_after(lambda: _correct(res), "the result")
    bad = forbidden_calls(res.source, FORBIDDEN_MODULES, FORBIDDEN_NAMES)
    if bad:
        raise Fail(f"write the DDP step yourself (ring_allreduce from scaleoutai.collectives is fine); "
                   f"found {', '.join(bad[:4])}")
    return 1.0, ""


def _sim_train(c: Case) -> bool:
    return c.data["kind"] == "train" and c.backend == "sim" and not c.data["frozen"]


TESTS = [
    Test("allreduce", "bucketed_allreduce returns the sum over ranks of every tensor (K = 1, 2, 3, 5)",
         select=lambda c: c.data["kind"] == "allreduce", check=correct),
    Test("train_sim", "ddp_train equals single-process SGD (K = 1, 2, 3, 5, uneven shards, K > B)",
         select=_sim_train, check=correct),
    Test("train_process", "ddp_train equals single-process SGD on 2 real processes",
         select=lambda c: c.backend == "process", check=correct),
    Test("messages", "one ring all-reduce per bucket: buckets x 2(K-1) messages, ring-bounded bytes",
         select=lambda c: c.backend == "sim" and c.world_size > 1 and not c.data.get("frozen"), check=messages),
    Test("frozen", "frozen tensors are left unchanged and never sent",
         select=lambda c: bool(c.data.get("frozen")), check=frozen),
    Test("own_code", "the DDP step is your own (no scaleoutai.parallel.ddp, no torch.distributed)",
         select=lambda c: _sim_train(c) and c.world_size > 1, check=own_code),
]
