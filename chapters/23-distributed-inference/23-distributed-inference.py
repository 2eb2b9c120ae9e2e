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
# # Chapter 23. Distributed inference
#
# Chapter 22 made one copy of a model answer as fast as one machine allows. When requests arrive
# faster than that copy can answer, or the model no longer fits on one device, inference is
# distributed: **replicas** behind a router share the requests, and **tensor parallelism** splits
# one model over several devices. This chapter simulates replicas exactly, checks the simulation
# against queueing theory, measures how routing policies and hedged requests change the tail of the
# latency distribution, runs the decoder tensor-parallel over the communicator, and serves it with Ray
# Serve over real HTTP. Then it builds the **fleet** of a language-model service: replicas that cache
# prompt prefixes behind a router that knows which replica holds which prefix, prefill and decode on
# separate GPUs with the KV cache sent between them, and an autoscaler that follows the day's load.
#
# **Prerequisites:** Chapter 22 (Per-node inference efficiency: the decoder, its KV cache and batching),
# Chapter 16 (Model and sharded parallelism: column and row splits) and Chapter 5 (Evaluation
# discipline: percentiles and noise). Background: the exponential distribution and a queue.

# %% tags=["parameters"]
N_SIM = 100_000  # smoke: 20_000
C = 8
LOADS = [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95]  # smoke: [0.5, 0.7, 0.9]
TP_KS = [1, 2, 3, 4, 6, 8]  # smoke: [1, 2, 3, 8]
HTTP_REQUESTS = 300  # smoke: 120
HTTP_RATES = [20, 120]
FLEET_REQUESTS = 3000  # smoke: 300
FLEET_RATE = 80.0
DISAGG_REQUESTS = 1500  # smoke: 200
DAY_HOURS = 24  # smoke: 4
REAL_PROMPTS = 48  # smoke: 16
SEED = 0

# %% [markdown]
# `N_SIM` requests go through each simulation on `C` replicas at the loads $\rho$ in `LOADS`;
# `TP_KS` are the tensor-parallel world sizes; `HTTP_REQUESTS` real requests are sent to Ray Serve at
# each rate in `HTTP_RATES` (requests per second). The fleet of Sections 2-4 and 7 serves
# `FLEET_REQUESTS` chat requests at `FLEET_RATE` per second; `DISAGG_REQUESTS` long-prompt requests
# compare disaggregated with colocated serving; the autoscaler follows a day of `DAY_HOURS` hours; and
# `REAL_PROMPTS` prompts go through real replica processes.
#
# ## 1. Motivation: which ceiling binds
#
# A replica that answers in $1/\mu$ seconds on average serves at most $\mu$ requests per second. Below
# that rate requests still wait, because arrivals bunch: for one FIFO server with Poisson arrivals the
# mean time in the system is $1/(\mu - \lambda)$, ten times the service time at 90% load. The ceiling
# that binds is therefore not throughput but **tail latency at a given load**; more replicas, and how
# requests are spread over them, move it.

# %%
import logging
import time

import matplotlib.pyplot as plt
import numpy as np

from scaleoutai import capstone, cluster, datasets, perf
from scaleoutai.notebooks import show
from scaleoutai.serving import replicas as rp
from scaleoutai.serving import tensor_inference as ti
from scaleoutai.serving.decoder import decoder_forward, decoder_init

for rho in (0.5, 0.8, 0.9, 0.99):
    print(f"one replica at load {rho:.2f}: mean time in system = {1 / (1 - rho):6.1f} service times")

# %% [markdown]
# ## 2. Core concepts
#
# Requests arrive at rate $\lambda$; each of $c$ replicas serves at rate $\mu$; the **load** is
# $\rho = \lambda / (c\mu)$ and must stay below 1. **Little's law** ties the mean number of requests in
# the system to the mean latency, $L = \lambda W$. A service-level objective is stated on a
# **percentile**: "p99 below 200 ms" means 99 requests in 100 finish within 200 ms.
#
# A **router** assigns each request to a replica: at random, round robin, to the replica with the
# fewest outstanding requests, or by the **power of two choices** (ask two random replicas, pick the
# less loaded). A **central queue** feeding whichever replica frees first is the ideal the others
# approximate: it is the M/M/c queue, whose waiting probability is Erlang's C formula. A **hedged
# request** is a second copy sent to another replica when the first has not answered after a delay; the
# first answer wins, and the duplicate costs capacity.
#
# **Tensor parallelism** for inference is the forward half of Chapter 16: each of $K$ devices holds
# $1/K$ of every layer, and two all-reduces per layer sum the parts.

