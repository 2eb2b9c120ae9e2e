# mutant: the doubling puts the partner's finished blocks on the wrong side of its own (the bit test inverted)
# loses: correct_sim, correct_process, bandwidth, latency, schedule
REPLACE = [
    ("        at = lo if v & dist else hi - width", "        at = hi - width if v & dist else lo"),
]
