# %% [markdown]
# # Chapter 2 solutions: Distributed-systems concepts
#
# Worked solutions to the exercises of `chapters/02-distributed-systems-concepts` (the instructor's
# manual, never in the student edition). Each exercise: the answer, the derivation or argument, and for
# the coding and analysis exercises code that computes it and asserts it.

# %%
import itertools
from collections import Counter

import numpy as np

from scaleoutai import cluster
from scaleoutai.foundations.clocks import causal_order, concurrent, happened_before, run_clocks
from scaleoutai.foundations.consensus import bully_election, majority, replicate_log

# %% [markdown]
# ## Exercise 1 (coding): the smallest script that fools Lamport clocks
#
# **Answer.** Three events suffice and are necessary: rank 0 does one local event $a$, rank 1 does two
# local events, the second one $b$. Then $L(a) = 1$, $L(b) = 2$, yet $a \parallel b$ (no message links
# them). Their vector clocks are $V(a) = (1, 0)$ and $V(b) = (0, 2)$: $L(a) < L(b)$ holds while
# $V(a) \not\le V(b)$ (the first entry $1 > 0$), so the vector clocks correctly report "concurrent".
#
# **Why not two events.** Two concurrent events must sit on different ranks (events of one rank are
# ordered by program order). With only two events in the script, each is the first event on its rank,
# so its Lamport clock is 1 unless it is a receive. A receive needs its matching send, which would be
# the other event, and then the two are causally related, not concurrent. So with two events either they
# are related or both have timestamp 1. The code confirms this by brute force: it enumerates every
# valid script of 2 and of 3 events on 2 or 3 ranks, runs each on the simulator, and searches for a
# concurrent pair stamped 1 and 2.

# %%
def all_scripts(n_events, k_ranks):
    """Every script with n_events events over k_ranks ranks (local, send, recv), valid or not."""
    kinds = [("local",)] + [(op, p) for op in ("send", "recv") for p in range(k_ranks)]
    for placement in itertools.product(range(k_ranks), repeat=n_events):
        for evs in itertools.product(kinds, repeat=n_events):
            script = [[] for _ in range(k_ranks)]
            ok = True
            for r, ev in zip(placement, evs):
                if len(ev) == 2 and ev[1] == r:
                    ok = False
                    break
                script[r].append(ev)
            if ok:
                yield script


def lamport_fooled(script):
    """Pairs (a, b) with a || b, L(a) = 1, L(b) = 2, from a simulator run; None if the script is invalid."""
    try:
        events, _ = run_clocks(script)
    except (ValueError, cluster.ClusterError):
        return None  # unmatched sends or a deadlocked order
    ev = {(x.rank, x.index): x for per_rank in events for x in per_rank}
    return [(a, b) for a, b in itertools.permutations(ev, 2)
            if ev[a].lamport == 1 and ev[b].lamport == 2 and concurrent(ev[a].vector, ev[b].vector)]


found = {}
for n_ev in (2, 3):
    seen = set()
    for k_ in (2, 3):
        for script in all_scripts(n_ev, k_):
            key = repr(script)
            if key in seen:
                continue
            seen.add(key)
            hits = lamport_fooled(script)
            if hits:
                found.setdefault(n_ev, (script, hits))
assert 2 not in found  # no two-event script can do it
assert 3 in found
script3, hits3 = found[3]
print("smallest script found:", script3, "pairs:", hits3)

minimal = [[("local",)], [("local",), ("local",)]]
events, _ = run_clocks(minimal)
a_ev, b_ev = events[0][0], events[1][1]
assert (a_ev.lamport, b_ev.lamport) == (1, 2)
assert a_ev.vector == (1, 0) and b_ev.vector == (0, 2)
assert not happened_before(np.array(a_ev.vector), np.array(b_ev.vector))  # V(a) is not <= V(b)
assert (1, 1) not in causal_order(minimal)[(0, 0)]  # the clock-free reference agrees: concurrent

