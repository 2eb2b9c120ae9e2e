# mutant: counts the nodes as K // G (floor): the ranks of a smaller last node are put on the node before,
# so their "leader" is on another node (right sums, wrong traffic when G does not divide K)
# loses: cross_node, messages
# says: not the leader of node
REPLACE = [
    ('    head = (me // G) * G\n    members = list(range(head, min(world, head + G)))\n',
     '    n_nodes = max(1, world // G)\n    leaders = [node * G for node in range(n_nodes)]\n'
     '    head = min(me // G, n_nodes - 1) * G\n'
     '    members = list(range(head, world if head == leaders[-1] else head + G))\n'),
]
