# mutant: the watermark follows the fastest partition (Spark's max rule), not the slowest: events of a slow
# partition turn late and sessions are emitted too early
# loses: emitted_at, late, sessions, edge_cases, interleavings, correct_process, frames
# says: minimum
REPLACE = [("        mine = min((partition_watermark(latest[p], i >= last_step[p], delta) for p in owned), default=np.inf)",
            "        mine = max((partition_watermark(latest[p], False, delta) for p in owned), default=-np.inf)"),
           ("        mark = max(mark, min(marks))", "        mark = np.inf if i == int(n_steps) - 1 else max(mark, max(marks))")]
