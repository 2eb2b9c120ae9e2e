# %% [markdown]
# # Chapter 31 solutions: Swarm intelligence
#
# Worked solutions to the exercises of `chapters/31-swarm-intelligence` (the instructor's manual, never in
# the student edition). Each exercise: the answer, the derivation or argument, and for the coding and
# analysis exercises code that computes it and asserts it.

# %%
import time

import numpy as np

from scaleoutai import cluster
from scaleoutai.agents import swarm as sw
from scaleoutai.agents import swarm_aco as sa, tsp
from scaleoutai.agents import swarm_consensus as sc
from scaleoutai.agents import swarm_pso as ps
from scaleoutai.ml import gossip as gs

T0 = time.perf_counter()


def iterations_matrix(nb, gamma, x0, tol=1e-6, cap=40_000):
    """First t with ||(I - gamma L)^t x0 - mean|| <= tol ||x0 - mean||, from the eigen-decomposition of L."""
    lam, vecs = np.linalg.eigh(sc.laplacian(nb))
    c = vecs.T @ (x0 - x0.mean())  # the start along each mode (the constant mode is 0)
    mu2, start = np.abs(1 - gamma * lam) ** 2, np.linalg.norm(c)

    def err(t):  # non-increasing in t, since every |1 - gamma lambda| <= 1
        return np.sqrt(((c ** 2) * mu2 ** t).sum()) / start

    if err(cap) > tol:
        return None
    lo, hi = 0, cap  # binary search for the first t with err(t) <= tol
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if err(mid) <= tol else (mid + 1, hi)
    return lo

# %% [markdown]
# ## Exercise 1 (analysis): a ring with random chords
#
# **Answer.** A ring of 100 nodes has $\lambda_2 = 2 - 2\cos(2\pi/100) \approx 0.0039$, and with
# $\gamma = 1/(d_{\max} + 1) = 1/3$ it needs about 9,000 steps to reach $10^{-6}$. Random chords are
# shortcuts (Watts and Strogatz), but the first few do not help: a chord raises the degree of its end
# points, which lowers $\gamma = 1/(d_{\max}+1)$ from $1/3$ to $1/4$ (so one chord *slows* consensus on
# average), and $\lambda_2$ moves only when a chord is long enough to pin together two far points of the
# ring's slowest mode, a single long wave around it. Adding edges never lowers $\lambda_2$ (interlacing),
# and once several long chords exist it grows fast: about 8 to 16 chords (averaged over 4 graphs) halve
# the time, 16 chords cut it by about 6x and 32 by about 12x. The measured count stays under the bound
# $\lceil \log 10^{-6} / \log \rho \rceil$ and tracks
# $1/(\gamma\lambda_2)$. The iteration below uses $x \leftarrow (I - \gamma \mathbf{L}) x$ as one matrix
# product per step, checked against the chapter's `reference_consensus` for a few steps; the sweep reads
# the step counts off the eigen-decomposition of $\mathbf{L}$ (the same numbers, checked on the ring).

# %%
def ring_with_chords(n, m, seed):
    """The n-ring plus m distinct random chords (no self-loops, no repeated edges)."""
    rng = np.random.default_rng(seed)
    edges = {tuple(sorted((i, (i + 1) % n))) for i in range(n)}
    while len(edges) < n + m:
        i, j = sorted(rng.choice(n, 2, replace=False))
        edges.add((int(i), int(j)))
    nb = [[] for _ in range(n)]
    for i, j in edges:
        nb[i].append(j)
        nb[j].append(i)
    return [sorted(r) for r in nb]