# %% [markdown]
# ## Exercise 2 (analysis): splitting a majority vote with one Byzantine rank
#
# **The split with $K = 3$.** Honest ranks $A$ and $B$ start with $0$ and $1$; rank $C$ lies. Everybody
# sends its value to everybody and decides by majority of the three values it holds. $C$ tells $A$ "0"
# and $B$ "1". $A$ holds $\{0, 1, 0\}$ and decides 0; $B$ holds $\{1, 0, 1\}$ and decides 1. Two honest
# ranks disagree, and each has followed the protocol.
#
# **Why $K = 3$ cannot be repaired by any vote.** The same holds for the relayed protocol (Lamport, Shostak
# and Pease's OM(1): a commander sends its value, every lieutenant relays what it got to the others, each
# decides by majority of what it holds): with $K = 3$ a lieutenant holds two values, and when they differ
# it cannot tell a lying commander from a lying fellow lieutenant. Whatever deterministic tie rule it uses
# (default 0, default 1, trust the commander, trust the relay), some liar breaks either **agreement** (honest
# lieutenants decide differently) or **validity** (an honest commander's value is not adopted). The code
# checks all four rules against every liar strategy.
#
# **Why $K = 4 = 3f + 1$ repairs it.** In OM(1) with $K = 4$ each lieutenant decides on $K - 1 = 3$ values.
# If the commander is honest, at most one of a lieutenant's three values comes from the liar, so at least two
# equal the commander's value $v$: validity, and hence agreement. If the commander is the liar, all three
# lieutenants are honest and relay exactly what they received, so every lieutenant holds **the same multiset**
# of three values and takes the same majority: agreement. In general the $f$ liars must be outvoted in every
# lieutenant's view, $K - 1 - f > f$ for honest commanders, recursively, which gives $K \ge 3f + 1$. The code
# runs OM(1) on the simulated cluster for every liar position and every liar strategy (binary values).

# %%
def om1(comm, value, liar, lies):
    """Oral-messages OM(1) with commander 0; `lies[(phase, dst)]` is what the liar sends instead of the truth."""
    K, r = comm.size, comm.rank

    def tell(x, dst, phase):
        v = lies.get((phase, dst), x) if r == liar else x
        comm.send(np.array([v], dtype=np.int64), dst)

    if r == 0:
        for dst in range(1, K):
            tell(value, dst, "order")
        return value
    got = int(comm.recv(0)[0])
    for dst in range(1, K):
        if dst != r:
            tell(got, dst, "relay")
    held = [got] + [int(comm.recv(src)[0]) for src in range(1, K) if src != r]
    return held


def decide(held, rule):
    counts = Counter(held)
    top = max(counts.values())
    winners = sorted(v for v, c in counts.items() if c == top)
    if len(winners) == 1:
        return winners[0]
    return {"default0": 0, "default1": 1, "commander": held[0], "relay": held[1]}[rule]


def liar_strategies(K, liar):
    slots = [("order", d) for d in range(1, K)] if liar == 0 else [("relay", d) for d in range(1, K) if d != liar]
    for bits in itertools.product((0, 1), repeat=len(slots)):
        yield dict(zip(slots, bits))


def violations(K, rule):
    """(agreement broken, validity broken) over every liar position, commander value and liar strategy."""
    agree_broken = valid_broken = False
    for liar in range(K):
        for v in (0, 1):
            for lies in liar_strategies(K, liar):
                res = cluster.run(om1, K, args=(v, liar, lies)).values
                decisions = [decide(res[r], rule) for r in range(1, K) if r != liar]
                agree_broken |= len(set(decisions)) > 1
                valid_broken |= liar != 0 and any(d != v for d in decisions)
    return agree_broken, valid_broken


def plain_vote(comm, values, liar, lie_to):
    """Everyone broadcasts its value and decides by majority of the K values it holds."""
    K, r = comm.size, comm.rank
    for dst in range(K):
        if dst != r:
            mine = lie_to[dst] if r == liar else values[r]
            comm.send(np.array([mine], dtype=np.int64), dst)
    held = [values[r] if src == r else int(comm.recv(src)[0]) for src in range(K)]
    return Counter(held).most_common(1)[0][0]


split = cluster.run(plain_vote, 3, args=([0, 1, -1], 2, {0: 0, 1: 1})).values
assert split[0] == 0 and split[1] == 1  # the two honest ranks disagree
for rule in ("default0", "default1", "commander", "relay"):
    assert any(violations(3, rule)), rule  # K = 3: every tie rule is broken by some liar
    assert violations(4, rule) == (False, False), rule  # K = 4: agreement and validity always hold
print("K=3: plain vote split", split[:2], "and OM(1) broken under every tie rule; K=4: OM(1) always safe")

