# mutant: workers send their gradient and return it without waiting for the aggregate (only rank 0's value is right)
# loses: server, traffic, correct_process
# says: rank 1's aggregate
REPLACE = [("        comm.send(np.asarray(grad), 0)\n        return comm.recv(0)",
            "        comm.send(np.asarray(grad), 0)\n        return np.asarray(grad)")]
