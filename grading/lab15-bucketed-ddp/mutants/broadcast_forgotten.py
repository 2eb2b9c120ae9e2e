# mutant: the leader never sends the global sum back: a non-leader keeps its node's partial sum
# loses: allreduce, train_sim, cross_node, messages
# says: rank 1's
REPLACE = [
    ('            total = comm.recv(head)  # level 3: the global sum comes back\n',
     '            total = vec\n'),
    ('            for peer in members[1:]:\n                comm.send(total, peer)\n', ''),
]
