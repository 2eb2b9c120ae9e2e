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
# # Chapter 7. Spark and DataFrames
#
# Chapter 6 wrote one job as three functions. Real questions are chains of steps: filter the orders,
# compute a revenue column, join the customers, total by region. Written as MapReduce jobs, each step
# would write its output and the next would read it back. A **DataFrame** with a **lazy plan** records
# the steps instead, and runs nothing until a result is asked for; then it sees the whole chain, runs
# the steps that need no data from elsewhere back to back on each partition, and cuts the chain only
# where a shuffle is unavoidable. This chapter builds that engine on the communicator, checks it against
# a single-process reference for every $K$, rebuilds a lost partition from its lineage, and runs the
# same queries in PySpark, which must give the same rows with the same number of stages.
#
# **Prerequisites:** Chapter 6 (MapReduce: hash partitioning, the shuffle as an all-to-all, the
# combiner). Chapter 4 for the $\alpha$-$\beta$ cost of all-to-all and Chapter 5 for $S_K$, $E_K$ and cost.
# Background: SQL's `WHERE`, `GROUP BY` and `JOIN`, or their pandas equivalents.

# %% tags=["parameters"]
N_ORDERS = 200_000  # smoke: 4_000
N_CUSTOMERS = 2_000  # smoke: 200
KS = [1, 2, 4, 8, 16]  # smoke: [1, 2, 3, 5, 8]
ROW_SECONDS = 2e-7  # simulated cost of one operator reading one row
ALPHA = 1e-5
BETA = 1e-9
SEED = 0

# %% [markdown]
# `N_ORDERS` generated orders (a customer drawn with Zipf frequencies, an amount, a quantity) and
# `N_CUSTOMERS` customers (a region and a discount) are the tables; `KS` are the world sizes;
# `ROW_SECONDS` is what the simulator charges an operator per row it reads; `ALPHA` and `BETA` describe
# the simulated network.
#
# ## 1. Motivation: which ceiling binds
#
# The ceiling is the same as in Chapter 6, reading and moving data, but it binds harder on a chain of
# steps. Re-read the word count of Chapter 6 as a DataFrame query: a table of words, grouped by word,
# counted. The plan has two stages: the first splits nothing across machines (each partition counts its
# own words, the combiner), the second starts after the one shuffle. A three-step MapReduce pipeline
# would write and re-read its data twice; a lazy plan pipelines every step that keeps partitions apart
# and pays only for the shuffles the query really needs.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, datasets, perf
from scaleoutai.data import dataframe as dfm
from scaleoutai.data import mapreduce as mr
from scaleoutai.data.dataframe import DataFrame, col

