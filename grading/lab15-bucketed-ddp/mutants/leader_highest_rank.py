# mutant: a node's leader is its highest rank, not its lowest (the sums are right, the wrong ranks cross)
# loses: cross_node, messages
# says: not the leader of node
REPLACE = [
    ('    head = (me // G) * G\n    members = list(range(head, min(world, head + G)))\n',
     '    top = min(world, (me // G) * G + G) - 1\n    members = list(range(top, (me // G) * G - 1, -1))\n'
     '    head = top\n    leaders = [min(world, node * G + G) - 1 for node in range(n_nodes)]\n'),
]
