# %% [markdown]
# # Appendix D solutions: Datasets and benchmarks
#
# Worked solutions to the exercises of `chapters/appendix-d-datasets-benchmarks` (the instructor's manual,
# never in the student edition). Each exercise: the answer, the derivation or argument, and for the coding
# and analysis exercises code that computes it and asserts it.
#
# The exercises ask the student to add code to `scaleoutai.datasets`; the manual writes that code in its
# own cells and checks it with the course's `catalogue.measure`, `catalogue.digest` and the simulator, so
# the course's files stay as they are.

# %%
import ast
import inspect
import math
import time

import numpy as np
from scipy import optimize, special, stats
from threadpoolctl import threadpool_limits

from scaleoutai import cluster, collectives, datasets
from scaleoutai.datasets import catalogue
from scaleoutai.notebooks import find_repo_root

threadpool_limits(limits=1)  # small arrays on a shared machine
SEED = 0


def discrete_power_law_mle(values, k_min):
    """Exponent a maximising the likelihood of P(k) = k^-a / zeta(a, k_min) for k >= k_min (Clauset et al.).

    Returns (a_hat, tail size, standard error (a_hat - 1) / sqrt(tail size))."""
    tail = np.asarray(values, dtype=float)
    tail = tail[tail >= k_min]
    log_sum = float(np.log(tail).sum())
    neg_log_lik = lambda a: a * log_sum + tail.size * math.log(special.zeta(a, k_min))  # noqa: E731
    a_hat = optimize.minimize_scalar(neg_log_lik, bounds=(1.01, 6.0), method="bounded").x
    return float(a_hat), int(tail.size), float((a_hat - 1) / math.sqrt(tail.size))


# %% [markdown]
# ## Exercise 1 (coding): a loader for click sessions with heavy-tailed lengths
#
# **The loader.** `click_sessions(n_sessions, n_items, tail=2.5, popularity=1.1, seed=0)` returns
# `(lengths, items)`: session $s$ has length $L_s \ge 1$ with $P(L = k) \propto k^{-\text{tail}}$ (a discrete
# power law: most sessions have one to three clicks, a few have hundreds), and `items` holds the clicked item
# ids of all sessions back to back, item $i$ chosen with weight $(i+1)^{-\text{popularity}}$. It is a pure
# function of its arguments: one `default_rng(seed)` inside, nothing global, the arguments validated.
#
# **The catalogue entry** would go into `datasets/catalogue.py` as
# `Dataset("click_sessions", "records", "sessions of clicks with power-law lengths: (lengths, items)",
# (_u(CH, dict(n_sessions=2000, n_items=500), dict(n_sessions=20000, n_items=5000), (2000, 1), (20000, 1)),))`,
# and the loader into `datasets/__init__.py`'s `__all__`. The test fails at each stage until all agree:
# first because `__all__` has a loader with no entry (the first assertion of Section 1), then, once the
# chapter calls it, because the call is not listed for that chapter, and finally if the shapes in `_u(...)`
# are not what `catalogue.measure` finds (rows x columns of the *first* output: `lengths`, $n \times 1$).
#
# **Check.** The code builds the `Dataset` entry object, measures the loader at both sizes as the test
# does, confirms purity (same seed, same digest; another seed, another digest), checks the tail with the
# discrete maximum-likelihood estimator of Exercise 4 (the estimate must be within three standard errors of
# `tail`), checks the item popularity with a chi-square test, and shows a wrong shape being caught.

