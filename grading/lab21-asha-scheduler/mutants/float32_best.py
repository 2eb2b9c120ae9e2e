# mutant: the driver returns [best trial, best score, top] in float32: the score loses its digits
# loses: driver
# says: float64
REPLACE = [("    return np.array([trial, score, sched.top], dtype=np.float64)",
            "    return np.array([trial, score, sched.top], dtype=np.float32)")]
