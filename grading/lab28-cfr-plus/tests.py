"""Lab 28: CFR+ on N-card Kuhn poker with the information sets sharded by card over K ranks. Each rank is
handed its shard of a checkpoint only; the grader checks the returned tables against its own one-machine
CFR+ (a per-deal tree traversal, independent of the lab's per-card formulation), the regret floor, the
exploitability of the average policy by its own best response against its own vanilla CFR, and, from its
recorded messages and counts, the protocol: one (b, 5) opponent-reach block per update to every other
rank, in the tables' dtype."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.checks import Case, CaseResult, Fail, Plan, Test, close, envelope_bytes, graded_after

HIST = ("", "p", "b", "pb")
TERM = ("pp", "bp", "pbp", "bb", "pbb")
# (N, blocks per rank, T, dtype, t0 or None for a zero checkpoint, note)
REGULAR = [(3, [3], 6, "float64", 7, ""), (3, [1, 2], 6, "float32", 3, ""),
           (4, [2, 1, 1], 6, "float64", 20, ""), (6, [1, 0, 3, 1, 1], 4, "float32", 5, ", an empty shard"),
           (3, [1, 1, 1, 0], 5, "float64", 2, ": K > N"), (3, [0, 1, 0, 2, 0], 4, "float32", 9, ": K > N, 3 empty shards"),
           (7, [5, 2], 5, "float64", 1000, ": t0 = 1000"), (5, [2, 3], 6, "float64", 1, "")]
CONVERGE = [(3, [1, 2], 60, "float64", None, ""), (5, [2, 3], 60, "float32", None, "")]
PROCESS = [(3, [1, 2], 6, "float64", 4, "")]
PROPERTY = 3
BOUND = 3e-3  # exploitability after 60 iterations: CFR+ 2.4e-3 (N=3), 1.0e-3 (N=5); vanilla CFR 1.4e-2, 1.0e-2;
# regret matching+ with a uniform average 9.1e-3, 9.1e-3
UNIMPORTABLE = ("scaleoutai.agents",)  # the chapter's CFR, regret matching, best response and games
TOL = {"float64": 1e-9, "float32": 2e-4}
ASKS = ("CFR+ floors the regrets at zero after each update, alternates the players and weights the strategy sum "
        "by the iteration t; the chapter's vanilla CFR is not it")


def _checkpoint(rng, n, t0, dtype):
    if t0 is None:
        return np.zeros((n, 4, 2), dtype), np.zeros((n, 4, 2), dtype), 0
    R = rng.exponential(0.05, size=(n, 4, 2)) * (rng.random((n, 4, 2)) < 0.7)  # some zeros, some zero rows
    S = rng.exponential(1.0, size=(n, 4, 2)) * t0
    return R.astype(dtype), S.astype(dtype), t0


def _add(p: Plan, cid: str, kind: str, spec, rng, note: str) -> None:
    n, sizes, T, dtype, t0, _ = spec
    R, S, t0 = _checkpoint(rng, n, t0, dtype)
    lo = np.concatenate([[0], np.cumsum(sizes)])[:-1].astype(np.int64)
    K, backend = len(sizes), "process" if kind == "process" else "sim"
    label = (f"K={K}, N={n} cards (blocks {sizes}), T={T}, t0={t0}, {dtype}, "
             f"{'simulator' if backend == 'sim' else '2 real processes'}{note}")
    case = Case(id=cid, fn="run_cfr_plus", label=label, world_size=K, backend=backend,
                timeout=40 if backend == "process" else 20,
                data={"kind": kind, "n": n, "sizes": sizes, "T": T, "t0": t0, "dtype": dtype, "R": R, "S": S,
                      "record_messages": kind in ("regular", "random")})
    p.add_in_order(case, [("=", n), ("lo", [np.array([x]) for x in lo]),
                          ("regret", [R[a:a + b] for a, b in zip(lo, sizes)]),
                          ("strat", [S[a:a + b] for a, b in zip(lo, sizes)]), ("=", t0), ("=", T)])


def plan(rng: np.random.Generator) -> Plan:
    p = Plan()
    for kind, specs in (("regular", REGULAR), ("converge", CONVERGE), ("process", PROCESS)):
        for i, spec in enumerate(specs):
            _add(p, f"{kind}{i}", kind, spec, rng, spec[5])
    for i in range(PROPERTY):
        n, K = int(rng.integers(2, 7)), int(rng.integers(2, 6))
        sizes = np.bincount(rng.integers(0, K, n), minlength=K).tolist()  # random, often empty blocks
        spec = (n, sizes, int(rng.integers(3, 9)), str(rng.choice(["float32", "float64"])), int(rng.integers(1, 50)), "")
        _add(p, f"random{i}", "random", spec, rng, ": seeded random checkpoint and blocks")
    return p


def _match(R):
    pos = np.maximum(R, 0)
    tot = pos.sum(-1, keepdims=True)
    return np.where(tot > 0, pos / np.where(tot > 0, tot, 1), 0.5)


def _reach(sig, j):
    """pi_j(c, z) for every card and terminal, by walking each terminal's path."""
    out = np.ones((sig.shape[0], 5))
    for col, z in enumerate(TERM):
        for d in range(len(z)):
            if d % 2 == j:
                out[:, col] *= sig[:, HIST.index(z[:d]), "pb".index(z[d])]
    return out


