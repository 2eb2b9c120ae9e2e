# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 9. Stream processing
#
# Chapters 6 to 8 ran jobs over data that had stopped arriving. Clicks, sensor readings, payments and
# model predictions never stop, and the answer is worth most while it is fresh. A stream processor
# computes over unbounded input, a little at a time: it groups events into **windows** of event time,
# decides with a **watermark** when a window has seen all it will see, writes each window's result to a
# sink **exactly once** even when a worker crashes, and can keep a model learning while the world it
# models drifts. This chapter builds all four on the communicator, runs the same windows in Spark
# Structured Streaming, and carries a stream through a crash with Redis Streams as a real broker.
#
# **Prerequisites:** Chapter 6 (MapReduce: hash partitioning and the all-to-all shuffle, reused here on
# every micro-batch) and Chapter 7 (Spark and DataFrames: the DataFrame API that Structured Streaming
# extends); Chapter 5 for $S_p$, $E_p$ and cost. Background: least squares and gradient descent.

# %% tags=["parameters"]
N_EVENTS = 20_000  # smoke: 3_000
KEYS = 8  # smoke: 5
RATE = 1000.0  # events per second of arrival time
DISORDER_MS = 300  # most events arrive up to this late: out of order, not yet late
LATE_FRACTION = 0.05
LATE_MS = 3_000  # the late events are delayed 3-6 s
WINDOW_MS = 2_000
SLIDE_MS = 1_000
LATENESS_MS = 1_000  # allowed lateness: watermark = max event time - LATENESS_MS
BATCH = 1_000  # smoke: 300
KS = [1, 2, 3, 4, 8, 16]  # smoke: [1, 2, 3, 5, 8]
EVENT_SECONDS = 2e-6  # simulated cost of windowing one event
SGD_BATCHES = 400  # smoke: 150
SGD_ROWS = 32
DRIFT = 0.01  # radians per micro-batch
LR = 0.1
BENCH_EVENTS = 200_000  # smoke: 20_000
SEED = 0

# %% [markdown]
# `N_EVENTS` events arrive at `RATE` per second with `KEYS` keys; most are out of order by up to
# `DISORDER_MS`, and a fraction `LATE_FRACTION` is `LATE_MS` to twice that late. Windows are
# `WINDOW_MS` long every `SLIDE_MS`; the watermark allows `LATENESS_MS`; the source is cut into
# micro-batches of `BATCH` events. `KS` are the world sizes, `EVENT_SECONDS` the simulated cost of one
# event. The online-learning stream has `SGD_BATCHES` micro-batches of `SGD_ROWS` rows whose true weights
# turn by `DRIFT` per batch; `LR` is the step size. `BENCH_EVENTS` sizes the throughput comparison.
#
# ## 1. Motivation: which ceiling binds
#
# The ceiling here is **freshness**. A batch job recomputed every night answers questions about
# yesterday; rerunning it every minute over all history costs the whole history every minute. A stream
# processor touches each event once, keeps only the state of the windows still open, and emits a
# result a bounded time after its window ends. The arithmetic below compares the work per answer.

# %%
import shutil
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, datasets, perf
from scaleoutai.collectives import block_range
from scaleoutai.data import streaming as st
from scaleoutai.data import streaming_sgd as sg
from scaleoutai.data import streaming_sinks as ss

per_day = 1e9  # events a day, e.g. a large click log
for period, label in ((86_400, "nightly batch"), (60, "batch every minute over the last 30 days"), (1, "stream")):
    touched = per_day * 30 if period == 60 else per_day * period / 86_400
    print(f"{label:>42}: result at most {period:>6} s old, events read per answer {touched:.1e}")