# %%
def click_sessions(n_sessions, n_items, tail=2.5, popularity=1.1, seed=0):
    """Sessions of clicks: (lengths int64 of shape (n_sessions,), items int64 of shape (lengths.sum(),)).

    Lengths follow P(L = k) ~ k^-tail for k >= 1 (NumPy's zipf draw); items are drawn with weight
    (i + 1)^-popularity. A pure function of its arguments: the same seed gives the same bytes."""
    for name, v in (("n_sessions", n_sessions), ("n_items", n_items)):
        if int(v) != v or v < 1:
            raise ValueError(f"click_sessions needs {name} >= 1, got {v!r}")
    if tail <= 1:
        raise ValueError(f"tail must be > 1 for the lengths to be a distribution, got {tail}")
    gen = np.random.default_rng(seed)
    lengths = gen.zipf(tail, size=int(n_sessions)).astype(np.int64)
    weights = np.arange(1, n_items + 1, dtype=np.float64) ** -float(popularity)
    items = gen.choice(int(n_items), size=int(lengths.sum()), p=weights / weights.sum()).astype(np.int64)
    return lengths, items


entry_new = catalogue.Dataset(
    "click_sessions", "records", "sessions of clicks with power-law lengths: (lengths, items)",
    (catalogue.Use(38, dict(n_sessions=2000, n_items=500), dict(n_sessions=20000, n_items=5000),
                   (2000, 1), (20000, 1)),))


def entry_problems(entry, loader):
    """What the catalogue test would say about one entry: each use's measured shape against the listed one."""
    found = []
    for use in entry.uses:
        for size, kwargs, shape in (("smoke", use.smoke, use.smoke_shape), ("full", use.full, use.full_shape)):
            rows, cols, _ = catalogue.measure(loader(**kwargs))
            if (rows, cols) != shape:
                found.append(f"{entry.loader}, chapter {use.chapter}, {size}: measured {(rows, cols)}, listed {shape}")
    return found


assert entry_problems(entry_new, click_sessions) == []
assert entry_new.loader not in {d.loader for d in catalogue.CATALOGUE}  # new: the test would demand the entry
wrong_shape = catalogue.Dataset(entry_new.loader, entry_new.kind, entry_new.what,
                                (catalogue.Use(38, entry_new.uses[0].smoke, entry_new.uses[0].full, (2000, 2),
                                               (20000, 1)),))
print("a wrong listed shape:", entry_problems(wrong_shape, click_sessions))
assert len(entry_problems(wrong_shape, click_sessions)) == 1

smoke_args = entry_new.uses[0].smoke
assert catalogue.digest(click_sessions(**smoke_args)) == catalogue.digest(click_sessions(**smoke_args))
assert catalogue.digest(click_sessions(**smoke_args, seed=1)) != catalogue.digest(click_sessions(**smoke_args))
lengths1, items1 = click_sessions(**entry_new.uses[0].full)
a_hat, n_tail, se_a = discrete_power_law_mle(lengths1, 1)
assert abs(a_hat - 2.5) <= 3 * se_a  # the lengths have the tail they claim
assert np.quantile(lengths1, 0.999) > 10 * np.median(lengths1)  # heavy: the 99.9th percentile dwarfs the median
pop = np.arange(1, 5001, dtype=float) ** -1.1
counts = np.bincount(items1, minlength=5000)
top = 50  # the 50 hottest items, everything else pooled, so every expected count is large
observed = np.append(counts[:top], counts[top:].sum())
expected = np.append(pop[:top], pop[top:].sum()) / pop.sum() * items1.size
assert stats.chisquare(observed, expected).pvalue > 1e-3
print(f"click_sessions full size: {lengths1.size} sessions, {items1.size} clicks; tail exponent "
      f"{a_hat:.3f} +- {se_a:.3f} (asked 2.5); median length {np.median(lengths1):.0f}, "
      f"99.9th percentile {np.quantile(lengths1, 0.999):.0f}, longest {lengths1.max()}")

