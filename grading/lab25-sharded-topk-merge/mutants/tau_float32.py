# mutant: tau is sent as float32 to save bytes: on float64 data it rounds, up (more candidates) or down
# (candidates at the threshold lost)
# loses: threshold
# says: float32
REPLACE = [("        comm.send(tau, peer)", "        comm.send(tau.astype(np.float32), peer)")]
