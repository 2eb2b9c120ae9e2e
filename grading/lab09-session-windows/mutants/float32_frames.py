# mutant: frames in float32 to halve the bytes: epoch-millisecond times and fractional values are rounded
# loses: sessions, late, frames, edge_cases, correct_process
# says: float64
REPLACE = [("    frame = np.empty(1 + 3 * len(times), dtype=np.float64)", "    frame = np.empty(1 + 3 * len(times), dtype=np.float32)")]
