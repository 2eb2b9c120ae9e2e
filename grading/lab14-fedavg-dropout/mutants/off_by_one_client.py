# mutant: the server's client list starts at rank 2: client 1 waits for a model that never comes (deadlock)
# loses: no_drop, dropout, all_drop, privacy, clients, broadcast, correct_process
REPLACE = [
    ("    alive = list(range(1, K))\n", "    alive = list(range(2, K))\n"),
]