def reference(n, R0, S0, t0, T, plus=True, linear=True):
    """One-machine CFR (+) by a tree traversal vectorised over the N(N-1) deals, in float64. Returns R, S
    and the opponent reach of every update (what each rank must send)."""
    R, S = np.array(R0, np.float64), np.array(S0, np.float64)
    deals = np.array([(a, b) for a in range(n) for b in range(n) if a != b])
    show = np.sign(deals[:, 0] - deals[:, 1]).astype(float)
    pay = {"pp": show, "bb": 2 * show, "pbb": 2 * show, "bp": np.ones(len(deals)), "pbp": -np.ones(len(deals))}
    sent = []

    def walk(h, reach, sig, i, dR, t):
        if h in TERM:
            return pay[h]
        p, hi = len(h) % 2, HIST.index(h)
        cards = deals[:, p]
        sg = sig[cards, hi]
        kids = []
        for a, act in enumerate("pb"):
            r = reach.copy()
            r[p] = r[p] * sg[:, a]
            kids.append(walk(h + act, r, sig, i, dR, t))
        v = sg[:, 0] * kids[0] + sg[:, 1] * kids[1]
        if p == i:
            cf = reach[1 - p] * (1.0 if p == 0 else -1.0) / len(deals)
            for a in range(2):
                np.add.at(dR[:, hi, a], cards, cf * (kids[a] - v))
                np.add.at(S[:, hi, a], cards, (t if linear else 1) * reach[p] * sg[:, a] / (n - 1))
        return v

    sig = _match(R)
    for t in range(t0 + 1, t0 + T + 1):
        for i in (0, 1):
            sent.append(_reach(sig, 1 - i))
            dR = np.zeros_like(R)
            walk("", np.ones((2, len(deals))), sig, i, dR, t)
            R = np.maximum(R + dR, 0) if plus else R + dR
            sig = _match(R)
    return R, S, sent


def exploitability(P, n):
    """(BR_0 + BR_1) / 2 by one recursion per card and player (the grader's own best response)."""
    total = 0.0
    for i in (0, 1):
        def br(card, h, r):
            if h in TERM:
                cs = np.arange(n)
                s = np.sign(card - cs) * (1 if h == "pp" else 2) if h in ("pp", "bb", "pbb") else \
                    np.full(n, (1 if h == "bp" else -1) * (1 if i == 0 else -1))
                return float(r @ np.where(cs == card, 0, s))
            if len(h) % 2 == i:
                return max(br(card, h + a, r) for a in "pb")
            return br(card, h + "p", r * P[:, HIST.index(h), 0]) + br(card, h + "b", r * P[:, HIST.index(h), 1])
        total += sum(br(c, "", np.full(n, 1.0 / (n * (n - 1)))) for c in range(n))
    return total / 2


_CACHE: dict = {}


def _ref(res: CaseResult):
    d = res.case.data
    key = (res.case.id, d["n"], d["T"], d["t0"])
    if key not in _CACHE:
        _CACHE[key] = reference(d["n"], d["R"], d["S"], d["t0"], d["T"])
    return _CACHE[key]


def _tables(res: CaseResult):
    d = res.case.data
    got = [res.value(r, "[regret, strat]", dtype=d["dtype"], shape=(2, b, 4, 2)) for r, b in enumerate(d["sizes"])]
    return np.concatenate([g[0] for g in got]), np.concatenate([g[1] for g in got])


def _correct(res: CaseResult) -> None:
    d, (R, S) = res.case.data, _tables(res)
    want_R, want_S, _ = _ref(res)
    tol = TOL[d["dtype"]]
    try:
        close(R, want_R, tol, tol, "the regrets")
        close(S, want_S, tol, tol * max(1, d["t0"]), "the strategy sums")
    except Fail as err:
        hint = (" (each regret is max(R + r, 0) after the update; the strategy sum grows by t * pi_i * sigma "
                "with t counted from t0 + 1; the checkpoint is where the run starts; the opponent reach comes from "
                "every rank's cards)")
        raise Fail(f"{err}{hint}; {ASKS}" if (R < 0).any() else f"{err}{hint}") from None


