"""Lab 17: expert-parallel MoE equals dense MoE, capacity drops included."""
from __future__ import annotations

import ast

import numpy as np

from scaleoutai.grading.checks import (Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, forbidden_calls,
                                       graded_after)
from scaleoutai.parallel.moe import expert_owners, moe_forward_dense, moe_init, softmax

# (K, tokens per rank, d, hidden, E, k, C_f, dtype, backend[, tied experts (lo, hi)])
CASES = [(1, [12], 8, 6, 4, 1, 1.0, "float64", "sim"), (1, [10], 8, 6, 3, 2, 0.5, "float64", "sim"),
         (2, [7, 5], 8, 6, 4, 1, 0.5, "float64", "sim"), (2, [6, 6], 8, 6, 5, 2, 1.0, "float64", "sim"),
         (2, [8, 8], 8, 8, 4, 2, 2.0, "float32", "sim"), (4, [5, 3, 0, 6], 8, 5, 6, 2, 0.5, "float64", "sim"),
         (4, [4, 4, 4, 4], 8, 5, 8, 1, 2.0, "float32", "sim"), (4, [5, 4, 6, 3], 8, 5, 3, 1, 1.0, "float64", "sim"),
         (4, [6, 5, 6, 5], 8, 5, 7, 2, 1.0, "float64", "sim"), (2, [6, 7], 8, 6, 5, 2, 1.0, "float64", "process"),
         (3, [4, 0, 7], 6, 5, 5, 2, 1.0, "float64", "sim"), (5, [3, 0, 4, 0, 2], 6, 5, 2, 1, 1.0, "float64", "sim"),
         (3, [6, 5, 7], 6, 5, 4, 1, 0.1, "float64", "sim"),
         (2, [8, 7], 6, 5, 4, 1, 2.0, "float64", "sim", (1, 3)), (3, [6, 6, 5], 6, 5, 5, 2, 1.0, "float32", "sim", (0, 3))]
RANDOM = 3  # property cases: random K, tokens per rank (some empty), E, k, C_f and dtype from the seeded rng
MESSAGES = 4  # per peer: one all-gather of the counts and three all-to-alls (rows, expert ids, outputs)
TOL = {"float64": (1e-9, 1e-9), "float32": (1e-4, 1e-4)}  # (rtol, atol per unit of max|expected|)
MARGIN = 1e-3  # router probabilities this close could rank differently in float32: resample such tokens
ALLOWED_FROM_MOE = {"capacity", "expert_owners", "moe_init", "moe_forward_dense"}
FORBIDDEN_MODULES = ("torch.distributed", "mpi4py", "ray.util.collective")
UNIMPORTABLE = ("scaleoutai.parallel.moe",)  # the answer; the reference layer is moe_dense
FORBIDDEN_NAMES = ("moe_forward_ep", "moe_backward_ep", "_route", "_slots", "_router", "_choices")


def _tokens(rng: np.random.Generator, n: int, Wg: np.ndarray, k: int) -> np.ndarray:
    """n token rows whose top-(k+1) router probabilities are equal (tied experts) or at least MARGIN apart."""
    x = rng.standard_normal((n, Wg.shape[0]))
    for t in range(n):
        for _ in range(1000):
            gaps = -np.diff(np.sort(softmax(x[t] @ Wg))[::-1][:k + 1])
            if np.all((gaps == 0) | (gaps > MARGIN)):
                break
            x[t] = rng.standard_normal(Wg.shape[0])
    return x


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for i, row in enumerate(CASES):
        _add(p, rng, f"e{i}", *row)
    prop = np.random.default_rng(int(rng.integers(1 << 31)))  # after the fixed cases: their inputs stay put
    for i in range(RANDOM):
        K, E = int(prop.integers(1, 6)), int(prop.integers(2, 8))  # E >= 2: a router with a choice
        Ts = [int(v) for v in prop.integers(0, 7, size=K)]
        Ts[int(prop.integers(K))] += 1  # at least one token
        _add(p, prop, f"r{i}", K, Ts, 6, 5, E, int(prop.integers(1, min(2, E) + 1)),
             float(prop.choice([0.25, 0.5, 1.0, 1.5, 2.0])), str(prop.choice(["float32", "float64"])), "sim",
             None, "random case, ")
    return p