lines = datasets.zipf_lines(N_ORDERS // 20, words_per_line=10, vocab=500, seed=SEED)
words = {"word": np.array([w for line in lines for w in line.split()])}


def word_count(comm):
    return DataFrame.from_table(comm, words, "words").group_by("word").agg(n=("word", "count"))


print(word_count(None).explain())
counted = cluster.run(lambda comm: word_count(comm).collect(), 4, timeout=120).values[0]
assert dict(zip(counted["word"].tolist(), counted["n"].tolist())) == mr.reference_mapreduce(
    lines, mr.word_count_mapper, mr.sum_reducer)
print(f"word count as a DataFrame == Chapter 6's reference: {len(counted['word'])} words, {word_count(None).stages()} stages")

# %% [markdown]
# ## 2. Core concepts
#
# - A **partition** is the slice of the table one worker holds; here partition $p$ lives on rank $p$.
# - A **transformation** (`select`, `filter`, `with_column`, `group_by(...).agg`, `join`) returns a new
#   DataFrame whose plan has one more node; nothing runs. An **action** (`collect`) runs the plan.
# - A **narrow dependency**: output partition $p$ needs only input partition $p$ (filter, select, a new
#   column). A **wide dependency**: it needs rows from every input partition (group-by, join), brought
#   by a **shuffle**.
# - A **stage** is a maximal chain of narrow steps; every shuffle ends one, so stages = shuffles + 1.
#   A task is one stage on one partition. The stages form a **DAG** (a join has two parent stages).
# - **Lineage** is the plan itself seen as a recipe: any partition can be recomputed from the source by
#   replaying the steps that lead to it.
#
# The cell below builds a query and shows that building it sends no message; only `collect` does.

# %%
rng = np.random.default_rng(SEED)
weights = 1.0 / np.arange(1, N_CUSTOMERS + 1) ** 1.1
orders = {"customer": rng.choice(N_CUSTOMERS, N_ORDERS, p=weights / weights.sum()),
          "amount": rng.gamma(2.0, 20.0, N_ORDERS).round(2),
          "quantity": rng.integers(1, 6, N_ORDERS)}
customers = {"customer": np.arange(N_CUSTOMERS), "region": rng.integers(0, 5, N_CUSTOMERS),
             "discount": rng.choice([0.0, 0.05, 0.1], N_CUSTOMERS)}


def revenue_by_region(comm):
    """The chapter's query: four stages, two of them feeding the join."""
    o = DataFrame.from_table(comm, orders, "orders")
    c = DataFrame.from_table(comm, customers, "customers")
    return (o.filter(col("quantity") >= 2)
            .with_column("revenue", col("amount") * col("quantity"))
            .join(c, on="customer")
            .group_by("region")
            .agg(revenue=("revenue", "sum"), orders=("quantity", "count"), mean_amount=("amount", "mean")))


def lazy_then_action(comm):
    df = revenue_by_region(comm)
    before = comm.stats.messages_sent
    df.collect()
    return before, comm.stats.messages_sent


res = cluster.run(lazy_then_action, 4, timeout=120)
assert all(before == 0 < after for before, after in res.values)
print("messages sent per rank (after building the plan, after collect):", res.values)
print(revenue_by_region(None).explain())

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# Stage 0 scans the orders, filters and computes the revenue on each partition, then hashes every row by
# customer to its destination. Stage 1 does the same for the customers table. Stage 2 reads both
# shuffles, joins each partition locally, aggregates per region on the partition (the map-side combine)
# and shuffles again, by region. Stage 3 merges the partial aggregates. Every shuffle is one all-to-all:
# $K-1$ rounds of $\alpha + \frac{n}{K}\beta$ for $n$ bytes per rank. The figure shows the stage DAG and the
# bytes each rank sends in each shuffle: the orders shuffle dominates, the region shuffle after the
# combine carries at most five rows per rank.

# %%
K = 4
net = cluster.Network(alpha=ALPHA, beta=BETA)
res = cluster.run(lambda comm: revenue_by_region(comm).collect_partition()[1], K, network=net, timeout=120)
stage_list = revenue_by_region(None).stage_list()
fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [1.3, 1]})
ax = axes[0]
pos = {0: (0, 1), 1: (0, 0), 2: (1.5, 0.5), 3: (3, 0.5)}
for s in stage_list:
    x, y = pos[s.id]
    ops = [op.split("(")[0].split("[")[0] for op in s.ops]  # operator names only: the full text is explain()
    ax.text(x, y, f"Stage {s.id}\n" + "\n".join(ops) + f"\n| {s.output}", ha="center", va="center", fontsize=8,
            bbox={"boxstyle": "round", "fc": "lightyellow" if s.parents else "lightblue"})
    for p in s.parents:
        ax.annotate("", xy=(x - 0.5, y), xytext=(pos[p][0] + 0.5, pos[p][1]),
                    arrowprops={"arrowstyle": "->", "color": "crimson"})
ax.set(xlim=(-0.7, 3.7), ylim=(-0.5, 1.5), title="stages of revenue_by_region (red arrows: shuffles)")
ax.axis("off")
width = 0.25
for i, stage in enumerate(sorted({sh["stage"] for sh in res.values[0].shuffles})):
    sent = [next(sh["bytes_sent"] for sh in st.shuffles if sh["stage"] == stage) for st in res.values]
    axes[1].bar(np.arange(K) + i * width, sent, width, label=f"shuffle written by stage {stage}")