def tables(res: CaseResult):
    _correct(res)
    return 1.0, ""


def regret_floor(res: CaseResult):
    R, _ = _tables(res)
    if (R < 0).any() or not np.isfinite(R).all():
        raise Fail(f"{int((R < 0).sum())} of {R.size} returned regrets are negative: {ASKS}")
    return 1.0, ""


def converges(res: CaseResult):
    d = res.case.data
    _, S = _tables(res)
    if not np.isfinite(S).all() or (S < 0).any():
        raise Fail("the strategy sums are not finite and non-negative")
    got = exploitability(_match(S.astype(np.float64)), d["n"])
    _, vS, _ = reference(d["n"], d["R"], d["S"], 0, d["T"], plus=False, linear=False)
    vanilla = exploitability(_match(vS), d["n"])
    if got > BOUND or got >= vanilla:
        raise Fail(f"after T={d['T']} iterations the average policy's exploitability (the grader's best response) is "
                   f"{got:.2e}; it must be under {BOUND:g} and under vanilla CFR's at equal T ({ASKS})")
    return 1.0, ""


def messages(res: CaseResult):
    """Per ordered pair of ranks, 2T messages: the sender's (b, 5) opponent reach of that update."""
    graded_after(lambda: _correct(res), "the tables")
    d, K = res.case.data, res.case.world_size
    _, _, sent = _ref(res)
    lo = np.concatenate([[0], np.cumsum(d["sizes"])]).astype(int)
    for r in range(K):
        for s in range(K):
            got = [a for src, dst, a in res.messages if src == r and dst == s]
            if r == s:
                continue
            if len(got) != 2 * d["T"]:
                raise Fail(f"rank {r} sent rank {s} {len(got)} messages in {d['T']} iterations; the protocol sends one "
                           f"block per player update (2 per iteration) to every other rank, empty shards included")
            for m, a in enumerate(got):
                want = sent[m][lo[r]:lo[r + 1]]
                if a.shape != want.shape or a.dtype != np.dtype(d["dtype"]):
                    raise Fail(f"rank {r}'s message {m} to rank {s} is {a.dtype} of shape {a.shape}; the protocol sends "
                               f"the opponent reach of the sender's cards, ({len(want)}, 5) in {d['dtype']} (not "
                               f"the policy, the regrets or the strategy sums)")
                if not np.allclose(a, want, rtol=TOL[d["dtype"]], atol=TOL[d["dtype"]]):
                    raise Fail(f"rank {r}'s message {m} to rank {s} is not the opponent's reach pi_j(c, z) of the "
                               f"sender's cards at the 5 terminals (in the order TERM) for that update")
    item = np.dtype(d["dtype"]).itemsize
    for r in range(K):
        top = 2 * d["T"] * (K - 1) * (5 * d["sizes"][r] * item + envelope_bytes(2))
        if res.stats(r)["bytes_sent"] > top:
            raise Fail(f"rank {r} sent {res.stats(r)['bytes_sent']} B (the grader's count); the protocol sends "
                       f"{top} B: 2T(K-1) blocks of 5b numbers and a header, nothing else")
    return 1.0, ""


TESTS = [
    Test("tables", "every rank's regrets and strategy sums equal one-machine CFR+ from the checkpoint (K = 1, 2, 3, "
         "5, K > N, uneven and empty shards, float32/float64)", select=lambda c: c.data["kind"] == "regular",
         check=tables),
    Test("regret_floor", "CFR+ floors the regrets at zero: no returned regret is negative",
         select=lambda c: c.data["kind"] in ("regular", "random"), check=regret_floor),
    Test("converges", f"from a zero checkpoint the average policy's exploitability (the grader's best response) is "
         f"under {BOUND:g} after T iterations and under vanilla CFR's at equal T",
         select=lambda c: c.data["kind"] == "converge", check=converges),
    Test("process", "the tables are right on 2 real processes", select=lambda c: c.data["kind"] == "process",
         check=tables),
    Test("random", "seeded random checkpoints, blocks and dtypes", select=lambda c: c.data["kind"] == "random",
         check=tables),
    Test("messages", "only reach probabilities travel: to every other rank, per update, the sender's (b, 5) "
         "opponent reach in the tables' dtype (the grader's recorded messages and byte counts)",
         select=lambda c: c.data["kind"] in ("regular", "random") and c.world_size > 1, check=messages),
]