# %% [markdown]
# ## Exercise 2 (coding): `low_rank_ratings` that a rank can generate by rows
#
# **The rewrite.** Today's `low_rank_ratings` draws everything from one stream in one order (all items,
# then all users, then $U$, $V$, then the noise), so row $j$ depends on every draw before it and rank $r$ must
# make all $n$ rows to keep its block. The rewrite splits the randomness by *what it indexes*:
#
# - **rows** (users, items, noise of rating $j$): blocks of 1024 rows, block $c$ drawn from
#   `default_rng([seed, 0, c])`, always a full block of 1024 (so a block's content does not depend on $n$, and
#   the first $n$ rows of a longer dataset are the shorter dataset);
# - **factor rows** ($u^*_k$ of user $k$, $v^*_i$ of item $i$): the scheme of `paramserver.init_rows`, chunks of 1024 keys,
#   chunk $c$ of the user table from `default_rng([seed, 1, c])` and of the item table from
#   `default_rng([seed, 2, c])`, so a rank builds only the factor rows its ratings touch.
#
# Items are drawn by inverse CDF from one uniform per row (`searchsorted` on the popularity CDF), the same
# law as `choice(p=...)` but one number per row, so that a row is fixed by its block alone.
#
# **What must stay global:** the seed; the block and chunk size (1024; change it and every row moves);
# the parameters $n_{\rm users}$, $n_{\rm items}$, rank, popularity and noise (the popularity CDF is computed by
# everyone, $O(n_{\rm items})$); and the factor tables $U$, $V$ themselves, which every rating reads: they are
# not *stored* globally, but each row of them must be the same whoever makes it, which the keyed chunks
# guarantee. Given $U$ and $V$, ratings are independent, which is why the rows shard at all. The rewrite is a
# new stream: its bytes differ from today's loader, so the catalogue's chapters that use it must be rerun
# (and any pinned digest updated); its *law* is the same.
#
# **Check.** On the simulator, for $K \in \{1, 2, 3, 5, 8\}$, each rank generates only its block of rows
# (`collectives.block_range`), the gathered blocks equal the whole byte for byte; a factor row is the same
# whether it is made alone or with others; and the law holds: the residual $r - u^*\!\cdot v^*$
# has standard deviation `noise` (a $\chi^2$ interval), and the item frequencies follow the popularity weights.

# %%
BLOCK = 1024