n = 100
x0 = np.random.default_rng(0).standard_normal(n)
ring = ring_with_chords(n, 0, 0)
assert abs(sc.algebraic_connectivity(ring) - (2 - 2 * np.cos(2 * np.pi / n))) < 1e-12
ref = sc.reference_consensus(x0[:, None], ring, 1 / 3, 5)[-1, :, 0]
W = np.eye(n) - sc.laplacian(ring) / 3
assert np.allclose(np.linalg.matrix_power(W, 5) @ x0, ref, atol=1e-12)
x, t = x0.copy(), 0  # the eigen shortcut against plain iteration, on the ring itself
while np.linalg.norm(x - x0.mean()) > 1e-6 * np.linalg.norm(x0 - x0.mean()):
    x, t = W @ x, t + 1
assert t == iterations_matrix(ring, 1 / 3, x0)
rows = {}
for m in (0, 1, 2, 4, 8, 16, 32):
    lam2, its = [], []
    for seed in range(4):
        nb = ring_with_chords(n, m, seed)
        gamma = 1 / (1 + max(map(len, nb)))
        it = iterations_matrix(nb, gamma, x0)
        assert it is not None and it <= sc.predicted_iterations(nb, gamma)
        lam2.append(sc.algebraic_connectivity(nb))
        its.append(it)
    rows[m] = (np.mean(lam2), np.mean(its))
print(f"{'chords':>6} {'lambda_2':>9} {'iterations to 1e-6':>18}")
for m, (l2, it) in rows.items():
    print(f"{m:>6} {l2:>9.4f} {it:>18.0f}")
halving = min(m for m, (_, it) in rows.items() if it <= rows[0][1] / 2)
print(f"chords needed to halve the time: {halving}")
assert 8 < halving <= 16 and rows[32][1] < rows[0][1] / 10 and rows[1][1] > rows[0][1]  # one chord slows it
assert rows[1][0] >= rows[0][0] - 1e-12 and all(rows[a][0] < rows[b][0] for a, b in [(1, 4), (4, 32)])

# %% [markdown]
# ## Exercise 2 (coding): push-sum that survives message loss
#
# **Answer.** Node $i$ holds a value $s_i$ and a weight $w_i$ (start: $x_i$ and 1); each step it keeps half
# of both and sends the other half to one neighbour, chosen by a schedule every node knows (neighbour
# $t \bmod d_i$ in step $t$), so every receiver knows whom to `recv` from and no receive-from-any is
# needed. Its estimate is $s_i / w_i$. Mass is conserved, $\sum_i s_i = \sum_i x_i$ and $\sum_i w_i = n$, so
# the ratios converge to the mean (Kempe, Dobra and Gehrke 2003).
#
# A lost half destroys mass and biases the result. To resend it without acknowledgements, each node sends
# the *running total* $\sigma_{ij}$ of all the mass it has ever pushed to $j$, and $j$ adds
# $\sigma_{ij} - \rho_{ij}$, where $\rho_{ij}$ is the last total it received from $i$. A lost message is then
# resent automatically, inside the next total that arrives (Hadjicostis et al.'s robust push-sum). The
# invariant is exact at every step: held mass plus in-flight mass
# ($\sum_{ij} \sigma_{ij} - \rho_{ij}$) equals the starting mass, so the estimate stays unbiased, and since
# every edge is used again and loss is independent, in-flight mass keeps arriving and the ratios converge
# to the true mean. The naive version (lost halves simply vanish) converges to a wrong value. Checked
# on a 16-node torus at 10% loss on the simulator.

# %%
def push_sum(comm, x0, nb, steps, resend=True):
    """Push-sum on rank i over the graph nb; running totals make a lost half arrive with the next message."""
    i, K = comm.rank, comm.size
    s, w = float(x0[i]), 1.0
    sent = {j: np.zeros(2) for j in nb[i]}  # running totals pushed to j
    heard = {j: np.zeros(2) for j in range(K) if i in nb[j]}  # last running total heard from j
    for t in range(steps):
        to = nb[i][t % len(nb[i])]
        half = np.array([s, w]) / 2
        s, w = half
        sent[to] += half
        comm.send(sent[to] if resend else half, to)
        for j in sorted(heard):
            if nb[j][t % len(nb[j])] != i:
                continue
            try:
                msg = comm.recv(j)
            except cluster.MessageLostError:
                continue
            if resend:
                msg, heard[j] = msg - heard[j], msg
            s, w = s + msg[0], w + msg[1]
    in_flight = sum(sent[j][0] for j in sent)  # what I pushed in total, for the invariant
    received = sum(heard[j][0] for j in heard)
    return {"estimate": s / w, "s": s, "w": w, "pushed": in_flight, "received": received}


