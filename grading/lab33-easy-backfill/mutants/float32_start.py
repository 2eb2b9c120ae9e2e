# mutant: the controller sends [id, t] as float32: float start times are rounded on the login nodes
# loses: cluster, legal, protocol
REPLACE = [("comm.send(np.array([float(job), float(t)]), owner[job])",
            "comm.send(np.array([job, t], dtype=np.float32), owner[job])")]
