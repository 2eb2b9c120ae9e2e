# mutant: reduces to the leader, then every rank joins the ring over all K ranks (non-leaders with zeros):
# the sums are right but non-leaders talk to other nodes and no broadcast is needed
# loses: cross_node, messages
# says: only node leaders cross nodes
REPLACE = [
    ('        if me != head:\n            comm.send(vec, head)  # level 1: my whole bucket to my leader\n'
     '            total = comm.recv(head)  # level 3: the global sum comes back\n',
     '        if me != head:\n            comm.send(vec, head)\n'
     '            total = leader_ring_allreduce(comm, np.zeros_like(vec), list(range(world)))\n'),
    ('            total = leader_ring_allreduce(comm, node_sum, leaders)  # level 2: leaders only\n'
     '            for peer in members[1:]:\n                comm.send(total, peer)\n',
     '            total = leader_ring_allreduce(comm, node_sum, list(range(world)))\n'),
]