nb = sc.graph("torus", 16)
x0 = np.random.default_rng(1).standard_normal(16)
for resend, label in ((True, "running totals"), (False, "naive")):
    errs = []
    for seed in range(2):
        res = cluster.run(push_sum, 16, args=(x0, nb, 300, resend), faults=cluster.Faults(loss=0.1, seed=seed))
        out = res.values
        est = np.array([o["estimate"] for o in out])
        errs.append(np.abs(est - x0.mean()).max())
        if resend:  # held + in flight = start, exactly up to rounding
            held = sum(o["s"] for o in out)
            flying = sum(o["pushed"] for o in out) - sum(o["received"] for o in out)
            assert abs(held + flying - x0.sum()) < 1e-9
    print(f"{label}: largest error of the estimates after 300 steps at 10% loss {['%.1e' % e for e in errs]}")
    if resend:
        assert max(errs) < 1e-6
    else:
        assert min(errs) > 1e-3  # mass was lost: the ratios agree on a wrong value
clean = cluster.run(push_sum, 16, args=(x0, nb, 300, False)).values
assert max(abs(o["estimate"] - x0.mean()) for o in clean) < 1e-8  # without loss the two versions agree

# %% [markdown]
# ## Exercise 3 (analysis): the fastest-mixing weights
#
# **Answer.** Fastest-mixing Markov chain (Xiao and Boyd 2004): choose one weight $w_e$ per edge,
# $W = I - \sum_e w_e (e_i - e_j)(e_i - e_j)^\top$ (symmetric, rows summing to 1, zero off the graph), and
# minimise the second-largest eigenvalue modulus $\mathrm{SLEM}(W) = \lVert W - \mathbf{1}\mathbf{1}^\top/n
# \rVert_2$, a convex function of $w$. Without cvxpy we use its subgradient: if $u$ is a unit eigenvector of
# $W - \mathbf{1}\mathbf{1}^\top/n$ for the eigenvalue $\lambda$ of largest modulus, then
# $\partial\,\mathrm{SLEM}/\partial w_e = -\operatorname{sign}(\lambda)(u_i - u_j)^2$, and projected
# subgradient descent with diminishing steps from the Metropolis weights converges to the optimum
# (slowly; 600 steps get most of the way). On the 36-node geometric graph the optimised SLEM is clearly below both the
# best constant edge weight $\gamma^\star = 2/(\lambda_2 + \lambda_n)$ (SLEM $(\lambda_n - \lambda_2) /
# (\lambda_n + \lambda_2)$) and Metropolis. Since the steps to $\varepsilon$ scale as $1/\log(1/\mathrm{SLEM})
# \approx 1/(1 - \mathrm{SLEM})$, the gain in speed is the ratio of the spectral gaps. Optimal weights need
# the whole graph (a central computation, or a distributed subgradient method); Metropolis needs only the
# neighbours' degrees, which is why it is the default.

# %%
nb = sc.graph("geometric", 36, seed=0)
edges = [(i, j) for i, row in enumerate(nb) for j in row if i < j]
B = np.zeros((len(edges), 36))
for k, (i, j) in enumerate(edges):
    B[k, i], B[k, j] = 1.0, -1.0
J = np.ones((36, 36)) / 36


def mixing(w):
    return np.eye(36) - B.T @ (w[:, None] * B)


def slem(W):
    return float(np.abs(np.linalg.eigvalsh(W - J)).max())


