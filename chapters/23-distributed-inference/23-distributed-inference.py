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
# Serve over real HTTP.
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
SEED = 0

# %% [markdown]
# `N_SIM` requests go through each simulation on `C` replicas at the loads $\rho$ in `LOADS`;
# `TP_KS` are the tensor-parallel world sizes; `HTTP_REQUESTS` real requests are sent to Ray Serve at
# each rate in `HTTP_RATES` (requests per second).
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

from scaleoutai import capstone, cluster, datasets
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
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
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