# %% [markdown]
# ## Exercise 3 (analysis): the message count of the bully election
#
# **Answer.** Without faults rank $r$ sends $K-1-r$ ELECTION messages (one to every higher rank), $r$ OK
# messages (one to every lower rank that sent it ELECTION) and $r$ COORDINATOR messages (to every lower
# rank): $K - 1 + r$ messages. Summing over $r = 0..K-1$,
#
# $$M(K) = \sum_{r=0}^{K-1} (K-1+r) = K(K-1) + \frac{K(K-1)}{2} = \frac{3K(K-1)}{2} = O(K^2).$$
#
# The **highest** rank sends the most, $2(K-1)$ (no ELECTION, but an OK and a COORDINATOR to everyone
# below), and rank 0 the fewest, $K-1$. Every message is one int64 (8 bytes), so the bytes are $8M(K)$.
# The code compares the formula with `res.stats` for several $K$.

# %%
for k_ in (1, 2, 3, 5, 8, 13):
    res = cluster.run(bully_election, k_)
    sent = [s.messages_sent for s in res.stats]
    assert sent == [k_ - 1 + r for r in range(k_)], (k_, sent)
    assert sum(sent) == 3 * k_ * (k_ - 1) // 2
    assert sum(s.bytes_sent for s in res.stats) == 8 * sum(sent)
    assert k_ == 1 or int(np.argmax(sent)) == k_ - 1
print("bully messages per rank = K - 1 + r, total 3K(K-1)/2, checked for K = 1, 2, 3, 5, 8, 13")

# %% [markdown]
# ## Exercise 4 (coding): leader crash, re-election, and what the new leader must hold
#
# **Setup.** $K = 5$; the first leader is rank 4 (the rank the bully election would pick). It replicates
# with `replicate_log(comm, commands, leader=4)` and crashes in the middle of the fan-out of entry 2: after
# sending it to ranks 0 and 1 only (`Faults(crash={4: 2*(K-1) + 2})`, the crash hits its 11th send). The
# survivors run `bully_election` and rank 3 wins. Rank 3 then collects every survivor's log and commit
# index, adopts the longest log, re-replicates it and continues with the remaining commands.
#
# **Which entries are safe to keep.** Entries 0 and 1 were acknowledged by a majority and the old leader
# committed them: they may already have been applied and reported to clients, so they must survive. Entry
# 2 was never acknowledged, so no one was ever told it was committed; keeping it or dropping it are both
# safe, and here it is kept because it is a prefix-consistent extension (all logs in this fixed-term
# model are prefixes of the old leader's log). What is not safe is a new leader that *lacks* a committed
# entry: its log would overwrite the followers' copy, and a command that clients saw committed would
# vanish or be replaced, so two replicas would apply different commands at the same index.
#
# **Why the new leader must hold every committed entry, and why bully alone does not ensure it.** A
# committed entry is on a majority; any majority that elects the next leader overlaps it in at least one
# rank. Raft uses that overlap: a voter refuses a candidate whose log is less up to date than its own, so
# the winner holds every committed entry. The bully election picks the *highest rank*, not the most
# up-to-date log. In the run below rank 3 does not hold entry 2 although entry 2 sits on ranks 0, 1 and 4,
# a majority of 5. Had the old leader lived to count those acks, entry 2 would have been committed and a
# log-blind leader could lose it; that is why the code makes the new leader first gather the survivors'
# logs (a catch-up round) before it accepts new commands.

# %%
def _arr(xs):
    return np.array(list(xs), dtype=np.int64)


def failover(comm, commands):
    """replicate_log with leader K-1, which crashes; bully re-election; the new leader repairs and continues."""
    K, r = comm.size, comm.rank
    old = K - 1
    first = replicate_log(comm, commands, leader=old)  # the old leader crashes part-way and never returns
    new = bully_election(comm)
    survivors = [q for q in range(K) if q != old]
    log, commit = list(first["log"]), first["commit_index"]
    if r == new:
        reports = {q: (comm.recv(q), int(comm.recv(q)[0])) for q in survivors if q != r}
        reports[r] = (_arr(log), commit)
        longest = max(reports.values(), key=lambda rep: len(rep[0]))[0].tolist()
        known_commit = max(c for _, c in reports.values())
        own_before = list(log)
        log = longest
        log += [int(cmd) for cmd in commands[len(log):]]  # what the old leader never sent
        for q in survivors:
            if q != r:
                comm.send(_arr(log), q)
        acks = 1 + sum(int(comm.recv(q)[0]) == len(log) for q in survivors if q != r)
        commit = len(log) - 1 if acks >= majority(K) else known_commit
        for q in survivors:
            if q != r:
                comm.send(_arr([commit]), q)
        return {"leader": new, "log": log, "commit": commit, "before": first, "own_before": own_before,
                "known_commit": known_commit}
    comm.send(_arr(log), new)
    comm.send(_arr([commit]), new)
    log = comm.recv(new).tolist()  # the leader's log replaces ours
    comm.send(_arr([len(log)]), new)
    commit = int(comm.recv(new)[0])
    return {"leader": new, "log": log, "commit": commit, "before": first}


