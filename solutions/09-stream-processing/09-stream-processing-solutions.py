# %% [markdown]
# # Chapter 9 solutions: Stream processing
#
# Worked solutions to the exercises of `chapters/09-stream-processing` (the instructor's manual,
# never in the student edition). Each exercise: the answer, the derivation or argument, and for the
# coding and analysis exercises code that computes it and asserts it.
#
# Everything runs on the simulator with the chapter's rule for watermarks (Spark's micro-batch rule:
# batch $i$ judges lateness against $W_{i-1}$ and emits what ends at or before $W_i$). No Spark or Redis
# is needed: the exercises are about the operator and the sink, not the engines.

# %%
import pickle
import shutil
import tempfile
from pathlib import Path

import numpy as np

from scaleoutai import cluster, datasets
from scaleoutai.collectives import block_range, recursive_doubling_allreduce
from scaleoutai.data import streaming as st
from scaleoutai.data import streaming_sgd as sg
from scaleoutai.data import streaming_sinks as ss
from scaleoutai.datasets import Events

SEED, N_EV, N_KEYS, BATCH = 0, 4_000, 6, 400
WIN, SLIDE, DELTA = 2_000, 1_000, 1_000
EVENTS = datasets.generate_events(N_EV, keys=N_KEYS, rate=1000.0, disorder_ms=300, lateness=0.05,
                                  late_ms=3_000, seed=SEED)
MARKS = st.batch_watermarks(EVENTS, BATCH, DELTA)  # W_0 .. W_n


def latest(seen, batch):
    """The latest event time read so far (None before any event)."""
    if not len(batch):
        return seen
    top = int(batch.time.max())
    return top if seen is None else max(seen, top)

# %% [markdown]
# ## Exercise 1 (coding): session windows
#
# **Definition.** Per key, sort the kept events by time and cut wherever two consecutive times differ by
# $\ge g$; a session is $[t_{\text{first}}, t_{\text{last}} + g)$ with its count and sum. Incrementally,
# a new event at $t$ opens $[t, t+g)$ and merges with every open session of its key that it overlaps
# (interval $[s, e)$ with $t < e$ and $t + g > s$); one event can bridge two sessions into one.
#
# **Lateness and finality.** Take the chapter's rule with the session end in the role of the window
# end. An event with $t < W_{i-1}$ is late and dropped. A session is **final** once $e \le W_i$,
# i.e. the watermark has passed its last event plus the gap. This is sound: every later on-time event
# has $t \ge W \ge e$, so it can neither fall inside the session nor within $g$ of its last event
# ($t - t_{\text{last}} \ge g$). Hence sessions emitted early never need to be reopened, and the
# streaming answer equals the batch answer: sessionize the on-time events, keep the sessions that end
# at or before the last watermark. The checks below compare the two for $K = 1, 2, 4$ and a $K$ larger
# than the number of keys.

# %%
class SessionOperator:
    """One rank's session windows with gap ``gap`` ms: merge on overlap, emit when end <= watermark."""

    def __init__(self, gap, lateness):
        self.gap, self.lateness = int(gap), int(lateness)
        self.open = {}  # key -> list of [start, end, count, sum]
        self.late_mark = self.watermark = 0
        self.dropped, self.seen = 0, None

    def process(self, batch):
        for t, k, v in zip(batch.time.tolist(), batch.key.tolist(), batch.value.tolist()):
            if t < self.late_mark:
                self.dropped += 1
                continue
            new = [t, t + self.gap, 1, v]
            keep = []
            for s in self.open.get(k, []):
                if t < s[1] and t + self.gap > s[0]:  # overlap: merge into the new session
                    new = [min(new[0], s[0]), max(new[1], s[1]), new[2] + s[2], new[3] + s[3]]
                else:
                    keep.append(s)
            self.open[k] = keep + [new]

    def evict(self):
        out = []
        for k, sessions in self.open.items():
            out += [(s[0], k, s[2], s[3]) for s in sessions if s[1] <= self.watermark]
            self.open[k] = [s for s in sessions if s[1] > self.watermark]
        return out