def factor_rows(keys, rank, seed, table):
    """Rows `keys` of a factor table (table 1: users, 2: items), N(0, 1)^rank / rank^(1/4), keyed by chunks."""
    keys = np.asarray(keys, dtype=np.int64)
    out = np.empty((keys.size, rank))
    for chunk in np.unique(keys // BLOCK):
        sel = keys // BLOCK == chunk
        block = np.random.default_rng([seed, table, int(chunk)]).standard_normal((BLOCK, rank))
        out[sel] = block[keys[sel] - chunk * BLOCK] / rank ** 0.25
    return out


def ratings_rows(lo, hi, n_users, n_items, rank=4, popularity=1.1, noise=0.1, seed=0):
    """Rows lo..hi-1 of the row-shardable ratings: (users, items, r), made without the other rows."""
    cdf = np.cumsum(np.arange(1, n_items + 1, dtype=np.float64) ** -float(popularity))
    cdf /= cdf[-1]
    users, items, eps = [], [], []
    for c in range(lo // BLOCK, (hi - 1) // BLOCK + 1) if hi > lo else []:
        gen = np.random.default_rng([seed, 0, c])
        u_item, who, e = gen.random(BLOCK), gen.integers(0, n_users, BLOCK), gen.standard_normal(BLOCK)
        a, b = max(lo, c * BLOCK) - c * BLOCK, min(hi, (c + 1) * BLOCK) - c * BLOCK
        items.append(np.minimum(np.searchsorted(cdf, u_item[a:b], side="right"), n_items - 1))
        users.append(who[a:b])
        eps.append(e[a:b])
    users = np.concatenate(users) if users else np.empty(0, np.int64)
    items = np.concatenate(items) if items else np.empty(0, np.int64)
    eps = np.concatenate(eps) if eps else np.empty(0)
    r = np.einsum("ij,ij->i", factor_rows(users, rank, seed, 1), factor_rows(items, rank, seed, 2)) + noise * eps
    return users.astype(np.int64), items.astype(np.int64), r


N_RATE, N_USERS, N_ITEMS = 20_000, 200, 1000  # Chapter 11's smoke size


def my_rows(comm, n, n_users, n_items):
    first, stop = collectives.block_range(n, comm.size, comm.rank)
    u, i, r = ratings_rows(first, stop, n_users, n_items, seed=SEED)
    return collectives.gather(comm, np.column_stack([u, i, r]), root=0)


whole = np.column_stack(ratings_rows(0, N_RATE, N_USERS, N_ITEMS, seed=SEED))
for K in (1, 2, 3, 5, 8):
    got = cluster.run(my_rows, K, args=(N_RATE, N_USERS, N_ITEMS), timeout=60).values[0]
    assert catalogue.digest(got) == catalogue.digest(whole), K
longer = np.column_stack(ratings_rows(0, N_RATE + 777, N_USERS, N_ITEMS, seed=SEED))
assert np.array_equal(longer[:N_RATE], whole)  # the prefix property: a block never depends on n

keys = np.array([3000, 0, 1024, 5, 1023, 2047])
one_by_one = np.vstack([factor_rows([k], 4, SEED, 1) for k in keys])
assert np.array_equal(factor_rows(keys, 4, SEED, 1), one_by_one)  # a factor row is fixed by its key alone
assert not np.allclose(factor_rows(keys, 4, SEED, 1), factor_rows(keys, 4, SEED, 2))  # users and items differ

users_w, items_w, r_w = whole[:, 0].astype(int), whole[:, 1].astype(int), whole[:, 2]
resid = r_w - np.einsum("ij,ij->i", factor_rows(users_w, 4, SEED, 1), factor_rows(items_w, 4, SEED, 2))
lo_q, hi_q = stats.chi2.ppf([0.0005, 0.9995], N_RATE)
assert lo_q <= np.sum(resid ** 2) / 0.1 ** 2 <= hi_q  # the noise is N(0, 0.1^2), exactly as stated
w_pop = np.arange(1, N_ITEMS + 1, dtype=float) ** -1.1
obs = np.bincount(items_w, minlength=N_ITEMS)
obs_pooled, exp_pooled = np.append(obs[:40], obs[40:].sum()), np.append(w_pop[:40], w_pop[40:].sum()) / w_pop.sum()
assert stats.chisquare(obs_pooled, exp_pooled * N_RATE).pvalue > 1e-3
print(f"row-shardable ratings: K = 1, 2, 3, 5, 8 give the same {N_RATE} rows; noise std "
      f"{resid.std():.4f} (stated 0.1); hottest item {obs[0] / N_RATE:.3f} of ratings "
      f"(weight {w_pop[0] / w_pop.sum():.3f})")

# %% [markdown]
# ## Exercise 3 (analysis): when scatter beats regeneration
#
# **The model.** Let $n$ rows of $s$ bytes, generation at $g$ rows per second, and the simulator's
# single-port sender: `collectives.scatter` sends $K-1$ blocks one after another, so the last one arrives at
#
# $$T_{\rm scatter} = (K-1)\alpha + \beta s\,(n - n_0), \qquad n_0 = \lceil n/K \rceil \text{ (the root's own block)}.$$
#
# Regenerating costs every rank the whole generation, $T_{\rm regen} = n/g$, and sends nothing.
#
# **Answer.** It depends on whether the root's generation is counted. (i) If the data must be generated
# anyway (the chapter's `shard_by_scatter`: rank 0 generates, then sends), scatter costs $n/g + T_{\rm
# scatter}$ against $n/g$: **sending never wins**, at any $g$. (ii) If the data already sits on the root
# (generated once and reused across epochs or jobs, or read from storage), scatter beats regeneration when
# $T_{\rm scatter} < n/g$, i.e. when generation is slower than
#
# $$g^* = \frac{n}{(K-1)\alpha + \beta s (n - n_0)} \;\approx\; \frac{K}{(K-1)\,s\,\beta} \quad (n \text{ large}).$$
#
# With the chapter's network ($\alpha = 10\,\mu$s, $\beta = 1$ ns/B) and the section's rows (8 float64 features
# plus the label as float64, $s = 72$ B): $g^* \approx 2.7\cdot10^7$ rows/s at $K = 2$ (only half the data
# moves), $1.3\cdot10^7$ at $K = 16$, and $10^7$ at $K = 64$, where the $(K-1)\alpha$ term adds 0.6 ms. The vectorised `classification` generator makes a few million
# rows per second on one core, so on this network sending an existing dataset is cheaper; the Python-loop
# generators of Section 7 (one to a few MB/s) are far below $g^*$. On a slower network ($\beta = 10$ ns/B,
# 100 MB/s) $g^*$ falls tenfold and fast generators win. And with a generator that makes only a rank's own
# rows (Exercise 2), regeneration costs $n/(Kg)$, which beats case (ii) whenever $g > (n/K)/T_{\rm scatter}$,
# that is, $K$ times more easily.
#
# > Note for the instructor: as the chapter frames the comparison (rank 0 generates all $n$ rows and then
# > scatters), the question has no crossover: counting the root's generation, scatter is always slower. The
# > crossover exists only when the data already exists on the root, which is the case the solution treats.
#
# **Check.** The code charges generation time on the simulator with `comm.compute`, measures $T_{\rm
# scatter}$ for every $K$ of the appendix, compares it with the formula, and confirms the crossover: at $0.9
# g^*$ scatter of existing data wins, at $1.1 g^*$ regeneration wins, and counting the root's generation
# scatter loses at both. It then times the real generator on this machine (printed only).

# %%
ALPHA, BETA = 1e-5, 1e-9
NET = cluster.Network(alpha=ALPHA, beta=BETA)
N_ROWS, ROW_BYTES = 20_000, 9 * 8


def scatter_existing(comm, n, gen_rate, count_generation):
    table = np.zeros((n, 9)) if comm.rank == 0 else None  # the bytes are irrelevant to the timing
    if comm.rank == 0 and count_generation:
        comm.compute(n / gen_rate)
    return collectives.scatter(comm, table, root=0).shape[0]


def regenerate(comm, n, gen_rate):
    comm.compute(n / gen_rate)
    first, stop = collectives.block_range(n, comm.size, comm.rank)
    return stop - first


for K in (2, 3, 5, 8, 16, 64):
    t_sc = cluster.run(scatter_existing, K, args=(N_ROWS, 1e12, False), network=NET).sim_time
    n0 = -(-N_ROWS // K)
    formula = (K - 1) * ALPHA + BETA * ROW_BYTES * (N_ROWS - n0)
    assert math.isclose(t_sc, formula, rel_tol=1e-9), (K, t_sc, formula)
    g_star = N_ROWS / formula
    for factor, scatter_wins in ((0.9, True), (1.1, False)):
        g = factor * g_star
        t_regen = cluster.run(regenerate, K, args=(N_ROWS, g), network=NET).sim_time
        t_existing = cluster.run(scatter_existing, K, args=(N_ROWS, g, False), network=NET).sim_time
        t_counted = cluster.run(scatter_existing, K, args=(N_ROWS, g, True), network=NET).sim_time
        assert (t_existing < t_regen) == scatter_wins
        assert t_counted > t_regen  # case (i): generating on the root first never pays
    print(f"K = {K:2d}: scatter {t_sc * 1e3:.3f} ms = formula; break-even generation rate "
          f"g* = {g_star:.3g} rows/s")

times = []
for _ in range(3):
    t0 = time.perf_counter()
    datasets.classification(N_ROWS, 8, classes=3, seed=SEED)
    times.append(time.perf_counter() - t0)
print(f"this machine generates classification rows at {N_ROWS / np.median(times):.3g} rows/s "
      f"(median of 3; compare with g* above)")

# %% [markdown]
# ## Exercise 4 (coding): the in-degree exponent of `power_law_graph` by maximum likelihood
#
# **Estimator.** For a discrete power law $P(k) = k^{-a}/\zeta(a, k_{\min})$ on $k \ge k_{\min}$ (Hurwitz zeta),
# the log-likelihood of a tail sample is $-a\sum\ln k_i - n\ln\zeta(a, k_{\min})$; the maximiser $\hat a$ has
# standard error $(\hat a - 1)/\sqrt n$. $k_{\min}$ is chosen, as in Clauset, Shalizi and Newman (2009), to
# minimise the Kolmogorov-Smirnov distance between the tail and its fit. The estimator is first checked on
# NumPy's `zipf(2.2)` draws, where the truth is known (it must land within three standard errors).
#
# **Answer.** At Chapter 13's full size ($n = 4000$ vertices, $m = 40000$ edges, `exponent=2.2`) the fit gives
# $k_{\min} = 7$ and $\hat a \approx 2.32 \pm 0.04$: a power law, slightly steeper than the argument. The
# difference is real, not noise, and has a cause: Chung-Lu gives vertex $i$ an *expected* degree proportional
# to $(i+1)^{-1/(a-1)}$ (so $\#\{\text{vertices with degree} > d\} \propto d^{-(a-1)}$ and the degree pmf has exponent
# $a$), but the generator then drops self-loops and duplicate edges, and duplicates are common exactly among
# the hubs, so the hubs lose degree and the tail thins. Drawing the same $m$ destinations *with* duplicates
# (a multigraph) gives $\hat a \approx 2.26 \pm 0.03$, within two standard errors of 2.2.
#
# **Why least squares on a log-log histogram is biased.** Fitting a line to $(\ln k, \ln \text{count}_k)$
# treats every point alike, but the tail points are counts of 0, 1 or 2: the zeros are dropped (they
# have no logarithm), and the ones are over-represented because a count cannot be smaller than 1 when it is
# seen at all, so the tail flattens into a floor at $\ln 1 = 0$. In addition $\mathbb E[\ln N] < \ln
# \mathbb E[N]$ (Jensen) for the small Poisson counts, and the noise is far from Gaussian and from
# constant variance, so least squares is not the maximum-likelihood fit of anything here. The slope comes out
# much too shallow: on 20 samples of `zipf(2.2)` the least-squares exponent averages about 1.2, while
# the MLE averages 2.20 with a spread of 0.02.

# %%
def ks_distance(values, k_min, a):
    """Largest gap between the tail's empirical CDF and the fitted discrete power law's."""
    tail = np.sort(np.asarray(values)[np.asarray(values) >= k_min])
    support = np.arange(k_min, tail.max() + 1)
    model_cdf = np.cumsum(support ** (-a) / special.zeta(a, k_min))
    data_cdf = np.searchsorted(tail, support, side="right") / tail.size
    return float(np.max(np.abs(data_cdf - model_cdf)))


def fit_tail(values, k_range=range(1, 40)):
    """(k_min, a_hat, tail size, standard error) with k_min minimising the KS distance."""
    fits = [(ks_distance(values, k, discrete_power_law_mle(values, k)[0]), k) for k in k_range]
    k_min = min(fits)[1]
    return (k_min, *discrete_power_law_mle(values, k_min))


sample = np.random.default_rng(SEED).zipf(2.2, 20_000)
a_z, _, se_z = discrete_power_law_mle(sample, 1)
assert abs(a_z - 2.2) <= 3 * se_z  # the estimator recovers a known exponent

GRAPH_N, GRAPH_M, EXPONENT = 4000, 40_000, 2.2
assert catalogue.entry("power_law_graph").uses[0].full == dict(n=GRAPH_N, m=GRAPH_M)  # Chapter 13's full size
edges = datasets.power_law_graph(GRAPH_N, GRAPH_M, exponent=EXPONENT, seed=SEED)
indeg = np.bincount(edges[:, 1], minlength=GRAPH_N)
k_min, a_graph, n_graph, se_graph = fit_tail(indeg[indeg > 0])
weights = (np.arange(GRAPH_N) + 1.0) ** (-1.0 / (EXPONENT - 1.0))
multi = np.bincount(np.random.default_rng(SEED).choice(GRAPH_N, size=GRAPH_M, p=weights / weights.sum()),
                    minlength=GRAPH_N)
k_multi, a_multi, _, se_multi = fit_tail(multi[multi > 0])
print(f"zipf(2.2) check: {a_z:.3f} +- {se_z:.3f}; power_law_graph in-degree: k_min {k_min}, tail {n_graph} "
      f"vertices, a = {a_graph:.3f} +- {se_graph:.3f}; same draws kept as a multigraph: {a_multi:.3f} +- {se_multi:.3f}")
assert abs(a_graph - EXPONENT) < 0.2  # a power law with about the stated exponent
assert a_graph > a_multi and abs(a_multi - EXPONENT) <= 3 * se_multi  # dropping duplicates steepens the tail

ls_fits, mle_fits = [], []
for s in range(20):
    draw = np.random.default_rng(SEED + 1 + s).zipf(2.2, 5000)
    value, count = np.unique(draw, return_counts=True)
    ls_fits.append(-np.polyfit(np.log(value), np.log(count), 1)[0])
    mle_fits.append(discrete_power_law_mle(draw, 1)[0])
print(f"20 samples of zipf(2.2): log-log least squares {np.mean(ls_fits):.2f} +- {np.std(ls_fits):.2f}, "
      f"MLE {np.mean(mle_fits):.3f} +- {np.std(mle_fits):.3f}")
assert abs(np.mean(mle_fits) - 2.2) < 3 * np.std(mle_fits) / math.sqrt(20) + 0.01
assert 2.2 - np.mean(ls_fits) > 10 * np.std(mle_fits)  # the least-squares slope is far too shallow

# %% [markdown]
# ## Exercise 5 (analysis): which loaders depend on a stream NumPy does not promise
#
# **What NumPy promises.** The `numpy.random` compatibility policy (and NEP 19) promises that the same
# `Generator`, seed, calls and arguments give the same numbers *on the same build of NumPy on the same
# machine*. Across versions, stream changes in `Generator` methods and in `default_rng` are allowed in
# feature releases ("with caution"; `default_rng` may even switch its default `BitGenerator`), and bug fixes
# may change them in any release. The stronger version-to-version guarantees belong to the `BitGenerator`
# classes (PCG64's raw 64-bit stream) and to the frozen legacy `RandomState`.
#
# > Note for the instructor: the premise "the same stream across versions only for some methods" is not what
# > NumPy says. An early draft of NEP 19 proposed keeping a short list of `Generator` methods stable, but the
# > adopted policy makes no method-level promise; the split is between `BitGenerator`s and `RandomState`
# > (stronger guarantees) and every `Generator` method (none across feature releases). The answer below
# > treats the question as "which methods do our loaders use, and how exposed is each".
#
# **Answer.** Every seeded loader of the catalogue draws through `Generator` methods, so strictly none is
# covered. Their exposure differs: `random` (53 bits of one raw draw) and `uniform` (an affine map of it),
# `integers` (Lemire's bounded method)
# and `permutation`/`shuffle` are thin layers over the raw stream and have not changed since 1.17; the
# transforms with real algorithms (`standard_normal`/`normal`/`lognormal` via the ziggurat, `choice` with `p`,
# `zipf`, `poisson`, `exponential`, `binomial`, `gamma`) are where a faster or more accurate algorithm may
# land. The code lists, for each catalogued loader, the `Generator` methods it calls (following calls between
# the dataset modules), and which of them are in the second group.
#
# **How to pin.** (1) Pin NumPy exactly (the course does: `numpy==2.4.6` in `environments/constraints.txt`).
# (2) Detect changes instead of hoping: record `catalogue.digest` of every loader at its smoke size in a test,
# so an upgrade that changes a stream fails loudly. (3) For streams that must survive upgrades, construct
# `Generator(PCG64(seed))` explicitly (not `default_rng`, whose default may change) and derive values from the
# raw stream with your own transforms: uniforms as $(x \gg 11) \cdot 2^{-53}$, normals by inverse CDF
# (`scipy.special.ndtri`), categorical draws by `searchsorted` on a CDF (as in Exercise 2). (4) For test
# fixtures, `RandomState` is frozen, at the price of slower, older algorithms.
#
# **Check.** The static scan below, an assertion that every seeded loader calls at least one `Generator`
# method, and the raw-stream recipe for uniforms checked against `Generator.random` today (equal now; if a
# future NumPy changed `random`, the recipe would still reproduce today's bytes).

# %%
GENERATOR_METHODS = {m for m in dir(np.random.Generator) if not m.startswith("_")}
THIN = {"random", "uniform", "integers", "permutation", "permuted", "shuffle", "bytes", "spawn"}
modules = {inspect.getmodule(catalogue.LOADERS[d.loader]) for d in catalogue.CATALOGUE}
calls_gen, calls_fn = {}, {}
for module in modules:
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.FunctionDef):
            found_m, found_f = set(), set()
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                        sub.func.attr in GENERATOR_METHODS and not (
                        isinstance(sub.func.value, ast.Name) and sub.func.value.id in ("np", "numpy")):
                    found_m.add(sub.func.attr)
                if isinstance(sub, ast.Call):
                    target = sub.func.id if isinstance(sub.func, ast.Name) else (
                        sub.func.attr if isinstance(sub.func, ast.Attribute) else None)
                    if target:
                        found_f.add(target)
            calls_gen.setdefault(node.name, set()).update(found_m)
            calls_fn.setdefault(node.name, set()).update(found_f)


def methods_of(name, seen=None):
    """Generator methods a function calls, directly or through other functions of the dataset modules."""
    seen = set() if seen is None else seen
    if name in seen or name not in calls_gen:
        return set()
    seen.add(name)
    out = set(calls_gen[name])
    for callee in calls_fn[name]:
        out |= methods_of(callee, seen)
    return out


exposure = {}
for d in catalogue.CATALOGUE:
    used = methods_of(d.loader)
    exposure[d.loader] = (sorted(used & THIN), sorted(used - THIN))
    if d.seed is not None:
        assert used, f"{d.loader} takes a seed but calls no Generator method?"
    print(f"{d.loader:>24}: thin {', '.join(exposure[d.loader][0]) or '-':<28} "
          f"algorithmic {', '.join(exposure[d.loader][1]) or '-'}")
seeded = [d.loader for d in catalogue.CATALOGUE if d.seed is not None]
print(f"{sum(bool(exposure[n][1]) for n in seeded)} of {len(seeded)} seeded loaders use an algorithmic transform")
assert set(exposure["low_rank_ratings"][1]) >= {"choice", "standard_normal"}  # read from its source above

raw = np.random.PCG64(SEED).random_raw(1000)
uniform_from_raw = (raw >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
assert np.array_equal(uniform_from_raw, np.random.Generator(np.random.PCG64(SEED)).random(1000))
assert isinstance(np.random.default_rng(SEED).bit_generator, np.random.PCG64)  # today; pin it explicitly
pins = (find_repo_root() / "environments" / "constraints.txt").read_text()
assert f"numpy=={np.__version__}" in pins.split()  # the installed NumPy is the pinned one