def _add(p: Plan, rng: np.random.Generator, cid: str, K: int, Ts: list[int], d: int, hidden: int, E: int, k: int,
         cf: float, dt: str, backend: str, tie: tuple[int, int] | None = None, tag: str = "") -> None:
    layer = moe_init(d, hidden, E, seed=int(rng.integers(1 << 30)))
    Wg = 3 * layer["Wg"]
    if tie is not None:  # two experts with the same router column: their probabilities tie for every token
        Wg[:, tie[1]] = Wg[:, tie[0]]
    x = _tokens(rng, sum(Ts), Wg, k)
    full = {"Wg": Wg, "bg": np.zeros(E), "experts": layer["experts"]}
    if dt != "float64":  # the reference runs in float64 on exactly the values the sandbox gets
        x, full["Wg"] = x.astype(dt).astype(np.float64), Wg.astype(dt).astype(np.float64)
        full["experts"] = [{n: v.astype(dt).astype(np.float64) for n, v in e.items()} for e in layer["experts"]]
    y, cache = moe_forward_dense(full, x, k, cf)
    owner = expert_owners(E, K)
    spread = f"experts per rank {[int(np.sum(owner == r)) for r in range(K)]}"
    where = "simulator" if backend == "sim" else "2 real processes"
    ties = f", experts {tie[0]} and {tie[1]} tie (lower index first)" if tie is not None else ""
    case = Case(id=cid, fn="grader_moe_ep", world_size=K, backend=backend,
                timeout=20 if backend == "process" else 8,
                label=f"{tag}K={K}, tokens per rank {Ts}, E={E} ({spread}), k={k}, C_f={cf}, {dt}{ties}, {where}",
                data={"Ts": Ts, "d": d, "E": E, "k": k, "cf": cf, "dtype": dt, "y": y, "cache": cache,
                      "x": x, "full": full, "dropped": cache["stats"]["dropped"]})
    bounds = np.cumsum([0] + Ts)
    for r in range(K):
        mine = np.flatnonzero(owner == r)
        ex = [full["experts"][e] for e in mine]
        stack = {n: np.array([e[n] for e in ex]).reshape((len(mine),) + layer["experts"][0][n].shape).astype(dt)
                 for n in ("W0", "b0", "W1", "b1")}
        args = [("tokens", x[bounds[r]:bounds[r + 1]]), ("Wg", full["Wg"]), ("ids", mine), *stack.items()]
        for name, arr in args:
            p.inputs[f"{case.id}/{name}/{r}"] = arr.astype(dt) if arr.dtype.kind == "f" else arr
    case.args += [{"key": f"{case.id}/{n}", "per_rank": True} for n, _ in args]
    case.args += [{"value": k}, {"value": cf}]
    p.cases.append(case)


def _rows(case: Case, r: int) -> slice:
    b = np.cumsum([0] + case.data["Ts"])
    return slice(int(b[r]), int(b[r + 1]))


def _check(res: CaseResult, dtype: bool = True) -> None:
    """Every rank's rows equal the dense layer's; ``dtype=False`` leaves the dtype to correct_sim."""
    c = res.case
    ref = c.data["y"]
    rtol, scale = TOL[c.data["dtype"]]
    for r in range(c.world_size):
        want = ref[_rows(c, r)]
        got = res.value(r, "output y", dtype=c.data["dtype"] if dtype else None, shape=want.shape)
        close(got, want, rtol, scale * (1 + float(np.abs(ref).max(initial=0))), f"rank {r}'s output y")


def correct(res: CaseResult):
    _check(res)
    return 1.0, ""


