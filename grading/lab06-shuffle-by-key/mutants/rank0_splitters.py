# mutant: the splitters come from rank 0's sample alone (rank 0 broadcasts them): balanced only when rank 0's
#   keys look like everyone's
# loses: balance
# says: every rank's weighted regular sample
def choose_splitters(comm, elems, s):
    K, r = comm.size, comm.rank
    if r == 0:
        entries = sorted(regular_sample(elems, s))  # noqa: F821
        total = sum(w for _, w in entries)
        splitters, running, i = [], 0, 1
        for elem, w in entries:
            running += w
            while i < K and running * K >= i * total:
                splitters.append(elem)
                i += 1
        for d in range(1, K):
            comm.send(encode(splitters), d)  # noqa: F821
        return splitters
    return list(decode(comm.recv(0)))  # noqa: F821