# %% [markdown]
# ## 2. Core concepts
#
# An **event** is (event time $t$, key, value). It arrives later than it happened, and not in order: a
# phone reconnects, a partition lags. A **tumbling window** of size 2 s covers $[0, 2), [2, 4), \dots$; a
# **sliding window** of size 2 s every 1 s also covers $[1, 3), [3, 5), \dots$, so each event falls in
# two windows. Per key and window we keep count and sum (the mean is their ratio).
#
# When is a window complete? Never, strictly: an event from it may still be in flight. The
# **watermark** is the processor's bet: $W = \max t - \delta$, the latest event time seen minus an
# allowed lateness $\delta$. A window whose end is at or below the watermark is declared final and
# emitted; an event that arrives for a window already behind the watermark is **late** and is dropped
# and counted. The plot shows arrival order against event time: the disorder band, the late events far
# below it, and the watermark following the top of the band at distance $\delta$.

# %%
events = datasets.generate_events(N_EVENTS, keys=KEYS, rate=RATE, disorder_ms=DISORDER_MS, lateness=LATE_FRACTION,
                            late_ms=LATE_MS, seed=SEED)
marks = st.batch_watermarks(events, BATCH, LATENESS_MS)
reference = st.reference_windows(events, WINDOW_MS, SLIDE_MS, lateness=LATENESS_MS, batch_size=BATCH)
everything = st.reference_windows(events, WINDOW_MS, SLIDE_MS)
shown = slice(0, min(N_EVENTS, 6 * BATCH))
fig, ax = plt.subplots(figsize=(10, 4))
ax.plot(np.arange(N_EVENTS)[shown], events.time[shown] / 1e3, ".", ms=2, label="event time of each arrival")
edges = np.arange(len(marks)) * BATCH
ax.step(edges[edges < shown.stop], marks[:len(edges)][edges < shown.stop] / 1e3, where="post", color="C3",
        label=f"watermark W_i in force for batch i (delta = {LATENESS_MS} ms)")
ax.set(xlabel="arrival order (events)", ylabel="event time (s)", title="out of order, late, and the watermark")
ax.legend()
plt.show()
print(f"{N_EVENTS} events, {KEYS} keys, {len(marks) - 1} micro-batches of {BATCH}; "
      f"{len(reference)} (window, key) results final by the last watermark")

# %% [markdown]
# Streaming systems differ in *when* the watermark moves. Spark Structured Streaming, whose answer
# Section 5 must match, updates it only between micro-batches: with $W_0 = 0$,
# $W_{i+1} = \max(W_i, \max t_{\le i} - \delta)$ over the events of batches $0..i$. Batch $i$ judges
# lateness against the **previous** watermark $W_{i-1}$ (an event is dropped from a window that ends at
# or before it) and emits the windows that end at or before $W_i$. Our runner follows the same rule, so
# the same files in the same micro-batches give the same windows. On four events in batches of two:

# %%
tiny = datasets.Events([100_000, 101_000, 85_000, 125_000], [1, 1, 1, 1], [1.0, 2.0, 4.0, 8.0])
print("watermarks W_0..W_2:", st.batch_watermarks(tiny, 2, 10_000).tolist())
print("final windows:", st.reference_windows(tiny, 10_000, lateness=10_000, batch_size=2))
print("85 s arrived with W_1 = 91 s in force, but is judged against W_0 = 0: kept, and [80, 90) closes at once")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# Rank $r$ reads block $r$ of every micro-batch, as a Kafka or Redis consumer reads its partition. The
# window state of a key must live in one place, so each event goes to the rank that owns its key,
# `partition_of(key, K)`: the all-to-all shuffle of Chapter 6, once per micro-batch. The watermark needs
# the latest event time over **all** ranks, one all-reduce (max) of one number per batch; because every
# rank then holds the same $W_i$, the output is the same for every $K$. The timeline shows two
# micro-batches on four simulated ranks: the shuffle rounds, then the small watermark exchange.

# %%
net = cluster.Network(alpha=1e-5, beta=1e-9)
traced = cluster.run(st.run_windows, 4, args=(events[:2 * BATCH], BATCH, WINDOW_MS, SLIDE_MS, LATENESS_MS),
                     network=net, trace=True)
