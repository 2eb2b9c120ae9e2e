"""Lab 17: dropless expert-parallel MoE, top-2 routing with renormalised gates, variable-sized all-to-all."""
from __future__ import annotations

import ast

import numpy as np

from scaleoutai.grading.checks import (Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, forbidden_calls,
                                       graded_after)
from scaleoutai.nn import mlp_forward, mlp_init

# (K, tokens per rank, d, hidden, owner map (E = its length), dtype, backend[, tied experts (lo, hi)])
CASES = [(1, [12], 6, 5, [0, 0, 0, 0], "float64", "sim"),
         (2, [7, 5], 6, 5, [1, 0, 1, 1, 0], "float64", "sim"),
         (2, [8, 8], 8, 6, [0, 0, 0, 1], "float32", "sim"),
         (3, [4, 0, 7], 6, 5, [2, 2, 0, 2, 0], "float64", "sim"),
         (4, [5, 3, 0, 6], 6, 5, [3, 0, 3, 1, 3, 0], "float64", "sim"),
         (4, [6, 5, 6, 5], 8, 5, [0, 1, 2, 3, 0, 1, 2], "float32", "sim"),
         (5, [3, 0, 4, 0, 2], 6, 5, [4, 1, 4], "float64", "sim"),
         (5, [2, 6, 1, 5, 3], 6, 4, [0, 1, 2, 3, 4, 0, 0, 0], "float64", "sim"),
         (3, [0, 9, 0], 6, 5, [1, 2, 0, 0, 1, 2], "float32", "sim"),
         (2, [6, 7], 6, 5, [0, 1, 1, 0, 1], "float64", "process"),
         (2, [9, 8], 6, 5, [0, 1, 0, 1], "float64", "sim", (1, 3)),
         (3, [7, 6, 6], 6, 5, [1, 0, 2, 0, 2], "float64", "sim", (0, 3))]
RANDOM = 3  # property cases: random K, tokens per rank (some empty), owner map and dtype from the seeded rng
MESSAGES = 3  # per ordered pair of ranks: the routing summary, the routed rows, the outputs back
TOL = {"float64": (1e-9, 1e-9), "float32": (1e-4, 1e-4)}  # (rtol, atol per unit of max|expected|)
MARGIN = 1e-3  # top-3 router probabilities this close could rank differently in float32: resample such tokens
FORBIDDEN_MODULES = ("torch.distributed", "mpi4py", "ray.util.collective")
UNIMPORTABLE = ("scaleoutai.parallel.moe",)  # the course's capacity-based layer; moe_dense holds no EP code
FORBIDDEN_NAMES = ("moe_forward_ep", "moe_backward_ep", "moe_forward_dense", "_route", "_slots", "_router",
                   "_choices")
ASKS = ("the lab asks for dropless top-2 routing: each token's two experts, gates renormalised over the two, "
        "no capacity and nothing dropped, outputs in the token's order")


def _softmax(z: np.ndarray) -> np.ndarray:
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)


def _layer(x: np.ndarray, Wg: np.ndarray, experts: list, how: str = "ref") -> tuple[np.ndarray, float, np.ndarray]:
    """The dense dropless layer in float64 (y, L_aux, top-2 experts); ``how`` builds the wrong variants the
    feedback names: "raw" gates P[t, e], "top1" one expert, "hi" ties to the larger id."""
    P = _softmax(x @ Wg)
    E = Wg.shape[1]
    top = (np.argsort(P, axis=1, kind="stable")[:, ::-1] if how == "hi" else np.argsort(-P, axis=1, kind="stable"))
    top = top[:, :1] if how == "top1" else top[:, :2]
    g = np.take_along_axis(P, top, axis=1)
    g = g if how == "raw" else g / g.sum(axis=1, keepdims=True)
    y = np.zeros(x.shape)
    for e in range(E):
        t, c = np.nonzero(top == e)
        if len(t):
            y[t] += g[t, c][:, None] * mlp_forward(experts[e], x[t])[0]
    f = np.bincount(top.ravel(), minlength=E) / top.size
    return y, float(E * np.sum(f * P.mean(axis=0))), top


def _tokens(rng: np.random.Generator, n: int, Wg: np.ndarray) -> np.ndarray:
    """n token rows whose top-3 router probabilities are equal (tied experts) or at least MARGIN apart."""
    x = rng.standard_normal((n, Wg.shape[0]))
    for t in range(n):
        for _ in range(1000):
            gaps = -np.diff(np.sort(_softmax(x[t] @ Wg))[::-1][:3])
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
        K, E = int(prop.integers(1, 6)), int(prop.integers(3, 8))  # E = 2: every token uses both experts
        Ts = [int(v) for v in prop.integers(0, 7, size=K)]
        Ts[int(prop.integers(K))] += 1  # at least one token
        owner = [int(v) for v in prop.integers(0, K, size=E)]
        _add(p, prop, f"r{i}", K, Ts, 6, 5, owner, str(prop.choice(["float32", "float64"])), "sim", None,
             "random case, ")
    return p


