# mutant: the server stacks the gradients in reverse rank order (the last rank first): Krum's ties go to the wrong rank
# loses: server
REPLACE = [("    stack = np.stack([np.asarray(grad)] + [comm.recv(q) for q in range(1, K)])",
            "    got = {q: comm.recv(q) for q in range(1, K)}\n"
            "    stack = np.stack([got[q] for q in range(K - 1, 0, -1)] + [np.asarray(grad)])")]