K4 = 5
CMDS = list(range(100, 110))
crash_at = 2 * (K4 - 1) + 2  # leader's 11th send: AppendEntries of entry 2 to rank 2
res = cluster.run(failover, K4, args=(CMDS,), faults=cluster.Faults(crash={K4 - 1: crash_at}))
alive = {q: v for q, v in enumerate(res.values) if not isinstance(v, cluster.RankCrashed)}
assert sorted(alive) == [0, 1, 2, 3] and {v["leader"] for v in alive.values()} == {3}
before = {q: v["before"]["log"] for q, v in alive.items()}
assert before[0] == before[1] == CMDS[:3] and before[2] == before[3] == CMDS[:2]
holders_of_2 = [q for q in range(K4) if q == K4 - 1 or len(before.get(q, [])) > 2]
assert len(holders_of_2) >= majority(K4) and 2 >= len(alive[3]["own_before"])  # on a majority, not on rank 3
committed_before = max(v["before"]["commit_index"] for v in alive.values())
assert committed_before == 1 and alive[3]["known_commit"] == 1  # entries 0 and 1 were committed
for v in alive.values():
    assert v["log"] == CMDS and v["commit"] == len(CMDS) - 1  # one log everywhere, all committed
    assert v["log"][:committed_before + 1] == CMDS[:committed_before + 1]  # the committed prefix survived
print(f"old leader crashed in entry 2; new leader 3 (own log {alive[3]['own_before']}) repaired and "
      f"committed all {len(CMDS)} commands on survivors {sorted(alive)}")

# %% [markdown]
# ## Exercise 5 (coding): a 10x-slow follower and committing on the first majority
#
# **Answer.** No: a majority of $K = 5$ is 3 copies, the leader's own plus two acks, so the leader never
# needs the slow follower's ack. `replicate_log` nevertheless waits for every live follower before it
# moves on, so each entry's commit latency includes the slow follower's $10c$ of work ($c$ the time a
# follower spends before acking). Committing on the first majority removes it: the latency drops from
# about $10c$ plus message times to about $c$ plus message times.
#
# **Derivation.** Per entry the leader's single port sends $K-1$ AppendEntries, $(K-1)(\alpha + m\beta)$.
# A fast follower receives its copy within that time, works $c$, and its ack takes $\alpha + m\beta$ on the
# wire and at the leader's port. Waiting for all: the last ack is the slow follower's, so the latency is
# at least $10c$. Waiting for a majority: the leader needs the first $\lfloor K/2\rfloor = 2$ acks, so the
# latency is at most $(K-1)(\alpha+m\beta) + c + 2(\alpha + m\beta)$ once the slow follower's backlog is
# known. The simulator has no receive-from-any-source, so the quorum leader reads acks from the followers
# whose last ack came back fastest first (a proxy for "whoever answers first"), commits as soon as it
# holds a majority, and collects the slow follower's queued acks at the end. On the first entry it has no
# measured delays yet and may still wait for the slow rank; the assert is on the entries after it.
# A real implementation uses an event loop or `MPI_ANY_SOURCE`.

