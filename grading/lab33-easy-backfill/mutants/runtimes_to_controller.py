# mutant: right starts, but each login node also sends its runtimes to the controller (which must not see them)
# loses: protocol
REPLACE = [("        comm.send(np.ascontiguousarray(jobs), 0)\n",
            "        comm.send(np.ascontiguousarray(jobs), 0)\n        comm.send(runtimes.astype(np.float64), 0)\n"),
           ("        table = np.asarray(comm.recv(peer)).reshape(-1, 5)\n",
            "        table = np.asarray(comm.recv(peer)).reshape(-1, 5)\n        comm.recv(peer)\n")]