cluster.plot_timeline(traced, title="two micro-batches on K = 4: shuffle by key, then the watermark all-reduce")
plt.show()

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# `WindowOperator` is one rank's state: the open windows of its keys, the late mark $W_{i-1}$ and the
# watermark $W_i$. `step` is one micro-batch on every rank: read the block, shuffle by key, add the
# on-time (event, window) pairs, emit the final windows, then agree on the next watermark.

# %%
from scaleoutai.notebooks import show

show(st.assign_windows, st.WindowOperator, st.step)

# %% [markdown]
# The check against the batch answer `reference_windows`, which computes every event's windows at once
# and keeps the pairs whose window ends after the watermark of the previous batch: for every $K$ in
# `KS`, and for $K$ larger than the number of keys (ranks that own no key still shuffle and vote on the
# watermark), tumbling and sliding.

# %%
def merged(res):
    return st.merge_tables([v.table() for v in res.values])


for K in KS + [KEYS + 3]:
    for slide in (WINDOW_MS, SLIDE_MS):
        res = cluster.run(st.run_windows, K, args=(events, BATCH, WINDOW_MS, slide, LATENESS_MS), timeout=120)
        assert st.tables_equal(merged(res), st.reference_windows(events, WINDOW_MS, slide, lateness=LATENESS_MS,
                                                                 batch_size=BATCH)), (K, slide)
run_sliding = res.values
dropped = sum(v.dropped for v in run_sliding)
print(f"windows equal the reference for K in {KS + [KEYS + 3]}, tumbling and sliding; "
      f"{dropped} late (event, window) pairs dropped")

# %% [markdown]
# What the windows say: per key, the mean value over each sliding window (key $k$'s values have mean
# $k$), and how many events each window counted. Windows near the end are missing: the last watermark
# has not closed them, and append mode emits a window once, when it is final.

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4))
for k in range(min(KEYS, 4)):
    rows = sorted((s, c, v) for (s, key), (c, v) in reference.items() if key == k)
    axes[0].plot([s / 1e3 for s, _, _ in rows], [v / c for _, c, v in rows], ".-", label=f"key {k}")
    axes[1].plot([s / 1e3 for s, _, _ in rows], [c for _, c, _ in rows], ".-", label=f"key {k}")
axes[0].set(xlabel="window start (s)", ylabel="mean value", title="mean per key and window")
axes[1].set(xlabel="window start (s)", ylabel="events counted", title="count per key and window")
axes[0].legend()
plt.show()

# %% [markdown]
# **Exactly once.** A crash can strike after a micro-batch's results reached the sink and before the
# processor recorded that they did. `run_exactly_once` checkpoints, after every batch, each rank's state
# with the source offset, written to a temporary file and renamed (a reader sees the old file or the
# new, never half); rank 0 then commits the batch id. A restart loads the committed state and replays
# the next batch, whose output is written again. The sink decides what "again" means: `upsert_sink`
# keys rows by (window, key), so a replay overwrites them with the same values; `naive_append_sink`
# appends them a second time (Section 6 shows both).

# %%
show(ss.run_exactly_once, ss.upsert_sink, ss.naive_append_sink)

# %% [markdown]
# **Online learning.** A linear model $y = x \cdot w_t + \text{noise}$ whose true weights $w_t$ turn
# by `DRIFT` radians per micro-batch. Online SGD takes one step per batch with gradient
# $g = X^\top (X w - y) / m$ over its $m$ rows and is scored on each batch *before* it trains on it. With
# $K$ ranks, each holds a block of the batch and one all-reduce of $[X_r^\top(X_r w - y_r),$ squared
# error, rows$]$ gives every rank the gradient of the whole batch: the steps equal single-rank SGD on the
# concatenated batch up to floating-point reassociation (checked to a relative $10^{-10}$).

