"""Part I, Foundations of Distributed AI (Chapters 1-5): the modules a chapter of Part I teaches.

    sharding    Ch1  the exact gradient decomposition over K shards
    clocks      Ch2  Lamport and vector clocks, causal order
    consensus   Ch2  leader election, majority quorums, a replicated log

Chapter 3's and 5's models and harness live in the shared ``perf`` layer, Chapter 4's collectives in
the shared ``collectives`` module: every later part uses them.
"""