def _add(p: Plan, rng: np.random.Generator, cid: str, K: int, Ts: list[int], d: int, hidden: int, owner: list[int],
         dt: str, backend: str, tie: tuple[int, int] | None = None, tag: str = "") -> None:
    E, own = len(owner), np.array(owner, dtype=np.int64)
    Wg = rng.standard_normal((d, E)) * (2 / np.sqrt(d))
    if tie is not None:  # two experts with the same router column: their probabilities tie for every token
        Wg[:, tie[1]] = Wg[:, tie[0]]
    experts = [mlp_init([d, hidden, d], seed=int(rng.integers(1 << 30))) for _ in range(E)]
    x = _tokens(rng, sum(Ts), Wg)
    x, Wg = x.astype(dt).astype(np.float64), Wg.astype(dt).astype(np.float64)  # the values the sandbox gets
    experts = [{n: v.astype(dt).astype(np.float64) for n, v in e.items()} for e in experts]
    y, aux, top = _layer(x, Wg, experts)
    variants = {how: _layer(x, Wg, experts, how)[0] for how in ("raw", "top1", "hi")}
    if tie is not None:
        assert not np.allclose(variants["hi"], y), f"case {cid}: no tie at second place"
    src = np.repeat(np.arange(K), Ts)
    routed = np.zeros((K, K), dtype=np.int64)  # routed[r, j]: assignments of r's tokens to j's experts
    np.add.at(routed, (np.repeat(src, 2), own[top.ravel()]), 1)
    spread = [int(np.sum(own == r)) for r in range(K)]
    where = "simulator" if backend == "sim" else "2 real processes"
    ties = f", experts {tie[0]} and {tie[1]} tie (smaller id first)" if tie is not None else ""
    case = Case(id=cid, fn="grader_moe_dropless", world_size=K, backend=backend,
                timeout=20 if backend == "process" else 8,
                label=f"{tag}K={K}, tokens per rank {Ts}, E={E} (experts per rank {spread}), {dt}{ties}, {where}",
                data={"Ts": Ts, "d": d, "E": E, "dtype": dt, "y": y, "aux": aux, "variants": variants,
                      "routed": routed, "tie": tie is not None})
    bounds = np.cumsum([0] + Ts)
    for r in range(K):
        mine = np.flatnonzero(own == r)
        stack = {n: np.array([experts[e][n] for e in mine]).reshape((len(mine),) + experts[0][n].shape).astype(dt)
                 for n in ("W0", "b0", "W1", "b1")}
        args = [("tokens", x[bounds[r]:bounds[r + 1]].astype(dt)), ("Wg", Wg.astype(dt)), ("owner", own),
                ("ids", mine), *stack.items()]
        for name, arr in args:
            p.inputs[f"{case.id}/{name}/{r}"] = arr
    case.args += [{"key": f"{case.id}/{n}", "per_rank": True} for n, _ in args]
    p.cases.append(case)


def _answer(res: CaseResult, r: int) -> tuple[float, int, np.ndarray]:
    """(L_aux, y's itemsize, y) of rank r, unpacked from the adapter's vector."""
    c = res.case
    n = c.data["Ts"][r] * c.data["d"]
    v = res.value(r, "answer", array_only=True)
    if v.ndim != 1 or len(v) != 4 + n or v.dtype.kind != "f":
        raise Fail(f"rank {r}'s answer did not come back through grader_moe_dropless (leave that cell as it is)")
    v = v.astype(np.float64)
    if (int(v[2]), int(v[3])) != (c.data["Ts"][r], c.data["d"]):
        raise Fail(f"rank {r}'s y has shape {(int(v[2]), int(v[3]))}, expected {(c.data['Ts'][r], c.data['d'])}")
    return float(v[0]), int(v[1]), v[4:].reshape(c.data["Ts"][r], c.data["d"])


def _check_y(res: CaseResult, dtype: bool = True) -> None:
    c = res.case
    ref, b = c.data["y"], np.cumsum([0] + c.data["Ts"])
    rtol, scale = TOL[c.data["dtype"]]
    ys = []
    for r in range(c.world_size):
        _, size, y = _answer(res, r)
        if dtype and size != np.dtype(c.data["dtype"]).itemsize:
            raise Fail(f"rank {r}'s y has {size}-byte entries; return y in the tokens' dtype ({c.data['dtype']})")
        ys.append(y)
    got = np.concatenate(ys)
    try:
        close(got, ref, rtol, scale * (1 + float(np.abs(ref).max(initial=0))), "y (all ranks' rows in order)")
    except Fail as exc:
        raise Fail(f"{exc}. {_diagnose(c, got)}") from None