# %%
show(sg.train_online_sgd)
X, y, W_true = datasets.drifting_regression(SGD_BATCHES, SGD_ROWS, dim=4, drift=DRIFT, noise=0.1, seed=SEED)
w_ref, online_err = sg.reference_online_sgd(X, y, LR)
for K in KS + [SGD_ROWS + 5]:
    res = cluster.run(sg.train_online_sgd, K, args=(X, y, LR), timeout=120)
    for w, e in res.values:
        np.testing.assert_allclose(w, w_ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(e, online_err, rtol=1e-10, atol=1e-12)
stale_err = sg.batch_errors(sg.stale_model(X, y, batches=5), X, y)
fig, ax = plt.subplots(figsize=(9, 4))
ax.semilogy(online_err, label="online SGD (one step per micro-batch)")
ax.semilogy(stale_err, label="trained once on the first 5 batches")
ax.axhline(0.1 ** 2, color="gray", ls=":", label="noise floor")
ax.set(xlabel="micro-batch", ylabel="mean squared error on the batch", title="learning under drift")
ax.legend()
plt.show()
late = slice(-SGD_BATCHES // 5, None)
print(f"distributed SGD equals one rank for K in {KS + [SGD_ROWS + 5]}; error over the last fifth: "
      f"online {online_err[late].mean():.3f}, stale {stale_err[late].mean():.3f}")
assert stale_err[late].mean() > 5 * online_err[late].mean()

# %% [markdown]
# ## 5. The same task with production tools: Spark Structured Streaming and Redis Streams
#
# **Spark.** Each micro-batch becomes one parquet file; the file source with `maxFilesPerTrigger=1`
# reads them oldest first, one per trigger, so Spark's micro-batches are ours. `withWatermark` sets
# $\delta$, `groupBy(window(...), "key")` opens the windows, append mode emits each window once, and
# `trigger(availableNow=True)` processes everything present, runs one batch without data that closes
# the windows the last watermark passed, and stops. One Spark session serves the notebook; it starts
# here, outside every timing, and stops in the last cell.

# %%
from scaleoutai.data.spark import local_spark  # noqa: E402

t0 = time.perf_counter()
spark = local_spark("chapter-09")  # without Java: one line saying how to get it
spark_startup = time.perf_counter() - t0
work = Path(tempfile.mkdtemp(prefix="ch09-"))
show(ss.spark_windows)

# %%
ss.write_batch_files(events, BATCH, str(work / "events"))
sparked = ss.spark_windows(spark, str(work / "events"), WINDOW_MS, SLIDE_MS, LATENESS_MS, str(work / "spark-ckpt"))
ours = cluster.run(st.run_windows, 2, args=(events, BATCH, WINDOW_MS, SLIDE_MS, LATENESS_MS))
assert sparked.batches == len(marks)  # one batch per file, then the batch without data
ours_marks = ours.values[0].watermarks  # the same W_i batch by batch; Spark's report can read 1 ms low
assert all(0 <= a - b <= 1 for a, b in zip(ours_marks, sparked.watermarks, strict=True))
assert st.tables_equal(sparked.table, merged(ours)) and st.tables_equal(sparked.table, reference)
print(f"Spark Structured Streaming == ours == reference: {len(sparked.table)} (window, key) results in "
      f"{sparked.batches} micro-batches (Spark start-up {spark_startup:.1f} s, query {sparked.seconds:.1f} s)")

# %% [markdown]
# **Redis Streams** is a real broker: producers `XADD` entries to an append-only stream; a **consumer
# group** hands each entry to one consumer (`XREADGROUP`) and remembers it as *pending* until the
# consumer acknowledges it (`XACK`). The broker keeps the offsets; the consumer keeps its window state
# and the id of the last entry it folded in, checkpointed before it acknowledges. A `redis-server` starts
# on a free port with persistence off and stops in the last cell.

# %%
from scaleoutai.data.broker import INSTALL_HINT, start_redis, stop_redis  # noqa: E402

if shutil.which("redis-server") is None:
    raise RuntimeError(INSTALL_HINT)
broker = start_redis(str(work))
client = broker.client()
ss.redis_publish(client, "events", events)
client.xgroup_create("events", "windows", id="0", mkstream=True)
show(ss.run_redis_consumer)
run_info = ss.run_redis_consumer(client, "events", "windows", "worker-1", BATCH, WINDOW_MS, SLIDE_MS, LATENESS_MS,
                                 str(work / "redis.ckpt"), str(work / "redis-sink"))
redis_table, redis_dup = ss.sink_table(ss.read_sink(str(work / "redis-sink")))
assert client.xlen("events") == N_EVENTS and client.xpending("events", "windows")["pending"] == 0
assert redis_dup == 0 and st.tables_equal(redis_table, reference)
print(f"Redis Streams consumer group: {client.xlen('events')} entries, {run_info.processed} batches, "
      f"all acknowledged; windows == reference")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **A crash between processing and commit.** Rank 2 of 4 dies after its output for a busy micro-batch
# reached the sink and before the checkpoint names that batch. The restart resumes from the last commit
# and replays the batch. With the upsert sink the result equals the reference, with nothing lost and
# nothing duplicated; with the append sink the replayed rows are there twice.

# %%
per_batch = np.bincount([b for v in run_sliding for b, *_ in v.rows])
busy = int(np.argmax(per_batch[:-1]))
outcome = {}
for sink in (ss.upsert_sink, ss.naive_append_sink):
    run_dir = Path(tempfile.mkdtemp(dir=work))
    args = (events, BATCH, WINDOW_MS, SLIDE_MS, LATENESS_MS, str(run_dir / "ckpt"), str(run_dir / "sink"), sink)
    try:
        cluster.run(ss.run_exactly_once, 4, args=args, kwargs={"crash_after": busy, "crash_rank": 2}, timeout=120)
        raise AssertionError("the injected crash did not happen")
    except cluster.RankError as err:
        assert "InjectedCrash" in str(err)
    resumed = cluster.run(ss.run_exactly_once, 4, args=args, timeout=120).values[0]
    table, dup = ss.sink_table(ss.read_sink(str(run_dir / "sink")))
    outcome[sink.__name__] = (resumed.start_batch, dup, st.tables_equal(table, reference))
    print(f"{sink.__name__:>17}: crashed in batch {busy}, resumed at batch {resumed.start_batch}; "
          f"duplicate rows {dup}; final table equals reference: {outcome[sink.__name__][2]}")
assert outcome["upsert_sink"] == (busy, 0, True)
assert outcome["naive_append_sink"][1] == per_batch[busy] > 0

# %% [markdown]
# The same crash on the broker: the consumer dies after writing a batch's windows and before `XACK`.
# Its entries stay pending in the group; on restart the consumer re-reads them (id `0`: "my pending
# entries"), replays the batch from its checkpointed state, and acknowledges.

# %%
client.delete("events")
ss.redis_publish(client, "events", events)
client.xgroup_create("events", "windows", id="0", mkstream=True)
crash_dir = Path(tempfile.mkdtemp(dir=work))
consume = dict(checkpoint=str(crash_dir / "redis.ckpt"), sink_dir=str(crash_dir / "sink"))
try:
    ss.run_redis_consumer(client, "events", "windows", "worker-1", BATCH, WINDOW_MS, SLIDE_MS, LATENESS_MS,
                          crash_after=busy, **consume)
    raise AssertionError("the injected crash did not happen")
except ss.InjectedCrash as err:
    print(err)
pending = client.xpending("events", "windows")["pending"]
assert pending == BATCH
resumed = ss.run_redis_consumer(client, "events", "windows", "worker-1", BATCH, WINDOW_MS, SLIDE_MS, LATENESS_MS,
                                **consume)
table, dup = ss.sink_table(ss.read_sink(str(crash_dir / "sink")))
assert dup == 0 and st.tables_equal(table, reference) and client.xpending("events", "windows")["pending"] == 0
print(f"{pending} entries were pending after the crash; the restart replayed batch {resumed.start_batch}: "
      f"windows == reference, no duplicates, nothing pending")

# %% [markdown]
# **Late data.** An event behind the watermark is dropped from the windows that are already final: the
# count below is what the answer is missing compared with the batch job over all events. A larger
# $\delta$ drops less and emits later, a trade-off between completeness and freshness.
#
# **An idle partition.** Flink combines parallel sources with the *minimum* of their watermarks, so that
# no partition's events become late because another ran ahead. A partition with no data then holds the
# watermark back for everyone: with more ranks than events per batch, some ranks read nothing and no
# window is ever emitted. Spark's rule (the maximum over the input) does not stall, at the price of
# judging lateness by the fastest partition.

# %%
missing = sum(c for c, _ in everything.values()) - sum(c for c, _ in st.reference_windows(
    events, WINDOW_MS, SLIDE_MS, lateness=LATENESS_MS, batch_size=BATCH, flush=True).values())
print(f"late (event, window) pairs dropped: {dropped} (= {missing} counted by the batch job and not by the stream)")
assert dropped == missing
for delta in (LATENESS_MS // 4, LATENESS_MS, 4 * LATENESS_MS):
    got = cluster.run(st.run_windows, 2, args=(events, BATCH, WINDOW_MS, SLIDE_MS, delta), kwargs={"flush": True})
    print(f"delta = {delta:>5} ms: dropped {sum(v.dropped for v in got.values):>5} pairs")
slow = datasets.generate_events(320, keys=KEYS, rate=20.0, disorder_ms=DISORDER_MS, lateness=0.0, seed=SEED)  # 16 s
emitted_by = {}
for policy in ("max", "min"):
    got = cluster.run(st.run_windows, 12, args=(slow, 8, WINDOW_MS, None, LATENESS_MS), kwargs={"policy": policy})
    emitted_by[policy] = len(merged(got))
    print(f"watermark = {policy} over 12 ranks, 8 events per batch: final watermark {got.values[0].watermarks[-1]} ms, "
          f"{emitted_by[policy]} (window, key) results emitted")
assert emitted_by["max"] > 0 and emitted_by["min"] == 0

# %% [markdown]
# ## 7. Evaluation: throughput, latency, scaling, cost
#
# **Throughput** on this machine: events per second of our windowing (one rank, in this process) and of
# Spark's query over the same parquet files in the same micro-batches, Spark's start-up excluded. Spark
# pays a fixed planning and commit cost per micro-batch, so both run with larger batches here.

# %%
bench = datasets.generate_events(BENCH_EVENTS, keys=KEYS, rate=RATE, disorder_ms=DISORDER_MS, lateness=LATE_FRACTION,
                           late_ms=LATE_MS, seed=SEED + 1)
bench_batch = max(BATCH, BENCH_EVENTS // 4)  # Spark pays a fixed cost per micro-batch
ss.write_batch_files(bench, bench_batch, str(work / "bench"))
t0 = time.perf_counter()
mine = cluster.run(st.run_windows, 1, args=(bench, bench_batch, WINDOW_MS, SLIDE_MS, LATENESS_MS))
ours_seconds = time.perf_counter() - t0
spark_run = ss.spark_windows(spark, str(work / "bench"), WINDOW_MS, SLIDE_MS, LATENESS_MS, str(work / "bench-ckpt"))
assert st.tables_equal(spark_run.table, merged(mine))
print(f"{BENCH_EVENTS} events in {len(st.micro_batches(bench, bench_batch))} micro-batches: ours "
      f"{BENCH_EVENTS / ours_seconds:,.0f} events/s, Spark {BENCH_EVENTS / spark_run.seconds:,.0f} events/s "
      f"(ratio {spark_run.seconds / ours_seconds:.1f}x)")

# %% [markdown]
# **Latency.** A window is emitted by the first batch whose watermark passes its end, so in stream time
# its result appears about $\delta$ plus the disorder plus up to one batch after the window closes. We
# measure it as the arrival time of the emitting batch's last event minus the window's end.

# %%
emitted = [(b, s) for v in run_sliding for b, s, *_ in v.rows]
arrival_base = 2 * LATE_MS + DISORDER_MS  # arrival time of the first event (datasets.generate_events)
lat = np.array([arrival_base + (min((b + 1) * BATCH, N_EVENTS) - 1) * 1000.0 / RATE - (s + WINDOW_MS)
                for b, s in emitted])
print(f"latency from window end to result, in stream time: median {np.median(lat):.0f} ms, max {lat.max():.0f} ms "
      f"(delta {LATENESS_MS} ms, batch {BATCH / RATE * 1e3:.0f} ms of arrivals)")
assert np.median(lat) >= LATENESS_MS

# %% [markdown]
# **Scaling** on the simulator: each rank pays `EVENT_SECONDS` per event it reads, and the shuffle and
# watermark exchange pay $\alpha$ and $\beta$. The cost is the price of $K$ instances for the simulated
# time, per million events.

# %%
def timed_windows(comm, events, batch, size, slide, delta):
    op = st.WindowOperator(size, slide, delta)
    for part in st.micro_batches(events, batch):
        lo, hi = block_range(len(part), comm.size, comm.rank)
        comm.compute(EVENT_SECONDS * (hi - lo) * (size // slide))
        st.step(comm, op, part)
    return comm.clock


times = {}
for K in KS:
    res = cluster.run(timed_windows, K, args=(events, BATCH, WINDOW_MS, SLIDE_MS, LATENESS_MS), network=net, timeout=120)
    times[K] = res.sim_time
table = perf.scaling_table(times)
price = capstone.lookup("aws-c7i.xlarge")
print(f"{'K':>3} {'T_K (ms)':>9} {'S_K':>6} {'E_K':>5} {'USD per 1e6 events':>19}")
for row in table:
    cost = perf.run_cost(price.price_per_hour, row["p"], row["time"]) * 1e6 / N_EVENTS
    print(f"{row['p']:>3} {row['time'] * 1e3:>9.2f} {row['speedup']:>6.2f} {row['efficiency']:>5.2f} {cost:>19.2e}")
print(f"priced as {price.instance_type} at {price.price_per_hour} USD/h per rank ({price.date})")
perf.plot_scaling(times, title="windows on the simulator")
plt.show()
assert table[1]["speedup"] > 1.0

# %% [markdown]
# The speedup bends early: the per-event work shrinks as $1/K$, but every micro-batch pays $K-1$ shuffle
# rounds and $\log_2 K$ watermark rounds of latency $\alpha$ whatever its size. Streaming systems meet
# this by batching more (higher throughput, later results) or by pipelining batches.
#
# ## 8. Exercises
#
# 1. **Session windows.** A session closes after a gap of $g$ ms without events for its key. Add them to
#    `WindowOperator` (windows merge when an event bridges two sessions) and say when a session is final.
# 2. **Side output.** Instead of dropping late pairs, send them to a second sink with their window, and
#    write a correction job that updates the affected windows. What does the consumer of the first sink
#    need to know to use the corrections?
# 3. **Transactional sink.** Replace the upsert with a sink that writes each batch's output to
#    `batch-<id>` atomically and ignores a batch id it already holds. Compare what each design requires
#    of the output (keys, determinism of the replay).
# 4. **Idle partitions.** Give the `"min"` watermark an idle timeout: a rank that has read nothing for
#    $n$ batches stops holding the watermark back. Which events can become late because of it?
# 5. **Drift.** Replace the constant step size with one that adapts to the prequential error (larger
#    when the error rises). Measure its error against plain online SGD for three values of `DRIFT`.
# 6. **Lab 9 (`labs/lab09-session-windows`): session windows over source partitions.** Read P
#    partitions on K ranks, keep a watermark per partition and window by **sessions** (a gap of $g$
#    without events closes a key's session; an event may bridge two). Carry each rank's watermark in
#    the same message as the events it ships, so a step costs one message per pair of ranks, and match
#    a single-machine replay for every $K$ and every interleaving of the partitions.
#
# ## 9. Research directions
#
# - **Completeness versus latency.** A watermark is a heuristic bound on disorder; set it too tight and
#   data is dropped, too loose and results wait. Choosing and adapting it from observed delays, and
#   emitting early results that later panes refine, is still an open design space.
#   - Akidau et al., "The Dataflow Model: A Practical Approach to Balancing Correctness, Latency, and
#     Cost in Massive-Scale, Unbounded, Out-of-Order Data Processing", VLDB, 2015. Windows, watermarks,
#     triggers and accumulation modes as separate choices.
#   - Begoli, Akidau, Hueske, Hyde, Knight and Knowles, "One SQL to Rule Them All: An Efficient and
#     Syntactically Idiomatic Approach to Management of Streams and Tables", SIGMOD, 2019. Event time
#     and watermarks in streaming SQL.
# - **State that survives failures and rescaling.** Exactly-once needs consistent snapshots of large
#   operator state; taking them without pausing the stream, and moving keyed state when the number of
#   workers changes, are where current systems differ.
#   - Carbone, Ewen, Fóra, Haridi, Richter and Tzoumas, "State Management in Apache Flink: Consistent
#     Stateful Distributed Stream Processing", VLDB, 2017. Asynchronous barrier snapshots and rescaling
#     of keyed state.
#   - Zaharia, Das, Li, Hunter, Shenker and Stoica, "Discretized Streams: Fault-Tolerant Streaming
#     Computation at Scale", SOSP, 2013. Micro-batches as small deterministic jobs, recovered by lineage.
#   - Siachamis, Psarakis, Fragkoulis, van Deursen, Carbone and Katsifodimos, "CheckMate: Evaluating
#     Checkpointing Protocols for Streaming Dataflows", arXiv preprint, 2024. Implements coordinated,
#     uncoordinated and communication-induced checkpoints in one system and finds the uncoordinated
#     protocol ahead when the keys are skewed.
# - **One engine for batch and streams.** Treating a stream as an unbounded table lets the same query
#   run on both, but incremental execution of arbitrary queries, and its guarantees, remain research.
#   - Armbrust et al., "Structured Streaming: A Declarative API for Real-Time Applications in Apache
#     Spark", SIGMOD, 2018. The engine of Section 5 and its incremental query model.
#   - Psarakis, Christodoulou, Siachamis, Fragkoulis and Katsifodimos, "Styx: Transactional Stateful
#     Functions on Streaming Dataflows", SIGMOD, 2025. Runs serializable multi-partition transactions with
#     exactly-once guarantees on a streaming dataflow engine, widening the one engine from batch and
#     streams to transactional applications.
# - **Learning while the data drifts.** Online learners must forget at the rate the world changes;
#   detecting drift, adapting step sizes and doing so across many workers with stale gradients is open.
#   - Gama, Žliobaitė, Bifet, Pechenizkiy and Bouchachia, "A Survey on Concept Drift Adaptation", ACM
#     Computing Surveys, 2014. Kinds of drift and the families of adaptive learners.
#   - Sulaiman, Farmanbar, Kagami, Belbachir and Rong, "Online deep learning's role in conquering the
#     challenges of streaming data: a survey", Knowledge and Information Systems, 2025. Surveys online deep
#     learning under concept drift, catastrophic forgetting and skewed labels, the problems a streaming
#     learner meets together.
#
# ## What's next
#
# Part III begins. Chapter 10 (Distributed optimization) takes the gradient all-reduce of Section 4's
# online SGD and asks what it costs at scale: synchronous against asynchronous SGD with staleness,
# local SGD that communicates less often, and gradients compressed before they travel.

# %%
spark.stop()
stop_redis(broker)
shutil.rmtree(work, ignore_errors=True)
assert broker.proc.poll() is not None
print("Spark session stopped, redis-server stopped, temporary files removed")