def drops(res: CaseResult):
    """Same comparison, but explains a miss in terms of the capacity rule."""
    c = res.case
    try:
        _check(res, dtype=False)  # which assignments are dropped; a wrong dtype loses correct_sim only
    except Fail as exc:
        cache = c.data["cache"]
        lost = np.flatnonzero(~cache["keep"].all(axis=1))  # tokens with at least one dropped assignment
        loose, _ = moe_forward_dense(c.data["full"], c.data["x"], c.data["k"], 1e9)  # no capacity limit
        try:
            got = np.concatenate([res.value(r, "y", shape=(n, c.data["d"])).astype(np.float64)
                                  for r, n in enumerate(c.data["Ts"])])
        except Fail:
            raise exc from None
        hint = ""
        if np.allclose(got[lost], loose[lost], rtol=1e-4, atol=1e-4):
            hint = (f" The {len(lost)} tokens that lose an assignment to capacity got their full output: drop "
                    f"every assignment whose slot is >= C = ceil(C_f*k*T/E), T counted over all ranks.")
        else:
            bad = int(np.sum(~np.isclose(got, c.data["y"], rtol=1e-4, atol=1e-4).all(axis=1)))
            hint = (f" {bad} token rows differ; {c.data['dropped']} assignments are dropped here: check the slot "
                    f"order (all first choices before second choices, global token order) and the capacity C.")
        raise Fail(str(exc) + hint) from None
    return 1.0, ""


def _traffic(c: Case, r: int) -> int:
    keep, top = c.data["cache"]["keep"], c.data["cache"]["top"]
    owner = expert_owners(c.data["E"], c.world_size)
    src = np.repeat(np.arange(c.world_size), c.data["Ts"])[:, None].repeat(c.data["k"], axis=1)
    dst = owner[top]
    a_out = int(np.sum(keep & (src == r) & (dst != r)))
    a_in = int(np.sum(keep & (dst == r) & (src != r)))
    return a_out + a_in


def traffic(res: CaseResult):
    c, K = res.case, res.case.world_size
    graded_after(lambda: _check(res), "the output")
    item, d, k, E, T = np.dtype(c.data["dtype"]).itemsize, c.data["d"], c.data["k"], c.data["E"], sum(c.data["Ts"])
    for r in range(K):
        rows = _traffic(c, r)
        headers = MESSAGES * (K - 1) * envelope_bytes(2)  # one header per message, arrays of at most 2 dims
        bound = rows * (d * item + 16) + 8 * k * T + 8 * (K - 1) * (k + 1) * E + headers
        sent = res.stats(r)["bytes_sent"]
        if sent > bound:
            raise Fail(f"rank {r} sent {sent} bytes, {sent / bound:.1f}x the bound of {bound} bytes for its {rows} "
                       f"kept token rows crossing ranks (with {headers} bytes of headers for {MESSAGES}(K-1) messages): "
                       f"send each kept row once to its expert's owner and its output once back (not every token, "
                       f"not the experts' weights)")
    return 1.0, ""


def _moe_imports(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("scaleoutai.parallel.moe",
                                                                 "scaleoutai.parallel.moe_dense"):
            found += [f"moe.{a.name}" for a in node.names if a.name not in ALLOWED_FROM_MOE]
        elif isinstance(node, ast.ImportFrom) and node.module == "scaleoutai.parallel":
            found += [f"scaleoutai.parallel.{a.name}" for a in node.names if a.name not in ("model", "moe_dense")]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name == "scaleoutai.parallel.moe"]
    return found


def own_code(res: CaseResult):
    graded_after(lambda: _check(res), "the output")
    bad = _moe_imports(res.source) + forbidden_calls(res.source, FORBIDDEN_MODULES, FORBIDDEN_NAMES)
    if bad:
        raise Fail(f"write the expert-parallel layer yourself (from scaleoutai.parallel.moe_dense only "
                   f"{', '.join(sorted(ALLOWED_FROM_MOE))}); found {', '.join(sorted(set(bad))[:4])}")
    return 1.0, ""


TESTS = [
    Test("correct_sim", "moe_forward_ep equals the dense MoE on every rank (K = 1, 2, 4, k = 1, 2, uneven experts)",
         select=lambda c: c.backend == "sim", check=correct),
    Test("drops", "tokens beyond capacity are dropped exactly as in the dense MoE",
         select=lambda c: c.backend == "sim" and c.data["dropped"] > 0, check=drops),
    Test("correct_process", "moe_forward_ep equals the dense MoE on 2 real processes",
         select=lambda c: c.backend == "process", check=correct),
    Test("traffic", "all-to-all traffic: each kept token row crosses ranks once each way",
         select=lambda c: c.backend == "sim" and c.world_size > 1, check=traffic),
    Test("own_code", "the expert-parallel layer is your own (no moe_forward_ep, no torch.distributed)",
         select=lambda c: c.backend == "sim" and c.world_size > 1, check=own_code),
]