# %%
def replicate_timed(comm, commands, ack_seconds, first_majority):
    """Leader 0 replicates; followers compute ack_seconds before each ack. Leader returns commit latencies."""
    K, r = comm.size, comm.rank
    if r != 0:
        log = []
        for _ in commands:
            log.append(int(comm.recv(0)[0]))
            comm.compute(ack_seconds)
            comm.send(_arr([len(log) - 1]), 0)
        return log
    need = majority(K)
    pending = {f: 0 for f in range(1, K)}  # acks still owed by each follower
    delay = {f: 0.0 for f in range(1, K)}  # how long its last ack took to come back
    latencies, sent_at = [], []
    for i, cmd in enumerate(commands):
        start = comm.clock
        sent_at.append(start)
        for f in range(1, K):
            comm.send(_arr([cmd]), f)
            pending[f] += 1
        held = 1
        order = sorted(pending, key=lambda f: (delay[f], f))
        for f in order:
            if first_majority and held >= need:
                break
            while pending[f] and held < K:
                idx = int(comm.recv(f)[0])
                pending[f] -= 1
                delay[f] = comm.clock - sent_at[idx]
                if idx == i:
                    held += 1
                    break
        latencies.append(comm.clock - start)
    for f in range(1, K):  # drain what the slow follower still owes
        for _ in range(pending[f]):
            comm.recv(f)
    return latencies


c_ack = 1e-3
net5 = cluster.Network(alpha=5e-5, beta=1e-9)
msg = net5.message_time(8)
lat = {}
for mode in (False, True):
    run5 = cluster.run(replicate_timed, 5, args=(list(range(12)), c_ack, mode), network=net5,
                       faults=cluster.Faults(slow={1: 10.0}))
    assert all(v == list(range(12)) for v in run5.values[1:])  # every follower still gets every entry
    lat[mode] = np.array(run5.values[0])
assert np.all(lat[False] >= 10 * c_ack)  # waiting for everyone pays the slow rank's 10c
assert np.all(lat[True][1:] <= (5 - 1) * msg + c_ack + 2 * msg + 1e-12)  # the majority bound derived above
gain = lat[False][1:].mean() / lat[True][1:].mean()
print(f"mean commit latency: wait for all {lat[False].mean() * 1e3:.2f} ms, first majority "
      f"{lat[True][1:].mean() * 1e3:.2f} ms (entries 1..): {gain:.1f}x faster")
assert gain > 5

# %% [markdown]
# ## Exercise 6 (lab): Lab 2, causal broadcast with vector timestamps
#
# The lab is `labs/lab02-vector-clocks`. Its reference solution is the solution blocks of
# `labs/lab02-vector-clocks/lab02-vector-clocks.py`; the hidden tests, rubric and mutants are in
# `grading/lab02-vector-clocks/`. The chapter stamps events with vector clocks and compares the stamps after
# the run; the lab acts on them during the run: causal broadcast (Birman, Schiper and Stephenson), which the
# course does not implement.
#
# **Key ideas.** Each rank keeps `delivered`, an int64 vector of $K$ counts of broadcasts delivered per
# sender. A broadcast increments the rank's own entry, delivers the message locally at once and sends the
# counts (the timestamp $W$) to every other rank. An arriving message from $j$ goes into a hold-back queue
# and is delivered when $W[j] = \text{delivered}[j] + 1$ and $W[k] \le \text{delivered}[k]$ for $k \ne j$;
# each delivery increments `delivered[j]`, so the queue is scanned again until nothing is deliverable.
# Unlike the chapter's clock, receives and held messages do not tick anything: the timestamp counts
# deliveries, not events. The grader replays the protocol on the same scripts and compares the set delivered
# after every step (any causal order inside one burst), checks causality of the order, and reads the
# timestamps from its recorded messages.
#
# **Mistakes the rubric catches** (`grading/lab02-vector-clocks/mutants/`):
#
# 1. *No hold-back*: delivering on arrival (`deliver_on_arrival.py`, and the chapter's clock pasted,
#    `pasted_course.py`, which keeps about 35 of 100) or checking only FIFO order per sender
#    (`fifo_only.py`) delivers a message before a cause that travels on another link.
# 2. *The queue*: one delivery per arrival (`one_delivery_per_arrival.py`) leaves released messages held;
#    delivering everything at the end (`deliver_at_end.py`) is causal but late, which the order relative to
#    the rank's own broadcasts shows.
# 3. *The rule and the counters*: `<` for `<=` (`strict_less.py`), a gap in the sender's seq accepted
#    (`gap_allowed.py`), merging the stamp on arrival as the chapter merges clocks (`merge_on_arrival.py`),
#    no local delivery (`no_self_delivery.py`), int8 counters that wrap (`int8_counters.py`).
# 4. *The wire*: int32 timestamps or an extra entry (`stamp_int32.py`, `stamp_with_sender.py`), and the
#    course library imported through a path a grep misses (`library_answer.py`).
