# mutant: one watermark per rank (the latest time any of its partitions delivered, minus delta), the
# chapter's "min" policy over ranks: a slow partition read beside a fast one no longer holds W back
# loses: emitted_at, late, sessions, edge_cases, interleavings, correct_process
# says: minimum
REPLACE = [("        mine = min((partition_watermark(latest[p], i >= last_step[p], delta) for p in owned), default=np.inf)",
            "        alive = [p for p in owned if i < last_step[p]]\n"
            "        mine = partition_watermark(max((latest[p] for p in alive), default=-np.inf), not alive, delta)")]