axes[1].set(xlabel="rank", ylabel="bytes sent", title=f"bytes each rank sends per shuffle, K = {K}", yscale="log",
            xticks=np.arange(K) + width)
axes[1].set_xticklabels([str(r) for r in range(K)])
axes[1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
plt.show()

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# The library has three parts. `dataframe_plan` holds the expressions (`col("x") > 3`) and the plan
# nodes; each node knows its columns and how its output is partitioned, which is how an aggregate after a
# join on the same key skips its shuffle. `dataframe_exec.build_stages` cuts the plan at every shuffle.
# `Evaluator.part` produces partition $p$ of any node, recursively; on the communicator
# (`Distributed.shuffle`) a shuffle computes this rank's map side, hashes each row to `stable_hash(key) mod
# K` and exchanges the blocks with one `all_to_all`. The aggregate runs twice, partial before the shuffle
# and final after it, and the join pairs the rows of each key inside one partition.

# %%
from scaleoutai.data import dataframe_exec as dx
from scaleoutai.notebooks import show

show(dx.build_stages, dx.Evaluator.part, dx.Distributed.shuffle, dx.partial_aggregate, dx.hash_join)

# %% [markdown]
# The check: `dfm.reference_query` runs the same plan on whole tables in one process, with the group-by
# and join written as Python loops over rows (nothing shared with the kernels above). Integer columns
# must match exactly; float sums up to rounding ($10^{-9}$ relative), since partial sums add in another
# order. Every $K$ in `KS`, and $K = 8$ on a five-row table, where most ranks hold no rows.

# %%
def per_customer(comm):
    return (DataFrame.from_table(comm, orders, "orders").group_by("customer")
            .agg(total=("amount", "sum"), n=("quantity", "count"), largest=("amount", "max")))


queries = {"revenue_by_region": revenue_by_region, "per_customer": per_customer}
references = {name: dfm.reference_query(q(None)) for name, q in queries.items()}
for name, q in queries.items():
    for K in KS:
        got = cluster.run(lambda comm: q(comm).collect(), K, timeout=120).values[0]
        dfm.assert_frame_close(got, references[name], rtol=1e-9)
    print(f"{name}: {q(None).stages()} stages, equal to the reference for K in {KS}")
five = {k: v[:5] for k, v in orders.items()}
tiny = lambda comm: DataFrame.from_table(comm, five, "orders").group_by("customer").agg(n=("quantity", "sum"))  # noqa: E731
dfm.assert_frame_close(cluster.run(lambda comm: tiny(comm).collect(), 8, timeout=60).values[0],
                       dfm.reference_query(tiny(None)))
print("K = 8 on 5 rows: equal to the reference")

# %% [markdown]
# ## 5. The same task with a production library: PySpark
#
# Spark runs the same plan shape: its physical plan has an `Exchange hashpartitioning` where ours has a
# shuffle, and a `HashAggregate` pair with `partial_` functions where ours has the partial and final
# aggregate. Three settings make the comparison fair. Adaptive query execution is off: it re-plans at run
# time, coalescing shuffle partitions and skipping stages, so the stage count would no longer be a
# property of the plan. Broadcast joins are off: with a small table Spark would copy it to every worker
# and shuffle neither side, a different algorithm (Exercise 3). And `ConvertToLocalRelation` is off: it
# would evaluate a narrow query on an in-memory table while planning, so no job would run at all. One
# session, `local[2]`, serves the notebook; it starts here, outside every timing, and stops at the end.

# %%
from scaleoutai.data.spark import COMPARABLE_PLANS, local_spark  # noqa: E402

t0 = time.perf_counter()
spark = local_spark("chapter-07", COMPARABLE_PLANS)  # without Java: one line saying how to get it

import pandas as pd  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

spark_startup = time.perf_counter() - t0
orders_s, customers_s = spark.createDataFrame(pd.DataFrame(orders)), spark.createDataFrame(pd.DataFrame(customers))


def spark_collect(sdf, group):
    """Run ``sdf`` and count its stages from Spark's own status tracker (the jobs of one job group)."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    t0 = time.perf_counter()
    pdf = sdf.toPandas()
    seconds = time.perf_counter() - t0
    sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    stages = {s for j in tracker.getJobIdsForGroup(group) for s in tracker.getJobInfo(j).stageIds}
    return dfm.sort_rows({c: pdf[c].to_numpy() for c in pdf.columns}), len(stages), seconds


spark_queries = {
    "revenue_by_region": (orders_s.filter(F.col("quantity") >= 2)
                          .withColumn("revenue", F.col("amount") * F.col("quantity"))
                          .join(customers_s, on="customer").groupBy("region")
                          .agg(F.sum("revenue").alias("revenue"), F.count("quantity").alias("orders"),
                               F.avg("amount").alias("mean_amount"))),
    "per_customer": orders_s.groupBy("customer").agg(F.sum("amount").alias("total"),
                                                     F.count("quantity").alias("n"), F.max("amount").alias("largest")),
}
for name, sdf in spark_queries.items():
    rows, spark_stages, seconds = spark_collect(sdf, f"ch07-{name}")
    dfm.assert_frame_close(rows, references[name], rtol=1e-9)
    assert spark_stages == queries[name](None).stages(), (name, spark_stages)
    print(f"{name}: Spark == ours == reference, {spark_stages} stages in both (Spark query {seconds:.2f} s, "
          f"start-up {spark_startup:.1f} s)")

# %% [markdown]
# The two plans side by side. Spark prints the physical plan from the result down to the scans; ours
# prints the stages from the scans up. Each `Exchange` is one of our `| shuffle by (...)` lines.

# %%
plan = spark_queries["revenue_by_region"]._jdf.queryExecution().executedPlan().toString()
print(plan)
print(revenue_by_region(None).explain())
assert plan.count("Exchange hashpartitioning") == revenue_by_region(None).stages() - 1
assert "partial_sum" in plan and "partial_agg" in revenue_by_region(None).explain()

# %% [markdown]
# Spark's older interface, the RDD, is MapReduce with lineage: `flatMap` and `map` are narrow,
# `reduceByKey` combines on each partition and shuffles. The word count equals Chapter 6's reference.

# %%
rdd_counts = dict(spark.sparkContext.parallelize(lines, 2).flatMap(str.split).map(lambda w: (w, 1))
                  .reduceByKey(lambda a, b: a + b).collect())
assert rdd_counts == mr.reference_mapreduce(lines, mr.word_count_mapper, mr.sum_reducer)
print(f"RDD word count == Chapter 6 reference: {len(rdd_counts)} words, {sum(rdd_counts.values())} occurrences")

# %% [markdown]
# ## 6. Failure modes and fault tolerance
#
# **A lost partition.** Rank 2 crashes after both shuffles, before handing its result partition to rank
# 0 (`cluster.Faults(crash=...)` stops it at that send). Rank 0 notices (the simulator's failure detector
# raises `PeerCrashedError`) and rebuilds partition 2 from lineage: the orders source can be read again,
# so it replays the tasks that lead to partition 2. Through each wide dependency that is every partition
# of the parent stage; a full rerun would be $K$ tasks per stage.

# %%
K, stages = 4, revenue_by_region(None).stages()
crash = cluster.Faults(crash={2: (K - 1) * (stages - 1)})  # the send after every shuffle: the hand-over
res = cluster.run(lambda comm: dfm.run_query(comm, revenue_by_region(comm)), K, faults=crash, timeout=120)
got, recovery = res.values[0]
assert isinstance(res.values[2], cluster.RankCrashed) and recovery.lost == [2]
dfm.assert_frame_close(got, references["revenue_by_region"], rtol=1e-9)
assert set(recovery.tasks) == dfm.lineage(revenue_by_region(None), [2], K=K)
print(f"lost partition 2 rebuilt: {len(recovery.tasks)} tasks rerun of {recovery.full_rerun} in a full rerun")

# %% [markdown]
# That is barely better than a rerun, because partition 2 of the last stage depends on every partition
# before it. Spark avoids most of it by keeping each map task's shuffle output on the mapper's disk: if
# those survive, only the lost rank's own tasks run again. With the surviving ranks' shuffle outputs kept:

# %%
res = cluster.run(lambda comm: revenue_by_region(comm).collect_partition(keep_shuffle=True), K, timeout=120)
kept = {key: out for r, (_, st) in enumerate(res.values) if r != 2 for key, out in st.map_outputs.items()}
rebuilt, tasks = dfm.recompute_partition(revenue_by_region(None), 2, kept, K=K)
dfm.assert_frame_close(rebuilt, res.values[2][0], rtol=0, atol=0)  # the same partition, bit for bit
assert set(tasks) == dfm.lineage(revenue_by_region(None), 2, kept, K=K) == {(s, 2) for s in range(stages)}
narrow_tasks = dfm.recompute_partition(DataFrame.from_table(None, orders, "orders")
                                       .filter(col("quantity") >= 2), 2, K=K)[1]
assert narrow_tasks == [(0, 2)]
print(f"with shuffle outputs kept: {len(tasks)} tasks, one per stage, all on partition 2; "
      f"a narrow-only query needs {len(narrow_tasks)}")

# %% [markdown]
# **A skewed key.** Customers follow a Zipf law, and the join shuffles orders by customer, so the rank
# that owns the busiest customers receives far more rows than the mean. The aggregate after the join
# does not suffer: the combine leaves one row per region per rank.

# %%
K = max(KS)
join_rows = cluster.run(lambda comm: len(DataFrame.from_table(comm, orders, "orders").join(
    DataFrame.from_table(comm, customers, "customers"), on="customer").collect_partition()[0]["customer"]), K, timeout=120)
rows = np.array(join_rows.values)
top = np.bincount(orders["customer"]).max()
print(f"K = {K}: joined rows per rank max {rows.max()}, mean {rows.mean():.0f} (max / mean "
      f"{rows.max() / rows.mean():.2f}); the busiest customer alone has {top} orders")
assert rows.sum() == N_ORDERS and rows.max() / rows.mean() > 1.0

# %% [markdown]
# ## 7. Evaluation: speedup, efficiency, cost
#
# On the simulator each operator is charged `ROW_SECONDS` per row it reads and each shuffle pays $\alpha$
# and $\beta$. The time of the query falls with $K$ while the scans and filters dominate; the shuffles'
# $K-1$ rounds and the skewed join partition then bend the curve.

# %%
times, shuffled = {}, {}
for K in KS:
    res = cluster.run(lambda comm: revenue_by_region(comm).collect_partition(row_seconds=ROW_SECONDS)[1], K,
                      network=net, timeout=120)
    times[K] = res.sim_time
    shuffled[K] = max(sum(s["bytes_sent"] for s in st.shuffles) for st in res.values)
table = perf.scaling_table(times)
price = capstone.lookup("aws-c7i.xlarge")
print(f"{'K':>3} {'T_K (ms)':>9} {'S_K':>6} {'E_K':>5} {'max bytes sent':>15} {'USD per 1000 queries':>21}")
for row in table:
    K = row["p"]
    cost = perf.run_cost(price.price_per_hour, K, 1000 * row["time"])
    print(f"{K:>3} {row['time'] * 1e3:>9.2f} {row['speedup']:>6.2f} {row['efficiency']:>5.2f} {shuffled[K]:>15} {cost:>21.4f}")
print(f"priced as {price.instance_type} at {price.price_per_hour} USD/h per rank ({price.date})")
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
perf.plot_scaling(times, ax=axes[0], title="revenue_by_region on the simulator")
axes[1].plot(KS, [shuffled[K] for K in KS], "o-")
axes[1].set(xlabel="workers K", ylabel="bytes", title="most bytes one rank sends in the shuffles")
plt.show()
assert table[-1]["speedup"] > 1.0

# %% [markdown]
# The share of rows that leave a rank is $(K-1)/K$, as in Chapter 6, so each rank's shuffle volume falls
# only as $1/K$ while the number of messages grows as $K-1$; with a fixed table, the shuffle eventually
# costs more than the scan it follows.
#
# ## 8. Exercises
#
# 1. **Partition pruning of shuffles.** Add a `repartition(*keys)` transformation and use it before two
#    group-bys on the same key. How many stages does the plan have, and how many bytes move?
# 2. **Predicate pushdown.** A filter on a column of the customers table written after the join can run
#    before it. Write the rule that moves it, and measure the bytes of the join shuffle before and after.
# 3. **Broadcast join.** When one side is small, send it whole to every rank and join without shuffling
#    the large side. Compare bytes and simulated time with the hash join; turn Spark's
#    `autoBroadcastJoinThreshold` back on and count its stages.
# 4. **Skew.** Split the hottest customer's rows over several ranks by salting the key (append a random
#    suffix on the large side, replicate the row on the small side). Measure the joined rows per rank.
# 5. **Checkpoints.** Lineage grows with the plan. Add `checkpoint()`, which materialises the partitions
#    and starts a new lineage; count the tasks a lost partition costs with and without it.
#
# ## 9. Research directions
#
# - **Recovery cost versus bookkeeping.** Lineage makes failure cheap to prepare for and, through wide
#   dependencies, expensive to recover from; replicating or checkpointing makes recovery cheap and every
#   run slower. Choosing what to keep, automatically, for an arbitrary DAG and failure rate is open.
#   - Zaharia et al., "Resilient Distributed Datasets: A Fault-Tolerant Abstraction for In-Memory Cluster
#     Computing", NSDI, 2012. Datasets defined by their lineage, narrow and wide dependencies, recovery
#     by recomputation.
#   - Isard, Budiu, Yu, Birrell and Fetterly, "Dryad: Distributed Data-Parallel Programs from Sequential
#     Building Blocks", EuroSys, 2007. Jobs as DAGs of vertices and channels, re-executed on failure.
# - **Planning with what is known only at run time.** Sizes and skew are unknown before the first stage
#   runs; re-planning between stages (coalescing partitions, switching join algorithms, splitting skewed
#   partitions) helps, but when to re-plan and how much to trust early statistics remain research.
#   - Armbrust et al., "Spark SQL: Relational Data Processing in Spark", SIGMOD, 2015. The DataFrame
#     API and the Catalyst optimizer behind the plans of Section 5.
#   - Deshpande, Ives and Raman, "Adaptive Query Processing", Foundations and Trends in Databases, 2007.
#     A survey of plans that change while they run.
#   - Zhu et al., "Lero: A Learning-to-Rank Query Optimizer", VLDB, 2023. Learns to rank candidate plans in
#     pairs instead of predicting their cost, on top of the native optimizer, and keeps improving as the
#     workload runs.
# - **Vectorised execution on lakes of files.** Engines now run each operator over column batches in
#   native code; how far that closes the gap to a hand-written kernel, and how to keep it when a Python
#   function sits in the plan, is still measured system by system.
#   - Behm et al., "Photon: A Fast Query Engine for Lakehouse Systems", SIGMOD, 2022. A vectorised C++
#     engine under the Spark API.
#   - Lamb et al., "Apache Arrow DataFusion: A Fast, Embeddable, Modular Analytic Query Engine", SIGMOD
#     (Companion), 2024. A vectorised engine over Arrow columns, built to be embedded and extended, and
#     competitive with DuckDB on one machine.
#   - Pedreira et al., "The Composable Data Management System Manifesto", VLDB, 2023. Argues for building
#     engines from shared components (execution library, memory format, plan representation) instead of
#     monoliths, and lists what remains to be standardised.
#
# ## What's next
#
# Chapter 8 (Distributed storage and data loading) asks where the partitions come from: sharded files,
# consistent hashing to place them, replication so a lost node loses no data, and a sampler that gives
# every worker its share of a training set exactly once per epoch.

# %%
spark.stop()
print("Spark session stopped")
