# %% [markdown]
# # Chapter 24 solutions: LLM serving
#
# Worked solutions to the exercises of `chapters/24-llm-serving` (the instructor's manual, never in
# the student edition). Each exercise: the answer, the derivation or argument, and for the coding and
# analysis exercises code that computes it and asserts it.

# %%
import math

import numpy as np

from scaleoutai import datasets
from scaleoutai.serving import llm
from scaleoutai.serving.decoder import decode_step, decoder_forward, decoder_init, generate
from scaleoutai.serving.paged_cache import BlockAllocator, OutOfBlocks, PagedCache

SEED, BS = 0, 4
params = decoder_init(seed=SEED, vocab=64, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=128)


def ceil_div(a, b):
    return -(-a // b)


def prefill_first(todo, token_budget=None, prefill_chunk=None):
    """Exercise 1: the opposite of llm.plan_iteration under the same budget: prompt chunks first (oldest
    request first), then decode tokens with what is left."""
    left = token_budget if token_budget is not None else math.inf
    cap = prefill_chunk if prefill_chunk is not None else math.inf
    plan = {}
    for rid, n in todo:
        if n > 1 and left >= 1:
            plan[rid] = int(min(n, left, cap))
            left -= plan[rid]
    for rid, n in todo:
        if n == 1 and left >= 1:
            plan[rid], left = 1, left - 1
    return plan


def serve_budget(params, requests, num_blocks, block_size, max_batch=8, budget=None, chunk=None, watermark=0,
                 order=llm.plan_iteration):
    """Continuous batching with recompute preemption, with two knobs the library's serve lacks: the
    order in which an iteration's token budget is spent (``order``, a plan_iteration-like function) and
    a block watermark kept free at admission. With the defaults it schedules exactly as llm.serve."""
    cache = PagedCache(params, num_blocks, block_size)
    alloc = cache.alloc
    queue = sorted(requests, key=lambda r: (r.arrival, r.id))
    ctx = {r.id: [int(x) for x in r.prompt] for r in requests}
    goal = {r.id: r.max_new for r in requests}
    res = llm.ServeResult({r.id: [] for r in requests}, {}, {}, {r.id: r.arrival for r in requests})
    fed, waiting, running, t = {}, [], [], 0
    while queue or waiting or running:
        while queue and queue[0].arrival <= t:
            waiting.append(queue.pop(0).id)
        while waiting and len(running) < max_batch:
            rid = waiting[0]
            if ceil_div(len(ctx[rid]), block_size) + watermark > alloc.num_free:
                break
            alloc.allocate(rid, 0)
            fed[rid] = 0
            running.append(waiting.pop(0))
        if not running:
            t = queue[0].arrival if queue else t
            continue
        step = []
        while running and not step:
            plan = order([(rid, len(ctx[rid]) - fed[rid]) for rid in running], budget, chunk)
            for rid in list(running):
                if rid not in running or rid not in plan:
                    continue
                while rid in running:
                    try:
                        cache.reserve(rid, plan[rid])
                        step += [(rid, p) for p in range(fed[rid], fed[rid] + plan[rid])]
                        fed[rid] += plan[rid]
                        break
                    except OutOfBlocks:
                        victim = running.pop()
                        res.preemptions += 1
                        cache.free(victim)
                        fed[victim] = 0
                        waiting.insert(0, victim)
        if not step:
            continue
        pos = np.array([p for _, p in step])
        logits = decode_step(params, np.array([ctx[q][p] for q, p in step]), pos, cache,
                             seqs=np.array([q for q, _ in step]))
        res.timeline.append(sorted(set(q for q, _ in step)))
        res.tokens.append(len(step))
        res.at.append(t)
        res.context.append(int(sum(fed[q] for q in set(q for q, _ in step))))  # cached tokens read
        res.pairs.append(int((pos + 1).sum()))                                # attention pairs
        finished, made = [], 0
        for i, (q, p) in enumerate(step):
            if p == len(ctx[q]) - 1 and fed[q] == len(ctx[q]):
                tok = int(np.argmax(logits[i]))
                res.outputs[q].append(tok)
                res.first_token.setdefault(q, t)
                ctx[q].append(tok)
                made += 1
                if len(res.outputs[q]) == goal[q]:
                    finished.append(q)
        res.generated.append(made)
        for q in finished:
            res.finish[q] = t
            cache.free(q)
            running.remove(q)
        t += 1
    alloc.check()
    return res


# my scheduler equals the library's on a trace with preemptions, whole-prompt and under a budget
tr0 = datasets.request_trace(30, 0.3, (2, 12), (2, 30), vocab=64, seed=SEED)
REF0 = llm.reference_outputs(params, tr0)
for T in (None, 8):
    lib0 = llm.serve(params, tr0, 24, BS, token_budget=T)
    mine0 = serve_budget(params, tr0, 24, BS, budget=T)
    assert mine0.outputs == lib0.outputs == REF0
    assert mine0.tokens == lib0.tokens and mine0.timeline == lib0.timeline and mine0.context == lib0.context
    assert mine0.preemptions == lib0.preemptions > 0

# %% [markdown]
# ## Exercise 1 (coding): prefill first or decode first under one token budget
#
# **Answer.** `prefill_first` above spends the budget $T$ on prompt chunks first and gives the decode
# tokens what is left; `llm.plan_iteration` does the opposite. Prefill-first favours **TTFT**: a new
# prompt is done in $\lceil p/T\rceil$ iterations whatever the batch, so TTFT p50 falls. It hurts
# **TPOT**: while prompts fill the budget, decoding requests get no token at all in that iteration
# (the stall Sarathi-Serve removes), so the gaps between a request's tokens grow and TPOT p99 rises.
# Decode-first bounds every decoding request's gap to one iteration of at most $T$ tokens, and pays
# in TTFT: a prompt gets only $T$ minus the batch's decode tokens per iteration. When $T$ exceeds the
# tokens any iteration wants (every pending prompt plus every decode token), both orders plan
# everything and the schedules are identical: the order matters only when the budget binds.
#
# **Check.** The chat-like trace of Section 7 (prompts of 32 to 768 tokens) at a small size, on the
# 7B/A10G clock (`llm.StepCost`); both orders return the reference tokens, prefill-first has the lower
# TTFT p50 and the higher TPOT p99 at a binding budget (T = 32), and without a budget the two
# schedules are the same iteration for iteration. (Two requests are checked against `generate` alone;
# the rest equal across orders, and Section 4 of the chapter checks the engine against the reference.)

# %%
COST = llm.StepCost.for_model(7e9, layers=32, d_model=4096, kv_dim=4096, gpu="A10G")
params_long = decoder_init(seed=SEED, vocab=64, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=1024)
tr1 = datasets.request_trace(8, 0.15, (32, 512), (16, 160), vocab=64, seed=SEED + 3)
REF1 = {r.id: generate(params_long, [r.prompt], r.max_new)[0] for r in tr1[:2]}
sweep1 = {}
for T in (32, None):
    runs = {name: serve_budget(params_long, tr1, 1192, 16, max_batch=32, budget=T, order=fn)
            for name, fn in (("decode first", llm.plan_iteration), ("prefill first", prefill_first))}
    assert runs["decode first"].outputs == runs["prefill first"].outputs
    assert all(runs["prefill first"].outputs[i] == v for i, v in REF1.items())
    for name, r in runs.items():
        sweep1[T, name] = (float(np.median(r.ttft_seconds(COST))), float(np.percentile(r.tpot_seconds(COST), 99)))
        print(f"T={T!s:>4} {name:>13}: TTFT p50 {sweep1[T, name][0]:.3f} s, TPOT p99 {sweep1[T, name][1] * 1e3:5.1f} ms")
    if T is None:
        assert runs["decode first"].timeline == runs["prefill first"].timeline
assert sweep1[32, "prefill first"][0] < sweep1[32, "decode first"][0]
assert sweep1[32, "prefill first"][1] > sweep1[32, "decode first"][1]

# %% [markdown]
# ## Exercise 2 (coding): keep freed prefix blocks on an LRU list
#
# **Answer.** Let a freed block that holds a published prefix keep its key: it stays on the free list
# (so it counts as free and can be taken at any time), but behind the blocks that hold nothing, and
# among the cached ones the least recently freed is taken first. `share_prefix` may then find a key
# whose block has refcount 0; it takes the block off the free list and shares it. Taking a cached
# block for new data forgets its key. On a trace whose prompts all start with the same 16-token
# system prompt at a low arrival rate (here one request every 80 iterations, so none overlap), the
# library's allocator shares nothing (the prefix is freed with each request), while the LRU allocator serves every
# request after the first from the cache: $4\lfloor\min(16, p-1)/4\rfloor$ prompt tokens each (the last
# prompt token is never shared, so its logits are computed). The code checks that count exactly, that
# every token still equals the reference, and that the allocator's invariants hold.

# %%
class LRUPrefixAllocator(BlockAllocator):
    """A BlockAllocator whose freed prefix blocks stay findable until their space is needed."""

    def _take(self):
        b = self.free_list.pop()                 # empty blocks sit at the end, cached ones at the front
        key = self.hash_of.pop(b, None)
        if key is not None:
            del self.cached[key]
        self.refcount[b] = 1
        return b

    def _release(self, b):
        self.refcount[b] -= 1
        if self.refcount[b] == 0:
            if b in self.hash_of:
                self.free_list.insert(0, b)      # newest cached block is taken last
            else:
                self.free_list.append(b)

    def share_prefix(self, seq, tokens):
        toks = tuple(int(x) for x in tokens)
        for j in range((len(toks) - 1) // self.block_size):
            b = self.cached.get(toks[:(j + 1) * self.block_size])
            if b is None:
                break
            if self.refcount[b] == 0:            # revive it from the free list
                self.free_list.remove(b)
        return super().share_prefix(seq, tokens)


tr2 = [datasets.Request(r.id, 80 * k, r.prompt, r.max_new)  # one request at a time: no overlap
       for k, r in enumerate(datasets.request_trace(20, 0.05, (18, 26), (2, 8), vocab=64, shared_prefix=16,
                                                    seed=SEED + 2))]
REF2 = llm.reference_outputs(params, tr2)
plain = llm.serve(params, tr2, 64, BS, prefix_sharing=True)
lru_cache = PagedCache(params, 64, BS, allocator=LRUPrefixAllocator(64, BS))
lru = llm.serve(params, tr2, 64, BS, prefix_sharing=True, cache=lru_cache)
lru_cache.alloc.check()
assert plain.outputs == REF2 and lru.outputs == REF2
first = min(tr2, key=lambda r: (r.arrival, r.id))
expect = sum(BS * (min(16, len(r.prompt) - 1) // BS) for r in tr2 if r is not first)
print(f"prefill tokens saved: live sharing only {plain.shared_tokens}, with the LRU of freed prefixes "
      f"{lru.shared_tokens} (expected {expect}); prefill tokens fed {sum(plain.tokens)} -> {sum(lru.tokens)}")
assert lru.shared_tokens == expect > plain.shared_tokens == 0
assert sum(plain.tokens) - sum(lru.tokens) == lru.shared_tokens - plain.shared_tokens

# %% [markdown]
# ## Exercise 3 (analysis): a watermark of free blocks at admission
#
# **Answer.** Admitting a request only when its prompt blocks *plus* $w$ spare blocks are free leaves
# room for the running requests to grow, so fewer of them are preempted (each preemption by recompute
# throws away a request's whole KV and feeds it again). As $w$ grows the preemptions fall, and the
# wasted recompute work with them; but a large $w$ keeps requests waiting that would have fit, so the
# batch shrinks. Which effect wins depends on what recompute costs. With whole-prompt prefill on a
# memory-bound GPU the recomputed tokens ride in iterations that are paid for by the weight read
# (0.2 ms per token against 20 ms per iteration in the chapter's linear clock), while a smaller batch
# costs whole iterations: throughput (output tokens per modelled second) holds for a small $w$ and
# then falls, so the best watermark here is a small one (0 to 4 blocks), and a large one trades
# throughput for predictability (fewer preemptions, less wasted work, steadier latency). The code
# sweeps $w$ on a tight pool, checks that every run still returns the reference tokens, that the
# preemptions and the recompute work (tokens fed minus prompt and output tokens) fall, and that the
# largest watermark loses throughput against the best small one.

# %%
tr3 = datasets.request_trace(40, 0.5, (2, 12), (10, 40), vocab=64, seed=SEED + 3)
REF3 = llm.reference_outputs(params, tr3)
needed = sum(len(r.prompt) + r.max_new - 1 for r in tr3)  # tokens fed with no preemption at all
rows3 = []
for w in (0, 2, 4, 8, 12, 16):
    r = serve_budget(params, tr3, 28, BS, watermark=w)
    assert r.outputs == REF3
    thr = sum(r.generated) / r.clock_seconds()[-1]
    rows3.append((w, r.preemptions, sum(r.tokens) - needed, thr))
    print(f"watermark {w:>2}: {r.preemptions:>3} preemptions, {sum(r.tokens) - needed:>4} tokens recomputed, "
          f"{thr:6.1f} output tokens/s (modelled)")
assert rows3[-1][1] < rows3[0][1] and rows3[-1][2] < rows3[0][2]
assert all(rec >= 0 for _, _, rec, _ in rows3)
best = max(rows3, key=lambda row: row[3])
assert best[0] <= 4 and rows3[-1][3] < 0.9 * best[3]  # a small watermark is best; a large one shrinks the batch
assert all((p == 0) == (rec == 0) for _, p, rec, _ in rows3)  # recompute work comes only from preemptions

# %% [markdown]
# ## Exercise 4 (coding): beam search on forked block tables
#
# **Answer.** Beam search of width $W = 4$: every step each beam's next-token log-probabilities are
# added to its score, the $W$ best (beam, token) pairs survive, and each survivor is a `fork` of its
# parent's table, so all beams share the prompt's blocks and their common history; a beam writes into
# its own last block only after a copy-on-write. With a 10-token prompt, blocks of 4 and 12 generated
# tokens, sharing holds the prompt's blocks once instead of four times and the common prefixes of the
# beams once; without sharing every beam holds $\lceil (p + n)/B\rceil$ blocks. The code runs beam
# search through `PagedCache` and forks, checks its beams and scores against a cache-free beam search
# on `decoder_forward`, checks the allocator's invariants after every step, and counts the blocks.

# %%
def log_softmax(z):
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


def top_candidates(beams, logps, width):
    """The `width` best (score, beam index, token) extensions, ties to the earlier beam and token."""
    cands = [(s + lp[v], i, v) for i, ((_, s), lp) in enumerate(zip(beams, logps)) for v in range(len(lp))]
    cands.sort(key=lambda c: (-c[0], c[1], c[2]))
    return cands[:width]


def beam_paged(prompt, steps, width, num_blocks=64):
    """Beam search whose beams are forked sequences of one paged cache."""
    cache = PagedCache(params, num_blocks, BS)
    for pos, tok in enumerate(prompt):
        logits = decode_step(params, np.array([tok]), np.array([pos]), cache, seqs=np.array([0]))
    beams, logps, sids, nxt = [(list(prompt), 0.0)], [log_softmax(logits[0])], [0], 1
    used = []
    for _ in range(steps):
        chosen = top_candidates(beams, logps, width)
        new_sids = []
        for _, i, v in chosen:
            cache.alloc.fork(sids[i], nxt)
            new_sids.append(nxt)
            nxt += 1
        for s in sids:
            cache.free(s)
        out = decode_step(params, np.array([v for _, _, v in chosen]),
                          np.array([len(beams[i][0]) for _, i, _ in chosen]), cache, seqs=np.array(new_sids))
        beams = [(beams[i][0] + [v], sc) for sc, i, v in chosen]
        logps, sids = [log_softmax(o) for o in out], new_sids
        cache.alloc.check()
        used.append(cache.alloc.num_blocks - cache.alloc.num_free)
    return beams, used


def beam_reference(prompt, steps, width):
    """The same search with every sequence's logits recomputed from scratch."""
    beams = [(list(prompt), 0.0)]
    for _ in range(steps):
        logps = [log_softmax(decoder_forward(params, np.array([b]))[0, -1]) for b, _ in beams]
        beams = [(beams[i][0] + [v], sc) for sc, i, v in top_candidates(beams, logps, width)]
    return beams


prompt4 = np.random.default_rng(4).integers(0, 64, size=10)
beams4, used4 = beam_paged(prompt4, 12, 4)
ref4 = beam_reference(prompt4, 12, 4)
assert [b for b, _ in beams4] == [b for b, _ in ref4]
np.testing.assert_allclose([s for _, s in beams4], [s for _, s in ref4], rtol=1e-9)
# blocks holding the sequences' K/V: every token but the newest is cached
unshared = sum(ceil_div(len(b) - 1, BS) for b, _ in beams4)
distinct_prefix_blocks = len({tuple(b[:(j + 1) * BS]) for b, _ in beams4 for j in range((len(b) - 1) // BS)})
partial = sum((len(b) - 1) % BS != 0 for b, _ in beams4)
print(f"beam of 4 after 12 steps: {used4[-1]} blocks with forks, {unshared} without sharing "
      f"(blocks per step {used4})")
assert used4[-1] <= unshared
assert used4[-1] == distinct_prefix_blocks + partial  # full blocks shared by prefix, tails private

# %% [markdown]
# ## Exercise 5 (analysis): swap or recompute a preempted request
#
# **Answer.** For a preempted request holding $L$ tokens of KV:
#
# * **swap** moves its blocks out and back over PCIe:
#   $c_{swap}(L) = 2\big(\alpha_{pcie} + \lceil L/B\rceil B\, k_{tok}/BW\big)$, with $k_{tok}$ the KV bytes
#   per token ($2\cdot 32\cdot 4096\cdot 2 = 512$ KiB for the 7B model of Section 1);
# * **recompute** feeds the $L$ tokens again: $c_{rec}(L) = L\,t_{token}$ in the chapter's iteration
#   model (the fixed weight read is shared with the iteration the tokens ride in).
#
# With $BW = 25$ GB/s (PCIe 4 x16) the swap costs $2k_{tok}/BW \approx 42\,\mu$s per token against
# $t_{token} = 200\,\mu$s to recompute one, so **swap is cheaper for all but the shortest prompts**:
# recompute wins only while the fixed transfer latency dominates, below
# $L^* \approx 2\alpha_{pcie}/(t_{token} - 2k_{tok}/BW)$, about 6 tokens for $\alpha_{pcie} = 0.5$ ms (9 once
# swaps move whole blocks of 16 tokens). If
# instead decode is memory-bound and the batch is below the ridge, recomputed tokens ride almost free
# in iterations that are paid for anyway ($t_{token} \to 0$ at the margin), and then recompute wins at
# every length: the reason vLLM recomputes by default and swaps only under pressure. The code finds
# $L^*$ by a scan and compares it with the closed form, and on a real preemption trace it checks the
# inputs of the cost model: recompute feeds exactly the tokens the preempted requests had cached
# (counted through a cache subclass), swap feeds none extra.

# %%
KV_TOK, BW, A_PCIE, T_TOK = 2 * 32 * 4096 * 2, 25e9, 0.5e-3, 2e-4
BLK = 16


def swap_cost(L):
    return 2 * (A_PCIE + ceil_div(L, BLK) * BLK * KV_TOK / BW)


def recompute_cost(L):
    return L * T_TOK


scan = next(L for L in range(1, 10_000) if swap_cost(L) < recompute_cost(L))
closed = 2 * A_PCIE / (T_TOK - 2 * KV_TOK / BW)
print(f"swap beats recompute from L = {scan} tokens (closed form without block rounding: {closed:.1f}); "
      f"per token: swap {2 * KV_TOK / BW * 1e6:.0f} us, recompute {T_TOK * 1e6:.0f} us")
assert abs(scan - closed) <= BLK and all(swap_cost(L) < recompute_cost(L) for L in range(scan, 4096, 7))


class CountingCache(PagedCache):
    """Counts the cached tokens thrown away by preemptions (a free before the request's last token)
    and the tokens of KV swapped out."""

    def __init__(self, final_len, *a, **k):
        super().__init__(*a, **k)
        self.final_len, self.lost, self.swapped = final_len, 0, 0

    def free(self, seq):
        if self.alloc.lengths[seq] < self.final_len[seq]:  # a finished request holds all it will
            self.lost += self.alloc.lengths[seq]
        super().free(seq)

    def swap_out(self, seq):
        self.swapped += self.alloc.lengths[seq]
        super().swap_out(seq)


final_len = {r.id: len(r.prompt) + r.max_new - 1 for r in tr0}
base_tokens = sum(final_len.values())  # tokens fed when nothing is ever preempted
counts = {}
for how in ("recompute", "swap"):
    cc = CountingCache(final_len, params, 24, BS)
    r = llm.serve(params, tr0, 24, BS, preempt=how, cache=cc)
    assert r.outputs == REF0
    counts[how] = (sum(r.tokens) - base_tokens, cc.lost, cc.swapped, r.preemptions)
print(f"recompute: {counts['recompute'][0]} tokens fed again after {counts['recompute'][3]} preemptions; "
      f"swap: {counts['swap'][0]} extra tokens, {counts['swap'][2]} tokens of KV swapped out and back")
assert counts["recompute"][0] == counts["recompute"][1] > 0  # recompute re-feeds exactly what was lost
assert counts["swap"][0] == 0 and counts["swap"][2] > 0      # swap never recomputes

# %% [markdown]
# ## Exercise 6 (lab): Lab 24, a paged KV cache that keeps freed prefixes
#
# The lab is `labs/lab24-paged-kv-cache`. Its reference solution is the solution blocks of
# `labs/lab24-paged-kv-cache/lab24-paged-kv-cache.py`, and its hidden tests and mutants are in
# `grading/lab24-paged-kv-cache/` (`tests.py`, `rubric.yaml`, `mutants/`). The lab takes Exercise 2
# further: the student writes the whole allocator (`PrefixCache`), not a subclass of the library's.
#
# **Key ideas of the answer.** Three states per block: used (count above 0), cached (count 0 but
# registered under a prefix, kept in an LRU order) and free (count 0, unregistered). A full block j of
# a sequence is registered under the *whole* prefix `tuple(tokens[:(j + 1) B])` the moment it fills
# (in `admit` for the prompt's full blocks, in `append` for the token that fills it), unless that key
# is already registered. `admit` walks the prompt's full blocks that end before its last token and
# reuses registered ones until the first miss; a reused cached block leaves the LRU order. It is all or
# nothing: the fresh blocks must fit in the free plus cached blocks *minus the cached blocks it reuses*.
# A fresh block comes from the free list, else from the least recently used cached block (its key is
# forgotten). `free` releases the blocks last to first, so a sequence's tail is evicted before its head.
# Fork and copy-on-write are the chapter's. The grader drives the cache with hand-built and random
# traces over its own storage (each slot holds an id of its whole prefix), checks every reuse count,
# eviction and count against its model of these rules, and runs the decoder twice: the second batch
# must reuse the first batch's system prompt.
#
# **Mistakes the mutants catch** (the rubric's categories in brackets):
# - the chapter's allocator pasted (`pasted_course`, keeps 40) or its `share_prefix` that forgets
#   freed blocks (`pasted_share_prefix`, keeps 45): no freed prefix is ever reused [prefix_hits,
#   lru_eviction, decoder];
# - keying a block by its own B tokens instead of the whole prefix (`block_tokens_key`), reusing the
#   prompt's last block (`reuses_last_token`) [prefix_hits];
# - evicting the most recent block (`evicts_most_recent`), evicting while free blocks remain
#   (`evicts_before_free`), releasing head first (`frees_head_first`), never registering blocks filled
#   by `append` (`append_never_registers`) [lru_eviction];
# - counting reused cached blocks as spare (`reused_counted_as_spare`), pinning them before raising
#   (`oob_pins_first`), `>=` for `>` (`oob_one_block_early`) [out_of_blocks];
# - a reused block left in the eviction order (`hit_stays_evictable`), a leak on free (`leaks_on_free`)
#   [no_leak]; skipping copy-on-write (`no_copy_on_write`), a fork aliasing the parent's token list
#   (`fork_aliases_tokens`), uint8 counts (`refcounts_uint8`);
# - importing the course library's allocator instead of writing one (`library_answer`).
