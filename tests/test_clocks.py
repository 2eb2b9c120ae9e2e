"""Chapter 2: Lamport and vector clocks against a hand-computed and a graph-computed happened-before."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from scaleoutai.foundations.clocks import (LamportClock, VectorClock, causal_order, check_script, concurrent, happened_before,
                               run_clocks)

# Three ranks. a1 -> b2 -> c2 -> a3 by messages; a2, b1, c1 are independent local events.
#   rank 0 (a): a1 send->1, a2 local, a3 recv<-2
#   rank 1 (b): b1 local,   b2 recv<-0, b3 send->2
#   rank 2 (c): c1 local,   c2 recv<-1, c3 send->0
SCRIPT = [
    [("send", 1), ("local",), ("recv", 2)],
    [("local",), ("recv", 0), ("send", 2)],
    [("local",), ("recv", 1), ("send", 0)],
]
HAND_VECTORS = {  # worked by hand: tick on every event, merge-then-tick on receive
    (0, 0): (1, 0, 0), (0, 1): (2, 0, 0), (0, 2): (3, 3, 3),
    (1, 0): (0, 1, 0), (1, 1): (1, 2, 0), (1, 2): (1, 3, 0),
    (2, 0): (0, 0, 1), (2, 1): (1, 3, 2), (2, 2): (1, 3, 3),
}
HAND_LAMPORT = {(0, 0): 1, (0, 1): 2, (0, 2): 6, (1, 0): 1, (1, 1): 2, (1, 2): 3, (2, 0): 1, (2, 1): 4, (2, 2): 5}
HAND_BEFORE = {  # (event, event) pairs in happened-before, listed by hand from the diagram
    ((0, 0), (0, 1)), ((0, 0), (0, 2)), ((0, 1), (0, 2)),
    ((1, 0), (1, 1)), ((1, 0), (1, 2)), ((1, 1), (1, 2)),
    ((2, 0), (2, 1)), ((2, 0), (2, 2)), ((2, 1), (2, 2)),
    ((0, 0), (1, 1)), ((0, 0), (1, 2)), ((0, 0), (2, 1)), ((0, 0), (2, 2)),
    ((1, 0), (2, 1)), ((1, 0), (2, 2)), ((1, 0), (0, 2)), ((1, 1), (2, 1)), ((1, 1), (2, 2)), ((1, 1), (0, 2)),
    ((1, 2), (2, 1)), ((1, 2), (2, 2)), ((1, 2), (0, 2)), ((2, 0), (0, 2)), ((2, 1), (0, 2)), ((2, 2), (0, 2)),
}


def by_id(events):
    return {(e.rank, e.index): e for evs in events for e in evs}


def random_script(K: int, messages: int, seed: int):
    """A random deadlock-free script: messages are posted in one global order, receivers drain in order."""
    rng = np.random.default_rng(seed)
    script = [[] for _ in range(K)]
    for _ in range(messages):
        if rng.random() < 0.3:
            script[int(rng.integers(K))].append(("local",))
        src, dst = (int(v) for v in rng.choice(K, size=2, replace=False))
        script[src].append(("send", dst))
        script[dst].append(("recv", src))
    return script


def test_clocks_of_the_worked_example_equal_the_hand_computed_ones():
    events, _ = run_clocks(SCRIPT)
    for eid, e in by_id(events).items():
        assert e.vector == HAND_VECTORS[eid], eid
        assert e.lamport == HAND_LAMPORT[eid], eid


def test_vector_clocks_decide_the_hand_listed_happened_before_relation():
    ids = list(HAND_VECTORS)
    for a, b in itertools.permutations(ids, 2):
        assert happened_before(HAND_VECTORS[a], HAND_VECTORS[b]) == ((a, b) in HAND_BEFORE), (a, b)
    assert concurrent(HAND_VECTORS[(0, 1)], HAND_VECTORS[(1, 0)])  # a2 || b1
    assert not concurrent(HAND_VECTORS[(0, 0)], HAND_VECTORS[(2, 2)])


def test_causal_order_reference_reproduces_the_hand_listing():
    after = causal_order(SCRIPT)
    assert {(a, b) for a, succ in after.items() for b in succ} == HAND_BEFORE


@pytest.mark.parametrize("K, seed", [(1, 0), (2, 1), (3, 2), (5, 3), (8, 4)])
def test_vector_clocks_match_graph_reachability_and_lamport_is_consistent(K, seed):
    script = random_script(K, messages=12, seed=seed) if K > 1 else [[("local",)] * 4]
    events, res = run_clocks(script)
    ev = by_id(events)
    after = causal_order(script)
    for a, b in itertools.permutations(ev, 2):
        hb = b in after[a]
        assert happened_before(ev[a].vector, ev[b].vector) == hb, (a, b)
        if hb:
            assert ev[a].lamport < ev[b].lamport  # clock condition (the converse need not hold)
    assert sum(s.messages_sent for s in res.stats) == sum(e.kind == "send" for e in ev.values())


def test_messages_carry_payload_plus_lamport_plus_vector_as_int64():
    events, res = run_clocks(SCRIPT)
    K = len(SCRIPT)
    assert res.stats[0].bytes_sent == (1 + 1 + K) * 8


def test_lamport_receive_jumps_past_the_sender_and_vector_merge_takes_maxima():
    c = LamportClock()
    assert c.tick() == 1 and c.receive(10) == 11 and c.send() == 12
    v = VectorClock(1, 3)
    v.tick()
    np.testing.assert_array_equal(v.merge(np.array([4, 0, 2])), [4, 1, 2])
    np.testing.assert_array_equal(v.receive(np.array([0, 7, 9])), [4, 8, 9])


@pytest.mark.parametrize("bad, message", [
    ([[("send", 1)], []], "do not match"),
    ([[("send", 0)]], "use \\('local',\\)"),
    ([[("jump",)]], "use \\('local',\\)"),
    ([], "at least one rank"),
])
def test_bad_scripts_are_rejected_with_a_readable_message(bad, message):
    with pytest.raises(ValueError, match=message):
        check_script(bad)