metro = gs.metropolis_weights(nb)
w = np.array([metro[i, j] for i, j in edges])
assert np.allclose(mixing(w), metro)
best_w, best = w.copy(), slem(mixing(w))
for k in range(600):
    vals, vecs = np.linalg.eigh(mixing(w) - J)
    top = int(np.argmax(np.abs(vals)))
    if abs(vals[top]) < best:  # the SLEM of the current weights, from the same decomposition
        best_w, best = w.copy(), float(abs(vals[top]))
    grad = -np.sign(vals[top]) * (B @ vecs[:, top]) ** 2
    w = w - 0.5 / np.sqrt(k + 1) * grad / max(np.linalg.norm(grad), 1e-12)
best = slem(mixing(best_w))  # recomputed independently of the loop
W_opt = mixing(best_w)
lam = sc.spectrum(nb)
star = (lam[-1] - lam[1]) / (lam[-1] + lam[1])
assert abs(slem(np.eye(36) - sc.optimal_step(nb) * sc.laplacian(nb)) - star) < 1e-9
assert np.allclose(W_opt, W_opt.T) and np.allclose(W_opt.sum(axis=1), 1)
off = np.ones((36, 36), dtype=bool)
for i, row in enumerate(nb):
    off[i, row] = off[i, i] = False
assert np.all(W_opt[off] == 0)  # only the graph's edges carry weight
print(f"SLEM: Metropolis {gs.second_eigenvalue(metro):.4f}, gamma* {star:.4f}, optimised {best:.4f}; "
      f"steps to 1e-6: {np.log(1e-6) / np.log(gs.second_eigenvalue(metro)):.0f}, "
      f"{np.log(1e-6) / np.log(star):.0f}, {np.log(1e-6) / np.log(best):.0f}")
assert best < min(star, gs.second_eigenvalue(metro)) - 0.01

# %% [markdown]
# ## Exercise 4 (analysis): boids with a replicated halo
#
# **Answer.** Today a strip rank sends each neighbour only the boids within one radius of the shared border
# (the halo, for the rules) and the boids that cross it (migration). To let a neighbour take over a crashed
# strip, the neighbour must hold the *whole* strip's state, so every step each rank also sends all its own
# boids' rows [id, x, y, vx, vy] (40 bytes) to its backup, the next strip. The extra cost is therefore
# $40 N$ bytes per step over all ranks, independent of $K$, plus one extra message per rank per step (or
# none, if the replica rides in the existing right-hand halo message). The halo itself carries the boids
# within a radius of either border of their strip, about $\min(1, 2 K r / \mathrm{box})$ of the flock
# (twice that in bytes, each such boid to both sides, plus migration), so the replica's relative cost
# falls with $K$: with 120 boids in the chapter's box (12, radius 1.5) it multiplies the bytes by about 2.8
# at $K = 2$, 2 at $K = 4$ and 1.5 at $K = 8$, where the strips are one radius wide and the halo already
# holds almost every boid. One could send only the changes, but every boid moves every step, so
# the state is new each step anyway. Takeover: the backup holds the strip's state after the previous
# step; when the owner's crash is detected (`PeerCrashedError`), the backup adopts those boids and the
# flock continues. The boids model is deterministic, so the continued flock equals the reference flock
# exactly, which the last check confirms by restarting from a replica.

# %%
flock = sw.BoidsParams(box=12.0, radius=1.5)
X0, V0 = sw.random_flock(120, flock, seed=0)
steps = 30
factors = []
print(f"{'K':>2} {'halo+migration B/step':>22} {'replica B/step':>15} {'factor':>7}")
for K in (2, 4, 8):
    out, res = sw.run_boids(X0, V0, steps, K, flock)
    halo = sum(s.bytes_sent for s in res.stats) / steps
    replica = 40 * len(X0)  # every boid's row once per step to its backup strip
    print(f"{K:>2} {halo:>22.0f} {replica:>15} {(halo + replica) / halo:>7.2f}")
    factors.append((halo + replica) / halo)
