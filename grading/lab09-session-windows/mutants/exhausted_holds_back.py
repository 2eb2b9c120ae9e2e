# mutant: a partition that has delivered its last event keeps its last watermark (an empty one stays at
# -inf) until the end of the run flushes everything
# loses: emitted_at, edge_cases, frames
# says: exhausted
REPLACE = [("        mine = min((partition_watermark(latest[p], i >= last_step[p], delta) for p in owned), default=np.inf)",
            "        mine = min((partition_watermark(latest[p], i >= int(n_steps) - 1, delta) for p in owned), "
            "default=np.inf)")]
