# mutant: the leaders sum by gathering every node's bucket on leader 0, which sends the total back
# loses: cross_node, messages
# says: gather
REPLACE = [
    ('total = leader_ring_allreduce(comm, node_sum, leaders)  # level 2: leaders only',
     'total = _via_first(comm, node_sum, leaders)'),
]


def _via_first(comm, x, leaders):
    if comm.rank == leaders[0]:
        total = x.copy()
        for src in leaders[1:]:
            total = total + comm.recv(src)
        for dst in leaders[1:]:
            comm.send(total, dst)
        return total
    comm.send(x, leaders[0])
    return comm.recv(leaders[0])