assert factors[0] > factors[1] > factors[2] > 1.3  # the narrower the strips, the more the halo already carries
# takeover: the backup's copy after step t lets the flock continue as if nothing had happened
full = sw.reference_boids(X0, V0, steps, flock)
half = sw.reference_boids(X0, V0, 15, flock)
resumed = sw.reference_boids(half["X"], half["V"], steps - 15, flock)
assert np.array_equal(resumed["X"], full["X"]) and np.array_equal(resumed["V"], full["V"])

# %% [markdown]
# ## Exercise 5 (analysis): the migration interval
#
# **Answer.** With 8 islands (5 particles each, 10 dimensions, 150 iterations, ring migration of the best
# position, 3 seeds) the sweep over $M \in \{1, 5, 20, 100, \infty\}$ gives, on this budget, the best median
# cost at $M = 1$ on both functions: with only 5 particles per island, an island alone stalls quickly, and
# the fresh global information pays more than the diversity it destroys. Without migration ($M = \infty$,
# and $M = 100$, which migrates once, too late) the islands are 8 tiny independent swarms. The messages
# are $K \lfloor T/M \rfloor$ for the ring (`migration_messages`), so the sweet spot is a cost question:
# on Ackley (one funnel with ripples) any $M \le 20$ already captures most of the gain over isolated islands
# (a median cost about 10x lower) with 1/20 of the messages of $M = 1$; on the multimodal Rastrigin the
# gain is smaller and noisier, and only frequent migration clearly beats isolation at this budget. The
# classic U-shape (too frequent migration collapses diversity) appears with bigger islands and longer runs,
# where the islands have time to explore their own basins between migrations.
#
# > Note for the instructor: at the sizes run here (seconds on a laptop) $M = 1$ wins on both functions;
# > students who run larger islands and more iterations should see an interior optimum on Rastrigin.