# %%
mu = 1.0  # service rate: one request per time unit, so latencies read in service times
arr = datasets.poisson_arrivals(N_SIM, 0.9 * C * mu, seed=SEED)
svc = datasets.service_times(N_SIM, 1.0 / mu, seed=SEED + 1)
cq = rp.simulate(arr, svc, C, "central_queue")
# Little's law: count the requests in the system at random instants, compare with lambda * W.
probe = np.random.default_rng(SEED).uniform(arr[N_SIM // 10], arr[-1] * 0.9, size=2000)
in_system = [np.count_nonzero((arr <= t) & (arr + cq.latency > t)) for t in probe]
L, lam_w = float(np.mean(in_system)), 0.9 * C * mu * cq.latency.mean()
print(f"load 0.9 on {C} replicas: L measured {L:.2f} requests in the system, lambda W = {lam_w:.2f}")
assert abs(L / lam_w - 1) < 0.1

# %% [markdown]
# **A replica of a language model** is not a FIFO server. It runs continuous batching (Chapter 24):
# each iteration **prefills** the prompts it admits (every prompt token at once, compute-bound) and
# **decodes** one token for every running sequence (memory-bound: every weight and every cached key
# and value is read). Two latencies matter to a user: the **time to first token** (TTFT: queueing plus
# prefill) and the **time per output token** (TPOT: one decode iteration, longer whenever a prefill
# shares it). The iteration's time is `StepCost`, the one cost model of Part V (Chapter 24, Section 7
# derives it): the roofline of Chapter 22 on one table of GPUs (`perf.hardware`), the weights and the
# cached K and V the iteration reads against its FLOPs, $2P$ per token plus attention's per (query, key)
# pair, for a named model (`efficiency.OPEN_MODELS`): Llama-3-8B on an H100 here, its matmuls at half
# the peak (`mfu=0.5`: real kernels reach a fraction of the roof, Chapter 3).
#
# **Prefix caching.** Requests share prefixes: a system prompt, the earlier turns of a chat. A replica
# keeps the K/V blocks of recent prompts keyed by a **chain hash**, $h_i = \mathrm{hash}(h_{i-1},
# \text{block}_i)$, so two prompts share block $i$ exactly when they share every token up to its end;
# a prompt whose first $m$ blocks are cached prefills only the rest. The cache lives on one replica, so
# the router decides whether a request finds it: **round robin** ignores it, **least loaded** sends the
# request where the fewest outstanding tokens wait, and a **cache-aware router** (SGLang's router,
# llm-d's prefix scorer) keeps a copy of every replica's block hashes and sends a request to the replica
# with its longest cached prefix, unless that replica is more loaded than the least loaded one by a
# threshold. Without any shared prefix, cache-aware routing *is* least-loaded routing.

# %%
from scaleoutai.serving import fleet_workload as fw
from scaleoutai.serving import router as rt
from scaleoutai.serving.step_cost import StepCost

step = StepCost.for_open_model("Llama-3-8B", "H100 SXM", mfu=0.5)
for what, args in (("prefill 2048 tokens", (2048, 0, 0)), ("prefill 64 uncached tokens", (64, 0, 0)),
                   ("decode 1 sequence at 2048", (0, 1, 2048)), ("decode 64 sequences at 2048", (0, 64, 64 * 2048))):
    print(f"{what:<28} {step.seconds(*args) * 1e3:6.2f} ms")
print(f"KV cache per token: {step.kv_bytes_per_token / 1024:.0f} KiB; weights {step.weight_bytes / 1e9:.1f} GB")

# %% [markdown]
# ## 3. The distribution and communication pattern
#
# Replicas share nothing: each request touches one replica (two if hedged), so the only communication
# is the router's. What the router knows decides the tail: random routing ignores load, the power of two
# choices samples it, least-outstanding reads it all. The plot gives the latency distribution of each
# policy on the same arrivals and service times.

# %%
results = {pol: rp.simulate(arr, svc, C, pol, seed=SEED) for pol in rp.POLICIES}
plt.figure(figsize=(8, 4))
for pol, res in results.items():
    lat = np.sort(res.latency)
    plt.plot(lat, 1 - np.arange(lat.size) / lat.size, label=f"{pol} (p99 {res.percentile(99):.1f})")
plt.yscale("log")
plt.gca().set(xlabel="latency (service times)", ylabel="share of requests slower",
              title=f"{C} replicas at load 0.9: the tail by routing policy", xlim=(0, 40))
plt.legend()
plt.show()
assert results["power_of_two"].percentile(99) < 0.5 * results["random"].percentile(99)

# %% [markdown]
# In a fleet of language-model replicas the router also holds **state about the caches**: a copy of
# each replica's block hashes, updated from what it sends (the prompt) and what comes back (the
# answer, which the next turn of the chat will repeat). Nothing else crosses between replicas. When
# prefill and decode run on **different GPUs** (disaggregation, Section 7), a second pattern appears: a
# point-to-point message per request from a prefill GPU to a decode GPU carrying the prompt's KV cache,
# $2 \cdot L \cdot n_{kv} \cdot d_h \cdot \text{bytes} \cdot T$ bytes for a prompt of $T$ tokens,
# costing $\alpha + n\beta$ on the link like every message of Chapter 4.

# %% [markdown]
# ## 4. A minimal from-scratch implementation in NumPy
#
# Each replica is one FIFO server, so a request's finish time is known the moment it is assigned:
# `start = max(arrival, replica free)`. The simulation is a loop over arrivals plus a heap of pending
# hedges, with no event queue for completions. Read `pick` for the policies.

# %%
show(rp.simulate)

# %% [markdown]
# Two references check it. With random routing each replica is an M/M/1 queue at rate $\lambda/c$, whose
# latency is exponential with rate $\mu - \lambda/c$; the central queue is M/M/c, whose mean latency is
# $C(c, a)/(c\mu - \lambda) + 1/\mu$.

# %%
lam = 0.8 * C * mu
arr8, svc8 = datasets.poisson_arrivals(N_SIM, lam, seed=7), datasets.service_times(N_SIM, 1.0 / mu, seed=8)
rand8 = rp.simulate(arr8, svc8, C, "random", seed=1)
cq8 = rp.simulate(arr8, svc8, C, "central_queue")
print(f"{'':>22} {'simulated':>10} {'theory':>8}")
for p in (50, 99):
    want = rp.mm1_sojourn_quantile(p / 100, lam / C, mu)
    print(f"random p{p:<2} latency     {rand8.percentile(p):>10.3f} {want:>8.3f}")
    assert abs(rand8.percentile(p) / want - 1) < 0.1
want_mean = rp.mmc_mean_sojourn(C, lam, mu)
print(f"central queue mean     {cq8.latency.mean():>10.3f} {want_mean:>8.3f}")
assert abs(cq8.latency.mean() / want_mean - 1) < 0.05

# %% [markdown]
# The tensor-parallel forward: each rank keeps its heads and hidden units (`shard_decoder`), and every
# sub-layer ends with one all-reduce. It must equal the dense decoder for every $K$, including more
# ranks than heads.

# %%
show(ti.tp_decoder_forward)
params = decoder_init(vocab=64, d_model=48, n_heads=6, n_layers=2, d_ff=96, max_len=32, seed=SEED)
tokens = np.random.default_rng(SEED).integers(0, 64, size=(2, 12))
dense = decoder_forward(params, tokens)
held = {}
for K in TP_KS:
    res = cluster.run(ti.run_tp_forward, K, args=(params, tokens), timeout=120)
    for logits, _ in res.values:
        assert np.allclose(logits, dense, rtol=1e-10, atol=1e-10)
    held[K] = max(b for _, b in res.values)
print("tensor-parallel logits == dense for K =", TP_KS)
print("largest block-weight bytes on one rank:", {K: f"{v / held[1]:.2f}x" for K, v in held.items()})

# %% [markdown]
# **The fleet.** The prefix cache is an LRU set of block hashes; inserting a prompt touches its blocks
# leaves first, so a shared system prompt is always newer than the chats hanging off it and is evicted
# last. The router's three policies are a few lines each.

# %%
show(rt.block_hashes, rt.PrefixCache, rt.Router)

# %% [markdown]
# A replica is a loop over iterations. At each boundary it admits waiting requests in order while its
# batch, its prefill token budget and its KV memory allow, then runs one iteration: the admitted
# prompts' uncached tokens and one decode token per running sequence. The fleet advances every replica
# to each arrival's time before the router looks, so the router sees exactly what it would see then.

# %%
show(rt.Replica.advance, rt.drive)

# %% [markdown]
# Three references check it. A replica that holds one request at a time is a FIFO server, so with
# batch 1 the fleet must give exactly the latencies of `replicas.simulate` with each request's service
# time (its prefill iteration, then one decode iteration per later token). The cache's match must equal
# a brute-force longest common prefix over every earlier prompt. And with no prefix shared by any two
# prompts, the cache-aware router must route exactly as least loaded does.

# %%
small = rt.prepare(fw.prefix_workload(120, 40.0, n_system=3, system_len=(64, 160), user_len=(8, 40),
                                      output_len=(4, 24), think=0.5, shared=False, seed=SEED), 16)
fifo = rt.simulate_fleet(small, 3, "round_robin", step, max_batch=1, cache_blocks=0)
svc_llm = np.array([step.seconds(len(r.prompt), 0, 0) + sum(step.seconds(0, 1, len(r.prompt) + k) for k in range(1, r.max_new))
                    for r in small])
ref = rp.simulate(np.array([r.arrival for r in small]), svc_llm, 3, "round_robin")
assert np.allclose(fifo.finish - fifo.arrival, ref.latency, rtol=1e-12, atol=1e-12)
same = {p: rt.simulate_fleet(small, 3, p, step, max_batch=8, cache_blocks=64) for p in ("least_loaded", "cache_aware")}
assert np.array_equal(same["least_loaded"].replica, same["cache_aware"].replica)
assert same["cache_aware"].hit_rate == 0.0
shared = rt.prepare(fw.prefix_workload(120, 40.0, n_system=3, system_len=(64, 160), user_len=(8, 40),
                                       output_len=(4, 24), think=0.5, seed=SEED), 16)
cache, sent = rt.PrefixCache(10**6), []
for r in shared:
    assert cache.match(r.hashes) == fw.reference_prefix_blocks(sent, r.prompt, 16)
    cache.insert(r.hashes)
    sent.append(r.prompt)
print("batch-1 fleet == replicas.simulate; cache == brute-force prefix; cache-aware == least loaded without prefixes")

# %% [markdown]
# ## 5. The same task with a production library: Ray Serve
#
# Ray Serve runs a deployment as replicas (Ray actors) behind an HTTP proxy that routes with the power
# of two choices. Below, two replicas each hold the decoder, and real HTTP requests on 127.0.0.1 ask
# for the next token of a prompt. Every answer must equal our decoder's, both replicas must serve, and
# the p50 and p99 are measured at two request rates with an open-loop Poisson client (a new request
# leaves on schedule whether or not earlier ones returned, as real users do).

# %%
import ray
from ray import serve

from scaleoutai.serving.loadgen import open_loop, post_json, start_decoder_service

show(start_decoder_service, open_loop)

serve_params = dict(vocab=64, d_model=96, n_heads=4, n_layers=2, d_ff=384, max_len=64, seed=SEED)
model = decoder_init(**serve_params)
prompts = np.random.default_rng(SEED).integers(0, 64, size=(HTTP_REQUESTS, 32))
expected = [int(np.argmax(decoder_forward(model, p[None])[0, -1])) for p in prompts]
t0 = time.perf_counter()
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
try:
    logging.getLogger("ray.serve").setLevel(logging.ERROR)
    url = start_decoder_service(serve_params, replicas=2)
    post_json(url, {"tokens": prompts[0].tolist()})  # warm both the proxy and a replica
    startup = time.perf_counter() - t0
    served = {}
    for rate in HTTP_RATES:
        lat, replies = open_loop(url, rate, [{"tokens": p.tolist()} for p in prompts], seed=rate)
        assert [r["next"] for r in replies] == expected  # every answer is our decoder's
        served[rate] = (lat, {r["pid"] for r in replies})
finally:
    serve.shutdown()
    ray.shutdown()
for rate, (lat, pids) in served.items():
    assert len(pids) == 2  # both replicas answered
    print(f"{rate:>4} req/s: p50 {np.percentile(lat, 50) * 1e3:6.1f} ms, p99 {np.percentile(lat, 99) * 1e3:6.1f} ms "
          f"from {len(pids)} replicas")
print(f"Ray and Serve start-up {startup:.1f} s (not in the latencies)")

# %% [markdown]
# The HTTP proxy adds a few milliseconds to every request, so the p50 at low rate is mostly overhead;
# at the higher rate queueing appears in the p99 first, as Section 1 predicts.
#
# ## 6. Failure modes and fault tolerance
#
# **A slow replica.** One replica of eight runs 4x slower (a noisy neighbour, a thermal throttle), at a
# load of 0.2, low enough that even the slow replica keeps up with its round-robin share (0.8).
# Round robin keeps sending it that share; least-outstanding routes around it; hedging after a delay
# rescues the requests stuck behind it, at the price of duplicate work.

# %%
arr5 = datasets.poisson_arrivals(N_SIM, 0.2 * C * mu, seed=11)
svc5 = datasets.service_times(N_SIM, 1.0 / mu, seed=12)
extra = datasets.service_times(N_SIM, 1.0 / mu, seed=13)
slow = {0: 4.0}
cases = {"round robin": rp.simulate(arr5, svc5, C, "round_robin", slow=slow),
         "least outstanding": rp.simulate(arr5, svc5, C, "least_outstanding", slow=slow),
         "round robin + hedge at 3": rp.simulate(arr5, svc5, C, "round_robin", slow=slow, hedge_after=3.0,
                                                 hedge_services=extra)}
base_work = cases["round robin"].busy.sum()
for name, res in cases.items():
    print(f"{name:<26} p50 {res.percentile(50):5.2f}  p99 {res.percentile(99):6.2f}  "
          f"duplicates {res.hedged:>6}  work {res.busy.sum() / base_work:.2f}x")
assert cases["round robin + hedge at 3"].percentile(99) < cases["round robin"].percentile(99)
assert cases["least outstanding"].percentile(99) < cases["round robin"].percentile(99)

# %% [markdown]
# **Overload.** As $\rho \to 1$ every policy's tail grows without bound; the only fix is more replicas
# or shedding load. **Heavy-tailed service.** With lognormal service times (a few very long prompts),
# the mean hides the problem and hedging helps where routing cannot (load 0.5):

# %%
arr_h = datasets.poisson_arrivals(N_SIM, 0.5 * C * mu, seed=11)  # load 0.5
svc_heavy = datasets.service_times(N_SIM, 1.0 / mu, dist="lognormal", sigma=1.5, seed=14)
extra_heavy = datasets.service_times(N_SIM, 1.0 / mu, dist="lognormal", sigma=1.5, seed=15)
p99_plain = rp.simulate(arr_h, svc_heavy, C, "least_outstanding").percentile(99)
hedged_heavy = rp.simulate(arr_h, svc_heavy, C, "least_outstanding", hedge_after=4.0, hedge_services=extra_heavy)
print(f"lognormal service, least outstanding: p99 {p99_plain:.2f} -> {hedged_heavy.percentile(99):.2f} with hedging "
      f"({hedged_heavy.hedged / N_SIM:.1%} of requests duplicated)")
assert hedged_heavy.percentile(99) < p99_plain

# %% [markdown]
# **A hot prefix.** Cache affinity is a load-balancing hazard: the most popular system prompt pulls
# its requests to the one replica that cached it first. Without the balance threshold the cache-aware
# router keeps sending them there however long its queue grows; with it (16,384 outstanding tokens
# here) it gives up the hit and sends the request to the least loaded replica.

# %%
chats = rt.prepare(fw.prefix_workload(FLEET_REQUESTS, FLEET_RATE, n_system=16, think=10.0, seed=SEED), 16)
sticky = {name: rt.simulate_fleet(chats, 4, "cache_aware", step, cache_blocks=2000, max_imbalance=mi)
          for name, mi in (("with threshold", 16384), ("no threshold", float("inf")))}
for name, res in sticky.items():
    per = np.bincount(res.replica, minlength=4)
    print(f"cache-aware, {name:<14}: requests per replica {per.tolist()}, hit rate {res.hit_rate:.1%}, "
          f"TPOT p99 {np.percentile(res.tpot(), 99) * 1e3:.2f} ms")
spread = {name: np.ptp(np.bincount(res.replica, minlength=4)) for name, res in sticky.items()}
assert spread["no threshold"] > spread["with threshold"]

# %% [markdown]
# ## 7. Evaluation: tail latency against load, and the cost of an SLO
#
# The p99 of each policy against load, with the M/M/1 prediction for random routing. Then the question
# a capacity planner asks: how many replicas keep p99 under 10 service times at a given traffic, and
# what do they cost?

# %%
curves = {pol: [] for pol in ("random", "power_of_two", "least_outstanding", "central_queue")}
for rho in LOADS:
    a = datasets.poisson_arrivals(N_SIM, rho * C * mu, seed=20)
    for pol in curves:
        curves[pol].append(rp.simulate(a, svc, C, pol, seed=21).percentile(99))
theory = [rp.mm1_sojourn_quantile(0.99, rho * mu, mu) for rho in LOADS]
plt.figure(figsize=(8, 4))
for pol, p99 in curves.items():
    plt.plot(LOADS, p99, "o-", label=pol)
plt.plot(LOADS, theory, "k--", label="M/M/1 theory (random)")
plt.yscale("log")
plt.gca().set(xlabel="load rho", ylabel="p99 latency (service times)", title=f"{C} replicas")
plt.legend()
plt.show()

price = capstone.lookup("aws-c7i.xlarge")
traffic, service_s, slo = 400.0, 0.02, 10.0  # requests/s, seconds per request, p99 target in service times
a = datasets.poisson_arrivals(N_SIM, traffic, seed=30)
s = datasets.service_times(N_SIM, service_s, seed=31)
need = {}
for pol in ("random", "power_of_two"):
    c = int(np.ceil(traffic * service_s)) + 1
    while rp.simulate(a, s, c, pol, seed=32).percentile(99) > slo * service_s:
        c += 1
    need[pol] = c
    usd = c * price.price_per_hour / (traffic * 3600) * 1e6
    print(f"{pol:<13} needs {c:>2} replicas for p99 <= {slo * service_s * 1e3:.0f} ms at {traffic:.0f} req/s: "
          f"{usd:.3f} USD per million requests on {price.instance_type} ({price.price_per_hour} USD/h, {price.date})")
assert need["power_of_two"] <= need["random"]

# %% [markdown]
# Smarter routing buys the same tail with fewer replicas: the cheapest latency optimisation in this
# chapter. Tensor parallelism pays two all-reduces of $B \cdot T \cdot d$ values per layer, so it is
# worth it only when the model does not fit or a single request's latency, not throughput, is the target.
#
# **The fleet of a language model, by routing policy.** The chat workload of Section 6 (16 system
# prompts, multi-turn sessions whose every turn repeats the conversation so far) on 4 replicas of
# Llama-3-8B on H100s, each caching 32,000 tokens of prefixes. Every request is served once and the
# three policies deliver the same tokens; what changes is how much prefill the fleet repeats.

# %%
fleet = {p: rt.simulate_fleet(chats, 4, p, step, cache_blocks=2000) for p in rt.POLICIES}
print(f"{len(chats)} requests at {FLEET_RATE:.0f}/s, mean prompt {np.mean([len(r.prompt) for r in chats]):.0f} tokens")
print(f"{'policy':>13} {'hit rate':>8} {'TTFT p50':>9} {'TTFT p99':>9} {'TPOT p50':>9} {'TPOT p99':>9} {'tokens/s':>9}")
for pol, res in fleet.items():
    s_ = res.summary()
    assert np.all(res.first > res.arrival) and np.all(res.finish >= res.first)  # each served, in order
    assert res.output_tokens.sum() == sum(r.max_new for r in chats)
    print(f"{pol:>13} {s_['hit_rate']:8.1%} {s_['ttft_p50'] * 1e3:6.1f} ms {s_['ttft_p99'] * 1e3:6.1f} ms "
          f"{s_['tpot_p50'] * 1e3:6.2f} ms {s_['tpot_p99'] * 1e3:6.2f} ms {s_['throughput']:9.0f}")
assert fleet["cache_aware"].hit_rate > fleet["round_robin"].hit_rate
assert np.percentile(fleet["cache_aware"].ttft(), 50) < np.percentile(fleet["round_robin"].ttft(), 50)
plt.figure(figsize=(8, 4))
for pol, res in fleet.items():
    t = np.sort(res.ttft()) * 1e3
    plt.plot(t, np.arange(1, t.size + 1) / t.size, label=f"{pol} (hit rate {res.hit_rate:.0%})")
plt.xscale("log")
plt.gca().set(xlabel="time to first token (ms)", ylabel="share of requests", title="4 replicas, chat workload")
plt.legend()
plt.show()

# %% [markdown]
# Round robin and least loaded find the system prompts on every replica (each replica soon holds all
# 16), but a chat's earlier turns only on the replica that served them; the cache-aware router sends
# each turn back there, so it repeats the least prefill. The prefill it saves is GPU time every other
# request gets back: its TTFT falls at the median and its TPOT at the tail.
#
# **Prefill/decode disaggregation.** The same four GPUs, either colocated (each prefills and decodes,
# so a 2048-token prefill stalls every sequence decoding beside it) or split into a prefill pool and a
# decode pool, with each prompt's KV cache sent over a link between them (DistServe, Splitwise). The
# link must carry what the prefill pool produces, (prompt tokens per second) x 128 KiB; below that the
# transfers queue without bound.

# %%
from scaleoutai.serving import disaggregation as dg

show(dg.simulate_disaggregated)
long_prompts = dg.uniform_workload(DISAGG_REQUESTS, 12.0, 2048, 100, seed=SEED)
need_bw = dg.min_link_bandwidth(long_prompts, step)
colo = dg.simulate_colocated(long_prompts, 4, step)
links = [0.5e9, 1e9, 2e9, 5e9, 10e9, 25e9, 100e9]
split = {}
for n_pre in (1, 2):
    for bw in links:
        res, transfer = dg.simulate_disaggregated(long_prompts, n_pre, 4 - n_pre, step, cluster.Network(alpha=1e-5, beta=1 / bw))
        split[n_pre, bw] = (np.percentile(res.ttft(), 99), np.percentile(res.tpot(), 99), np.percentile(transfer, 99))
fig, ax = plt.subplots(1, 2, figsize=(10, 4))
for k, name in ((0, "TTFT p99 (s)"), (1, "TPOT p99 (s)")):
    for n_pre in (1, 2):
        ax[k].plot(np.array(links) / 1e9, [split[n_pre, bw][k] for bw in links], "o-", label=f"{n_pre} prefill + {4 - n_pre} decode")
    ax[k].axhline(np.percentile(colo.ttft() if k == 0 else colo.tpot(), 99), color="k", ls="--", label="colocated, 4 GPUs")
    ax[k].axvline(need_bw / 1e9, color="grey", ls=":", label="KV output of the prefill pool")
    ax[k].set(xscale="log", yscale="log", xlabel="link bandwidth (GB/s)", ylabel=name)
ax[1].legend(fontsize=8)
fig.suptitle(f"2048-token prompts at 12/s on 4 GPUs: the KV cache is {2048 * step.kv_bytes_per_token / 2**20:.0f} MiB a request")
plt.show()
fast, slow = split[2, links[-1]], split[2, links[0]]
tpot_colo = np.percentile(colo.tpot(), 99)
print(f"colocated: TTFT p99 {np.percentile(colo.ttft(), 99) * 1e3:.0f} ms, TPOT p99 {tpot_colo * 1e3:.2f} ms; the prefill "
      f"pool emits {need_bw / 1e9:.2f} GB/s of KV cache")
print(f"2 + 2 at {links[-1] / 1e9:.0f} GB/s: TTFT p99 {fast[0] * 1e3:.0f} ms, TPOT p99 {fast[1] * 1e3:.2f} ms; "
      f"at {links[0] / 1e9:.1f} GB/s: TPOT p99 {slow[1] * 1e3:.0f} ms (transfers wait {slow[2]:.0f} s)")
assert fast[1] < tpot_colo < slow[1]

# %% [markdown]
# Where disaggregation wins: with a link well above the prefill pool's KV output, the decode GPUs never
# run a prefill, so the tail of TPOT falls below colocated serving's. Where the transfer kills it: below
# that output the link, not a GPU, is the bottleneck, and every later request waits behind the caches
# before it. And the split costs TTFT: 4 GPUs prefilling together queue less than 1 or 2 do, so
# disaggregation pays off when the TPOT target is the hard one, which is DistServe's argument for
# sizing the two pools separately against both targets.
#
# **Autoscaling to a p99 target over a day.** Traffic follows the day (a sinusoid, trough at midnight,
# with noise). An autoscaler sizes the fleet every five minutes from the last five minutes' arrival
# rate: the fewest replicas $c$ whose M/M/c p99 (Erlang C, closed form) meets the target at that rate
# plus 25% headroom, a new replica serving after a two-minute cold start. Against it: the same replicas
# provisioned for the peak all day.

# %%
from scaleoutai.serving import autoscale as au

show(au.autoscale)
day = DAY_HOURS * 3600.0
day_arr = au.diurnal_arrivals(day, 2.0, amplitude=0.7, period=day, seed=SEED)
day_svc = datasets.service_times(day_arr.size, 1.0, seed=SEED + 1)
slo_p99 = 8.0  # seconds, with a mean service of 1 s
auto = au.autoscale(day_arr, day_svc, 1.0, slo_p99, day, interval=300, window=300, headroom=0.25, cold_start=120)
peak = int(auto.schedule[:, 1].max())
fixed = au.static(day_arr, day_svc, peak, day)
gpu = capstone.lookup("aws-p5.48xlarge")
per_gpu_hour = gpu.price_per_hour / gpu.gpus
hours = np.arange(0, day, 300) / 3600
fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(hours, np.histogram(day_arr, np.arange(0, day + 1, 300))[0] / 300, color="grey", label="arrivals / s")
ax.step(auto.schedule[:, 0] / 3600, auto.schedule[:, 1], where="post", label="replicas asked for")
ax.axhline(peak, color="k", ls="--", label=f"static at the peak ({peak})")
ax.set(xlabel="hour", ylabel="requests / s, replicas", title=f"p99 target {slo_p99:.0f} s")
ax.legend()
plt.show()
for name, r in (("autoscaled", auto), ("static at peak", fixed)):
    print(f"{name:<15} p99 {r.p99():5.2f} s, {r.gpu_seconds / 3600:6.1f} GPU-hours, {r.cost(per_gpu_hour):8.2f} USD "
          f"({gpu.instance_type}, {per_gpu_hour:.2f} USD per GPU-hour, {gpu.date})")
assert auto.p99() <= slo_p99 and fixed.p99() <= slo_p99
assert auto.gpu_seconds < fixed.gpu_seconds

# %% [markdown]
# The autoscaler meets the same target with the GPU-hours the load needs, not the peak's: the saving is
# roughly the gap between the mean and the peak of the day. The headroom pays for what a reactive rule
# cannot see: the five minutes it averages over and the two minutes a new replica takes to load.
#
# **The model beside real processes.** Everything above is modelled time. Here the router drives two
# real replica processes (`cluster.run`, backend `"process"`), each running the NumPy decoder with a
# prefix cache of real K/V blocks: a replica prefills only the tokens after its longest cached prefix
# and answers the first token, which must equal the uncached forward's. The prompts share four system
# prompts; the router sends them four at a time, so least loaded balances within each wave.

# %%
show(fw.run_prefix_replicas)
real_model = decoder_init(vocab=256, d_model=64, n_heads=4, n_layers=2, d_ff=256, max_len=256, seed=SEED)
rng = np.random.default_rng(SEED)
heads = [rng.integers(0, 256, size=160) for _ in range(4)]
real_prompts = [np.concatenate([heads[rng.integers(4)], rng.integers(0, 256, size=rng.integers(8, 40))])
                for _ in range(REAL_PROMPTS)]
want_first = [int(np.argmax(decoder_forward(real_model, p[None])[0, -1])) for p in real_prompts]
real = cluster.run(fw.run_prefix_replicas, 3, backend="process", args=(real_model, real_prompts, list(rt.POLICIES)),
                   kwargs={"wave": 4, "max_imbalance": 400}, timeout=600, quiet=True).values[0]
new_tokens = {p: np.array([len(q) for q in real_prompts]) - r["cached"] for p, r in real.items()}
fit = perf.fit_alpha_beta(np.concatenate(list(new_tokens.values())), np.concatenate([r["compute"] for r in real.values()]))
print(f"prefill on this CPU: {fit.alpha * 1e3:.1f} ms + {fit.beta * 1e6:.0f} us per uncached token (R^2 {fit.r2:.2f})")
print(f"{'policy':>13} {'hit rate':>8} {'TTFT measured':>14} {'TTFT model':>11} {'measured/model':>15}")
for pol, r in real.items():
    assert r["first"].tolist() == want_first  # every answer is the uncached decoder's
    copies = [rt.PrefixCache(10**9) for _ in range(2)]  # what the router believes each replica holds
    for i, q in enumerate(real_prompts):
        h = rt.block_hashes(q, 16)
        assert r["cached"][i] == min(copies[r["replica"][i]].match(h) * 16, len(q) - 1)
        copies[r["replica"][i]].insert(h)
    pred = fit.predict(new_tokens[pol])
    model_ttft = np.zeros(len(pred))  # a wave's prompts queue on their replica in the order sent
    for lo in range(0, len(pred), 4):
        for j in (0, 1):
            idx = [i for i in range(lo, min(lo + 4, len(pred))) if r["replica"][i] == j]
            model_ttft[idx] = np.cumsum(pred[idx])
    hit = r["cached"].sum() / sum(len(q) for q in real_prompts)
    print(f"{pol:>13} {hit:8.1%} {r['ttft'].mean() * 1e3:11.1f} ms {model_ttft.mean() * 1e3:8.1f} ms "
          f"{r['ttft'].mean() / model_ttft.mean():15.2f}")
assert real["cache_aware"]["cached"].sum() >= real["round_robin"]["cached"].sum()

# %% [markdown]
# The hit rates are exact: every real replica reused exactly the prefix the router's copy of its cache
# predicted (asserted above). The times
# are a linear fit of prefill seconds against uncached tokens (the alpha-beta fit of Chapter 3, on this
# CPU's NumPy decoder) summed along each replica's queue; the ratio column says how far apart the
# measured and modelled TTFT are. The gap is what the model leaves out: the messages between processes,
# the copy of cached K/V into a fresh cache, and, on a shared machine, the other processes taking the
# cores (CI runs this on two).
#
# ## 8. Exercises
#
# 1. **Join the shortest queue with stale information.** Let the router see outstanding counts that are
#    $\Delta$ old. Plot p99 against $\Delta$ for least-outstanding and power of two choices. Which is more
#    robust, and why?
# 2. **Cancel the loser.** Extend `simulate` so that when one copy of a hedged request finishes the other
#    is removed from its queue if it has not started. How much duplicate work does it save?
# 3. **Choose the hedge delay.** Sweep `hedge_after` from the p50 to the p99 of the service time and
#    plot p99 against duplicated work. Where is the knee?
# 4. **Batching replicas.** Make a replica serve up to $b$ queued requests together in time
#    $s_0 + b s_1$ (Chapter 22's batching). How does the best $b$ depend on load?
# 5. **Tensor-parallel latency.** On the simulator with compute charged per FLOP, find the $K$ at which
#    the all-reduces cost more than the matmuls they split, for $d$ = 512 and 4096.
# 6. **Lab 23: split the prompt, not the weights.** Tensor parallelism divides the layers but leaves
#    every rank holding all $T$ positions of a long prompt. Give each of $K$ ranks a contiguous chunk
#    of the prompt instead and compute causal attention by passing key/value blocks around a ring,
#    folding each into a running softmax, so that no rank builds the $T \times T$ scores and a block
#    reaches only the ranks that may see it; the result must equal one machine's block stack for any
#    $K$, uneven and empty chunks, in float32 and float64 (`labs/lab23-ring-attention-prefill`).
# 7. **Replicate the hot prefix.** Section 6's hot system prompt overloads one replica or loses its
#    hits. Let the cache-aware router keep a prompt's prefix on the $k$ replicas that hold it and pick
#    the least loaded of them (Preble and llm-d do a version of this). Sweep $k$ from 1 to 4 on the chat
#    workload: plot hit rate and TTFT p99 against $k$. Which $k$ wins, and how does it depend on the
#    popularity of the hottest prompt?
# 8. **Size the two pools.** For 2048-token prompts, 100 output tokens, a 25 GB/s link and targets of
#    TTFT p99 $\le$ 300 ms and TPOT p99 $\le$ 6 ms, find the highest arrival rate each split of 4 GPUs
#    (colocated, 1+3, 2+2, 3+1) serves within both targets (its goodput). Which split wins, and at what
#    prompt length does the answer change?
#
# ## 9. Research directions
#
# - **Tail at scale.** A request that fans out to many servers waits for the slowest; hedging, tied
#   requests and micro-partitioning trade work for tail, and choosing them online is still open.
#   - Dean and Barroso, "The Tail at Scale", Communications of the ACM, 2013. Hedged and tied requests.
#   - Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing", IEEE TPDS, 2001.
# - **Serving many models on shared accelerators.** Packing models, batching across requests and
#   meeting per-model SLOs on a shared GPU pool is an active systems problem.
#   - Crankshaw et al., "Clipper: A Low-Latency Online Prediction Serving System", NSDI, 2017.
#   - Gujarati et al., "Serving DNNs like Clockwork: Performance Predictability from the Bottom Up",
#     OSDI, 2020. Predictable latency by controlling every source of variance.
#   - Li et al., "AlpaServe: Statistical Multiplexing with Model Parallelism for Deep Learning Serving",
#     OSDI, 2023. Model parallelism used to absorb bursts, not only to fit models.
#   - Sheng et al., "S-LoRA: Serving Thousands of Concurrent LoRA Adapters", arXiv preprint, 2023. One base
#     model on the GPU, thousands of fine-tuned adapters paged in from host memory and batched together.
# - **Disaggregating inference.** Splitting prefill and decode, or attention and MLP, onto different
#   machines changes what a replica is; the right split depends on the load (Chapter 24).
#   - Patel et al., "Splitwise: Efficient Generative LLM Inference Using Phase Splitting", ISCA, 2024.
#   - Zhong et al., "DistServe: Disaggregating Prefill and Decoding for Goodput-optimized Large Language
#     Model Serving", OSDI, 2024. Sizes and places prefill and decode replicas separately to maximise the
#     request rate that meets both the first-token and the per-token latency targets.
# - **Routing by what a replica remembers.** A replica's KV cache makes requests unequal: the right
#   replica for a prompt is the one holding its prefix, until that replica is overloaded. How to trade
#   hits against balance online, with an approximate view of every cache, is open.
#   - Zheng et al., "SGLang: Efficient Execution of Structured Language Model Programs", NeurIPS, 2024.
#     RadixAttention: an LRU radix tree of KV blocks that reuses shared prefixes automatically.
#   - Srivatsa et al., "Preble: Efficient Distributed Prompt Scheduling for LLM Serving", ICLR, 2025.
#     Schedules prompts over GPUs by their shared prefixes and the load, replicating hot prefixes.
#   - Sun et al., "Llumnix: Dynamic Scheduling for Large Language Model Serving", OSDI, 2024. Migrates
#     running requests, with their KV caches, between replicas to rebalance load and isolate priorities.
# - **Spending idle compute to cut decode latency.** Token-by-token decoding is memory-bound, so a replica
#   has arithmetic to spare; guessing several tokens cheaply and checking them in one pass turns it into
#   lower latency, but how that interacts with batching and with a shared fleet is still open.
#   - Leviathan, Kalman and Matias, "Fast Inference from Transformers via Speculative Decoding", ICML,
#     2023. A small draft model proposes tokens, the large model verifies them in parallel, and the
#     acceptance rule leaves the output distribution unchanged.
#
# ## What's next
#
# Chapter 24 (LLM serving) opens the replica: instead of one request at a time, a language-model
# server batches many generations at the level of single decoding steps and pages their KV caches, so
# the queueing of this chapter moves inside the batch.