def _diagnose(c: Case, got: np.ndarray) -> str:
    near = {how: np.allclose(got, v, rtol=1e-4, atol=1e-4) for how, v in c.data["variants"].items()}
    if near["raw"]:
        return (ASKS + "; your gates are P[t, e] as in the course's capacity layer: divide by P[t, e1] + P[t, e2]")
    if near["top1"]:
        return ASKS + "; yours uses each token's first expert only"
    if near["hi"]:
        return "probabilities that tie exactly must go to the smaller expert id (np.argsort(-P, kind='stable'))"
    return ASKS + "; a capacity-based layer that drops or pads does not pass"


def correct(res: CaseResult):
    _check_y(res)
    return 1.0, ""


def aux_loss(res: CaseResult):
    c = res.case
    want, rtol = c.data["aux"], TOL[c.data["dtype"]][0]
    for r in range(c.world_size):
        got = _answer(res, r)[0]
        if not abs(got - want) <= rtol * abs(want):
            hint = (" (it is missing the factor E)" if abs(got * c.data["E"] - want) <= 1e-3 * want else
                    ": L_aux = E * sum_i f_i p_i over the tokens of ALL ranks (add every rank's summary), "
                    "f_i the share of the 2T assignments, p_i the mean probability")
            raise Fail(f"rank {r}'s L_aux is off by a factor {got / want:.4g}{hint}")
    return 1.0, ""


def traffic(res: CaseResult):
    c, K = res.case, res.case.world_size
    graded_after(lambda: _check_y(res, dtype=False), "the output")
    item, d, E = np.dtype(c.data["dtype"]).itemsize, c.data["d"], c.data["E"]
    head = envelope_bytes(2)
    sent = np.zeros((K, K), dtype=np.int64)
    count = np.zeros((K, K), dtype=np.int64)
    for ev in res.trace:
        if ev.kind == "send":
            sent[ev.rank, ev.peer] += ev.nbytes
            count[ev.rank, ev.peer] += 1
    R = c.data["routed"]
    for r in range(K):
        for j in range(K):
            if r == j:
                continue
            want = (16 * E + head) + (R[r, j] * d * item + head) + (R[j, r] * d * item + head)
            if count[r, j] != MESSAGES or sent[r, j] != want:
                raise Fail(f"rank {r} sent rank {j} {count[r, j]} messages of {sent[r, j]} bytes in all; the lab's "
                           f"exchange is exactly {MESSAGES} messages of {want} bytes (a (2, E) float64 summary, the "
                           f"{R[r, j]} rows routed there, the {R[j, r]} outputs back, {head}-byte headers): exactly "
                           f"the routed rows, no padding to a capacity, no tags, not every token")
    return 1.0, ""


def _moe_imports(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("scaleoutai.parallel"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name not in ("moe_init", "softmax")]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("scaleoutai.parallel.moe")]
    return found


def own_code(res: CaseResult):
    graded_after(lambda: _check_y(res), "the output")
    bad = _moe_imports(res.source) + forbidden_calls(res.source, FORBIDDEN_MODULES, FORBIDDEN_NAMES)
    if bad:
        raise Fail(f"write the dropless layer yourself (from scaleoutai.parallel only moe_init and softmax); "
                   f"found {', '.join(sorted(set(bad))[:4])}")
    return 1.0, ""


def _sim(c: Case) -> bool:
    return c.backend == "sim"


TESTS = [
    Test("correct_sim", "each rank's y equals the dense dropless top-2 layer (K = 1-5, uneven tokens and experts)",
         select=lambda c: _sim(c) and not c.data["tie"], check=correct),
    Test("ties", "probabilities that tie exactly go to the smaller expert id", select=lambda c: c.data["tie"],
         check=correct),
    Test("correct_process", "each rank's y equals the dense layer on 2 real processes",
         select=lambda c: c.backend == "process", check=correct),
    Test("aux_loss", "every rank returns the load-balancing loss of the global batch",
         select=lambda c: _sim(c) and not c.data["tie"], check=aux_loss),
    Test("traffic", "from the grader's trace: exactly the routed rows cross each pair of ranks, each way, plus "
         "one summary", select=lambda c: _sim(c) and c.world_size > 1, check=traffic),
    Test("own_code", "the layer is your own (no course MoE layer, no torch.distributed)",
         select=lambda c: _sim(c) and c.world_size > 1, check=own_code),
]