# %%
ISL, N_P, D, ITERS = 8, 40, 10, 150
table = {}
for fname in ("rastrigin", "ackley"):
    f, b = getattr(ps, fname), ps.BOUNDS[fname]
    for M in (1, 5, 20, 100, None):
        every = ITERS + 1 if M is None else M  # never: no migration inside the run
        costs = [ps.reference_pso_islands(f, N_P, D, b, ITERS, ISL, every, seed=s)["cost"] for s in range(3)]
        msgs = ps.migration_messages(ISL, ITERS, every)
        table[fname, M] = (float(np.median(costs)), msgs)
        assert msgs == (0 if M is None else ISL * (ITERS // M))
print(f"{'M':>5} {'Rastrigin median':>16} {'Ackley median':>13} {'messages':>8}")
for M in (1, 5, 20, 100, None):
    print(f"{str(M or 'inf'):>5} {table['rastrigin', M][0]:>16.2f} {table['ackley', M][0]:>13.3f} "
          f"{table['rastrigin', M][1]:>8}")
for fname in ("rastrigin", "ackley"):  # frequent migration beats isolated islands on both
    assert min(table[fname, M][0] for M in (1, 5, 20)) < table[fname, None][0]
assert max(table["ackley", M][0] for M in (1, 5, 20)) < table["ackley", None][0] / 5
# %% [markdown]
# ## Exercise 6 (analysis): what colonies should exchange, and how often
#
# **Answer.** On 12-city instances the exchange hardly matters: 4 colonies of 3 ants reach the Held-Karp
# optimum on all 6 instances with every interval and both topologies, and even with no exchange at all
# ($M = \infty$), after about 12 to 14 iterations on average. What changes is the bill: the ring sends
# $K \lfloor T/M \rfloor$ messages of $8(n+1) = 104$ bytes, so $M = 1$ costs 20 times the bytes of $M = 20$
# for, at most, a couple of iterations sooner; the all-to-all exchange (MINLOC then a broadcast) moves
# slightly fewer bytes than the ring here ($(K-1)(32 + 8n) = 384$ against $K \cdot 8(n+1) = 416$ per
# exchange) but in $5(K-1) = 15$ messages instead of 4, so on a network where the per-message latency
# $\alpha$ dominates, the ring is the cheaper of the two. A colony of 3 ants with bounded trails already
# solves an instance this small, so information from the others arrives when it is no longer needed; the
# exchange pays on larger instances, where lone colonies stall in different local optima and a
# migrated tour pulls a stalled colony out. (The first iteration at the optimum moves by a few iterations
# between settings on single instances, in both directions: random streams diverge at the first adoption.)
#
# **Whole pheromone matrices.** A matrix is $8n^2$ bytes: 1152 bytes for $n = 12$ against 104 for a tour,
# a factor of about $n$ (and 80 kB against 808 bytes at $n = 100$). Averaging neighbours' matrices is
# consensus on the trails (Section 2's Laplacian step): repeated every $M$ iterations, it drives all
# colonies to the same trails, so they become one colony with $K$ times the ants split over $K$ processors,
# and the diversity that separate colonies offer, the reason to have several, is gone. Exchanging only the
# best tour lets each colony keep its own trails and adopt the tour only as its best-so-far (which deposits
# every `bs_every`-th iteration): influence without uniformity. Middendorf, Reischle and Schmeck (2002)
# compared such policies and came to the same advice: exchange little (a few good solutions, around a
# ring), and not too often.
#
# The sweep uses the one-machine lock-step reference, which Section 4 of the chapter showed equals the
# colonies on ranks bit for bit; one configuration is rerun on ranks to check that the counted bytes are
# the formula.

# %%
K6, ANTS6, N6, IT6, INST = 4, 12, 12, 40, 6
without_2opt = sa.ACOParams(local_search=False)
instances = [tsp.euclidean_instance(N6, seed=200 + s)[1] for s in range(INST)]
optima = [tsp.reference_tsp(D6)[0] for D6 in instances]
table = {}
for topology, M in [("ring", 1), ("ring", 5), ("ring", 20), ("all", 1), ("all", 5), ("all", 20), ("-", None)]:
    every = IT6 + 1 if M is None else M  # never: no exchange inside the run
    first = []
    for s, (D6, best) in enumerate(zip(instances, optima)):
        h = sa.reference_aco_colonies(D6, ANTS6, IT6, K6, every, "ring" if M is None else topology, without_2opt,
                                      seed=s)["history"]
        assert h[-1] >= best
        first.append(int(np.argmax(h <= best)) + 1 if h[-1] <= best else None)
    solved = [f for f in first if f is not None]
    table[topology, M] = (len(solved), np.mean(solved) if solved else float("nan"),
                          0 if M is None else IT6 // M * sa.exchange_bytes(N6, K6, topology))
print(f"{'topology':>8} {'M':>4} {'solved':>6} {'mean first iteration':>20} {'bytes':>7}")
for (topology, M), (solved, mean_first, nbytes) in table.items():
    print(f"{topology:>8} {str(M or 'inf'):>4} {solved:>3} of {INST} {mean_first:>20.1f} {nbytes:>7}")
assert all(solved == INST for solved, _, _ in table.values())  # every setting solves every instance
assert all(10 <= mean_first <= 16 for _, mean_first, _ in table.values())  # and at about the same speed
assert table["ring", 1][2] == 20 * table["ring", 20][2] and table["ring", 1][2] == (IT6 // 1) * 4 * 8 * (N6 + 1)
_, res = sa.run_aco(instances[0], ANTS6, IT6, K6, 5, "all", without_2opt, seed=0)
assert sum(st.bytes_sent for st in res.stats) == table["all", 5][2]  # the ranks count what the formula says
assert 8 * N6 ** 2 == 1152 and 8 * (N6 + 1) == 104  # a pheromone matrix against a tour, in bytes
print(f"whole file: {time.perf_counter() - T0:.1f} s")
