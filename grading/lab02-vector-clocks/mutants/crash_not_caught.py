# mutant: the leader does not catch PeerCrashedError, so one crashed follower ends the run
# loses: minority, majority_lost
REPLACE = [
    ('            for f in sorted(alive):\n                try:\n                    comm.recv(f)\n                    acks += 1\n                except cluster.PeerCrashedError:\n                    alive.discard(f)',
     '            for f in sorted(alive):\n                comm.recv(f)\n                acks += 1'),
]