def run_sessions(comm, events, batch_size, gap, lateness):
    op = SessionOperator(gap, lateness)
    rows = []
    for batch in st.micro_batches(events, batch_size):
        first, last = block_range(len(batch), comm.size, comm.rank)
        mine = batch[first:last]
        op.seen = latest(op.seen, mine)
        op.process(st.shuffle_by_key(comm, mine))
        rows += op.evict()
        op.late_mark = op.watermark
        top = st.global_max_time(comm, op.seen)
        if top is not None:
            op.watermark = max(op.watermark, top - lateness)
    rows += op.evict()  # the batch without data
    return {(s, k): (c, v) for s, k, c, v in rows}, op.dropped


def reference_sessions(events, batch_size, gap, lateness):
    """Batch answer: on-time events (t >= W_{i-1}) cut into sessions, those ending by W_n."""
    marks = st.batch_watermarks(events, batch_size, lateness)
    late_mark = np.concatenate([[0], marks[:-1]])[np.arange(len(events)) // batch_size]  # W_{i-1}
    keep = events.time >= late_mark
    t, k, v = events.time[keep], events.key[keep], events.value[keep]
    out = {}
    for key in np.unique(k):
        order = np.argsort(t[k == key], kind="stable")
        tk, vk = t[k == key][order], v[k == key][order]
        cuts = np.flatnonzero(np.diff(tk) >= gap) + 1
        for ts, vs in zip(np.split(tk, cuts), np.split(vk, cuts)):
            if ts[-1] + gap <= marks[-1]:
                out[(int(ts[0]), int(key))] = (len(ts), float(vs.sum()))
    return out, int((~keep).sum())


slow = datasets.generate_events(1_500, keys=4, rate=40.0, disorder_ms=300, lateness=0.05, late_ms=3_000,
                                seed=SEED + 3)  # sparse enough for real gaps
# gaps above the disorder band, so sessions both split and merge
for gap in (250, 600):
    want, want_dropped = reference_sessions(slow, 100, gap, DELTA)
    for K in (1, 2, 4, 7):
        res = cluster.run(run_sessions, K, args=(slow, 100, gap, DELTA), timeout=120)
        got = st.merge_tables([v[0] for v in res.values])
        assert st.tables_equal(got, want), (gap, K)
        assert sum(v[1] for v in res.values) == want_dropped
    print(f"gap {gap} ms: {len(want)} final sessions equal the batch answer for K = 1, 2, 4, 7; "
          f"{want_dropped} late events dropped")
assert len(want) > 0 and want_dropped > 0

# %% [markdown]
# ## Exercise 2 (coding): a side output for late pairs, and the correction job
#
# **Answer.** The operator keeps the late (event, window) pairs in a second output, each with its
# window start, key, value and the batch that saw it. The correction job aggregates them per (window,
# key) into (count, sum) and **adds** them to the rows of the first sink: count and sum are additive,
# so a correction is a delta, and a window that received only late events becomes a new row. After the
# correction, the table equals the batch job over *all* events for every window the last watermark
# closed (late pairs only belong to windows that end at or before some $W_{i-1} \le W_n$).
#
# **What the consumer of the first sink must know.** That its rows are provisional: a row can change
# after it was emitted, so it must treat the sink as a table keyed by (window, key), not a log of final
# facts; whether a correction is a delta (add it) or a replacement (overwrite), here a delta; and how
# to tell that it has seen all corrections for a window (a second watermark for the side output, or a
# version/batch id per correction so it can apply each exactly once). Anything derived from the first
# sink (an alert that fired, a model trained on it) must be recomputable or tolerate the revision.

# %%
class SideOutputOperator(st.WindowOperator):
    """The chapter's operator, but late (event, window) pairs go to ``self.side`` instead of vanishing."""

    def process(self, batch):
        idx, starts = st.assign_windows(batch.time, self.size, self.slide)
        late = starts + self.size <= self.late_mark
        self.side = getattr(self, "side", [])
        self.side += list(zip(starts[late].tolist(), batch.key[idx[late]].tolist(),
                              batch.value[idx[late]].tolist()))
        super().process(batch)


def run_with_side_output(comm, events, batch_size, size, slide, lateness):
    op = SideOutputOperator(size, slide, lateness)
    rows = []
    for batch in st.micro_batches(events, batch_size):
        rows += st.step(comm, op, batch)
    rows += op.evict()
    return {(s, k): (c, v) for s, k, c, v in rows}, getattr(op, "side", [])


def correct(table, side):
    """The correction job: add the late pairs, aggregated per (window, key), to the first sink."""
    out = dict(table)
    for s, k, v in side:
        c0, v0 = out.get((s, k), (0, 0.0))
        out[(s, k)] = (c0 + 1, v0 + v)
    return out


res = cluster.run(run_with_side_output, 3, args=(EVENTS, BATCH, WIN, SLIDE, DELTA), timeout=120)
first = st.merge_tables([v[0] for v in res.values])
side = [pair for v in res.values for pair in v[1]]
assert st.tables_equal(first, st.reference_windows(EVENTS, WIN, SLIDE, lateness=DELTA, batch_size=BATCH))
everything = st.reference_windows(EVENTS, WIN, SLIDE)  # the batch job over all events
closed = {w: x for w, x in everything.items() if w[0] + WIN <= MARKS[-1]}
fixed = correct(first, side)
assert st.tables_equal(fixed, closed)
new_rows = len(set(fixed) - set(first))
print(f"{len(side)} late pairs in the side output; after the correction the sink equals the batch job "
      f"on all {len(closed)} closed windows ({new_rows} windows existed only through late events)")

# %% [markdown]
# ## Exercise 3 (coding): a transactional sink, against the upsert sink
#
# **Answer.** `transactional_sink` writes batch $i$'s rows of rank $r$ to `batch-<i>/part-<r>`
# atomically (temporary name, rename) and does nothing if that file exists. With the chapter's crash
# (rank 2 dies after batch $i$ reached the sink, before the commit), the restart replays batch $i$; the
# rewrite is ignored, and the union of all batch files equals the reference with no duplicates.
#
# **What each design requires.**
#
# - *Upsert* needs a **key** on every output row and an idempotent overwrite per key. It tolerates a
#   replay that recomputes the same keys; if the replay could produce *fewer* rows or other keys (a
#   non-deterministic source or operator), rows of the first attempt that nobody overwrites stay, stale.
#   Readers see the latest value per key, so it suits aggregates, not append-only logs of events.
# - *Transactional (by batch id)* needs **no key** and works for any output, including appends,
#   but it needs the **replay to be deterministic**: the sink keeps the first attempt's output and drops
#   the second, while the operator's state continues from the replay. Both must be the same batch (same
#   source offsets, same watermark), which the checkpointed offsets guarantee here. It also needs the
#   sink to make a batch's write atomic and to remember which ids it holds (a file per id here, a
#   transaction table in a database, Kafka's transactional producer).

# %%
def transactional_sink(sink_dir, rank, batch_id, rows):
    """Write this rank's rows of ``batch_id`` once, atomically; a replayed batch id is ignored."""
    path = Path(sink_dir) / f"batch-{batch_id:06d}" / f"part-{rank}.pkl"
    if path.exists():
        return
    ss.atomic_write(path, pickle.dumps([tuple(r) for r in rows]))


def read_transactional(sink_dir):
    return [row for p in sorted(Path(sink_dir).glob("batch-*/part-*.pkl")) for row in pickle.loads(p.read_bytes())]


want = st.reference_windows(EVENTS, WIN, SLIDE, lateness=DELTA, batch_size=BATCH)
work = Path(tempfile.mkdtemp(prefix="ch09-sol-"))
try:
    args = (EVENTS, BATCH, WIN, SLIDE, DELTA, str(work / "ckpt"), str(work / "sink"), transactional_sink)
    busy = 4
    try:
        crash = {"crash_after": busy, "crash_rank": 2}
        cluster.run(ss.run_exactly_once, 4, args=args, kwargs=crash, timeout=120)
        raise AssertionError("rank 2 should have crashed")
    except cluster.RankError as err:
        assert "InjectedCrash" in str(err)
    written_before = {p.name for p in (work / "sink").iterdir()}
    rerun = cluster.run(ss.run_exactly_once, 4, args=args, timeout=120)
    resumed = rerun.values[0]
    table, dup = ss.sink_table(read_transactional(str(work / "sink")))
finally:
    shutil.rmtree(work)
assert f"batch-{busy:06d}" in written_before and resumed.start_batch == busy  # batch 4 was replayed
assert dup == 0 and st.tables_equal(table, want)
print(f"transactional sink: crashed in batch {busy}, replayed it, rewrite ignored; {len(table)} rows, "
      f"{dup} duplicates, equal to the reference")

# %% [markdown]
# ## Exercise 4 (coding): an idle timeout for the "min" watermark
#
# **Rule.** Each rank counts the batches since it last read an event. The watermark follows the minimum
# of the per-rank latest times over the ranks that are **not** idle (idle: nothing read for $n$
# batches); with every rank idle it stays where it is. One all-reduce (min) still suffices: an idle rank
# contributes $+\infty$.
#
# **Which events become late.** Exactly the events of a partition that was declared idle and then
# comes back with *old* data: while it was silent the watermark advanced with the other partitions, so
# its backlog (event times from the silent period) is behind the watermark and dropped from windows that
# are already final. Without the timeout those events would have been on time, but nothing would have
# been emitted while the partition was silent. The timeout trades that stall for possible loss, bounded
# by what the idle partition had not yet delivered; $n$ should exceed the partition's normal gap
# between events.
#
# Below: 3 sources (one per rank), source 1 goes silent for batches 2-6 and then delivers its backlog.
# Plain "min" never drops anything but emits nothing while source 1 is silent; with the timeout the
# windows keep coming and exactly source 1's backlog pairs behind the watermark are dropped.

# %%
_INF = np.iinfo(np.int64).max


def idle_min_run(comm, per_source, size, lateness, idle_after):
    """Rank r reads source r's batches; the watermark is the min over non-idle ranks' latest times."""
    op = st.WindowOperator(size, size, lateness)
    rows, idle_for, emitted_per_batch = [], 0, []
    for batch in per_source[comm.rank]:
        if len(batch):
            op.seen = latest(op.seen, batch)
            idle_for = 0
        else:
            idle_for += 1
        op.process(st.shuffle_by_key(comm, batch))
        out = op.evict()
        rows += out
        emitted_per_batch.append(len(out))
        mine = _INF if (idle_after is not None and idle_for >= idle_after) or op.seen is None else op.seen
        low = int(recursive_doubling_allreduce(comm, np.array([mine], dtype=np.int64), op="min")[0])
        op.late_mark = op.watermark
        if low != _INF:
            op.watermark = max(op.watermark, low - lateness)
    return len(rows), op.dropped, emitted_per_batch


rng = np.random.default_rng(SEED)
n_batches, per_batch, period = 10, 40, 1_000  # each batch covers 1 s of event time per source
per_source = []
for source in range(3):
    batches = []
    for i in range(n_batches):
        t = rng.integers(i * period, (i + 1) * period, per_batch)
        batches.append(Events(t, rng.integers(0, 4, per_batch), rng.normal(size=per_batch)))
    per_source.append(batches)
backlog = Events.concat(per_source[1][2:7])
per_source[1] = per_source[1][:2] + [Events([], [], [])] * 5 + [backlog] + per_source[1][8:]
stats = {}
for idle_after in (None, 2):
    res = cluster.run(idle_min_run, 3, args=(per_source, 1_000, 200, idle_after), timeout=60)
    stats[idle_after] = (sum(v[0] for v in res.values), sum(v[1] for v in res.values),
                         np.sum([v[2] for v in res.values], axis=0))
no_timeout, with_timeout = stats[None], stats[2]
print("results emitted per batch, plain min:", no_timeout[2].tolist(), "with timeout:", with_timeout[2].tolist())
assert no_timeout[1] == 0  # plain min: nothing late, the silent source held the watermark back
# ... and after the windows of batch 0 (emitted in batch 2) nothing more until the backlog arrives
assert no_timeout[2][3:8].sum() == 0 < with_timeout[2][3:8].sum()
# with the timeout every dropped event is from source 1's backlog: the late pairs are its events whose
# window ended at or before the late mark of the batch it arrives in (batch 7). By the chapter's rule
# that is W_{i-1}, computed from the events of batches 0..5, i.e. from the two live sources only
arrive = 7
w_prev = (min(int(per_source[0][arrive - 2].time.max()), int(per_source[2][arrive - 2].time.max())) - 200)
expected_late = int(np.sum(backlog.time // 1_000 * 1_000 + 1_000 <= w_prev))
assert with_timeout[1] == expected_late > 0
print(f"min watermark: dropped {no_timeout[1]}, emitted in batches 3-7 {no_timeout[2][3:8].sum()}; "
      f"with idle timeout 2: dropped {with_timeout[1]} (all from the backlog), emitted {with_timeout[2][3:8].sum()}")

# %% [markdown]
# ## Exercise 5 (analysis): a step size that follows the prequential error
#
# **The literal rule fails, and why.** "Multiply the step by 1.1 when this batch's prequential error is
# above its running mean, by 0.95 otherwise" looks right but drifts *down* on every stream: the error of
# a batch is a mean of squared residuals, a right-skewed quantity whose median is below its mean, so
# "above the mean" happens in fewer than half of the batches and the step shrinks even under strong
# drift. The code below measures it (worse than the fixed step at `DRIFT = 0.05`).
#
# **A rule that works: choose the step by its prequential error.** Run $C$ learners side by side with
# steps $\eta_1 < \dots < \eta_C$ (here $0.025 \dots 0.4$), keep an exponential average of each one's
# prequential error, and predict with (report the error of) the learner whose average is lowest.
# Prequential error is an honest validation score: each batch is scored before anyone trains on it. When
# the world drifts, the small-step learners lag and their error rises, so the choice moves to a larger
# step; on a stationary stream the small steps average the noise away and win. The chosen step is
# therefore "larger when the error rises", without a hand-tuned multiplier. Cost: $C$ times the compute
# and one all-reduce of $C(d+1)+1$ numbers per batch instead of $d+2$; every rank makes the same choice
# because it sees the same reduced errors.
#
# **Measured** (prequential MSE over the last half of 300 batches, noise floor $0.1^2 = 0.01$): with no
# drift all steps sit at the floor and the selector matches the fixed step; at `DRIFT = 0.01` and
# `0.05` it picks larger steps and beats the fixed $\eta = 0.1$ of the chapter (at `0.05` by about a
# third). The asserts check this ordering, the step chosen rising with the drift, and that $K = 4$
# ranks make exactly the choices and errors of one.

# %%
def literal_rule(X, y, lr0=0.1, up=1.1, down=0.95):
    """The exercise's rule taken literally, on one rank."""
    w, lr, avg, errs = np.zeros(X.shape[2]), lr0, None, []
    for Xb, yb in zip(X, y):
        r = Xb @ w - yb
        errs.append(float(r @ r / len(yb)))
        w = w - lr * Xb.T @ r / len(yb)
        if avg is not None:
            lr = float(np.clip(lr * (up if errs[-1] > avg else down), 0.01, 0.5))
        avg = errs[-1] if avg is None else 0.9 * avg + 0.1 * errs[-1]
    return np.array(errs)


def step_selector_sgd(comm, X, y, steps, beta=0.9):
    """C online learners with the given steps; report the one with the lowest averaged prequential error."""
    n, b, d = X.shape
    first, last = block_range(b, comm.size, comm.rank)
    eta = np.asarray(steps, dtype=np.float64)
    W, score, errs, chosen = np.zeros((len(eta), d)), None, [], []
    for Xb, yb in zip(X[:, first:last], y[:, first:last]):
        R = W @ Xb.T - yb  # one row of residuals per learner
        local = np.concatenate([(R @ Xb).ravel(), (R ** 2).sum(axis=1), [len(yb)]])
        total = recursive_doubling_allreduce(comm, local, op="sum")
        rows = total[-1]
        grads = total[:len(eta) * d].reshape(len(eta), d) / rows
        batch_err = total[len(eta) * d:-1] / rows
        pick = len(eta) // 2 if score is None else int(np.argmin(score))
        errs.append(batch_err[pick])
        chosen.append(eta[pick])
        W = W - eta[:, None] * grads
        score = batch_err if score is None else beta * score + (1 - beta) * batch_err
    return np.array(errs), np.array(chosen)


batches, rows_per, grid = 300, 32, [0.025, 0.05, 0.1, 0.2, 0.4]
half = slice(batches // 2, None)
summary = {}
for drift in (0.0, 0.01, 0.05):
    X, y, _ = datasets.drifting_regression(batches, rows_per, dim=4, drift=drift, noise=0.1, seed=SEED)
    _, plain = sg.reference_online_sgd(X, y, 0.1)
    one = cluster.run(step_selector_sgd, 1, args=(X, y, grid)).values[0]
    four = cluster.run(step_selector_sgd, 4, args=(X, y, grid)).values[0]
    np.testing.assert_allclose(four[0], one[0], rtol=1e-9)
    assert np.array_equal(four[1], one[1])  # the same learner chosen on every batch
    # the selector's error on each batch is that of the chosen fixed-step learner (same steps, same data)
    for k, eta in enumerate(grid):
        errs_k = sg.reference_online_sgd(X, y, eta)[1]
        np.testing.assert_allclose(one[0][one[1] == eta], errs_k[one[1] == eta], rtol=1e-9)
    summary[drift] = (plain[half].mean(), one[0][half].mean(), float(np.median(one[1][half])),
                      literal_rule(X, y)[half].mean())
    print(f"drift {drift}: last-half MSE fixed 0.1 {summary[drift][0]:.4f}, selector {summary[drift][1]:.4f} "
          f"(median step {summary[drift][2]}), literal rule {summary[drift][3]:.4f}")
assert summary[0.0][1] <= 1.02 * summary[0.0][0]
assert summary[0.01][1] < summary[0.01][0] and summary[0.05][1] < 0.8 * summary[0.05][0]
assert summary[0.0][2] < summary[0.01][2] <= summary[0.05][2]  # the step grows with the drift
assert summary[0.05][3] > summary[0.05][0]  # the literal rule shrinks its step and loses under drift

# %% [markdown]
# ## Exercise 6 (lab): Lab 9, session windows over source partitions with in-band watermarks
#
# The lab is `labs/lab09-session-windows`. Its reference solution is the solution blocks of
# `labs/lab09-session-windows/lab09-session-windows.py`; its hidden tests and mutants are in
# `grading/lab09-session-windows/` (`tests.py`, `rubric.yaml`, `mutants/`).
#
# **What it grades.** Every rank's emitted sessions (key, [first time, last time + gap), count, sum) on
# the rank that owns the key, the step at which each one is emitted, and the number of late events,
# against the grader's single-machine replay of the same delivery schedule, for K = 1 to 7, K larger than
# the number of partitions and of keys, empty partitions, partitions that start late or finish early,
# int, float and epoch-millisecond times, several seeded interleavings of one set of logs and two real
# processes; and, from the grader's trace and recorded messages, exactly one float64 frame per ordered
# pair of ranks per step, holding the sender's watermark and only its on-time events for the receiver.
#
# **Key ideas of the answer.** A partition's watermark is its largest delivered time minus delta, -inf
# before its first event and +inf once it has delivered its last one; a rank folds its partitions into
# their minimum (+inf when it reads none) and puts that number at the head of every frame it sends, so
# after one exchange every rank holds W(i), the minimum over all partitions, without an all-reduce. An
# event is late against W(i-1), which every rank already knows when it reads the step's events, so late
# events are dropped and counted before the send. Sessions merge incrementally (an event absorbs every
# open session of its key that overlaps [t, t + gap)), and a session is emitted at the first step whose
# W(i) is at or past its end: every later on-time event has t >= W(i) >= end, so it can neither fall
# inside nor within gap of the session, and the streaming output equals the batch sessionization of the
# on-time events whatever K and however the partitions interleave. The chapter's tumbling windows and
# its all-reduced maximum, pasted in, score nothing: the windows differ, the maximum turns a slow
# partition's events late, and the watermark costs messages of its own.

