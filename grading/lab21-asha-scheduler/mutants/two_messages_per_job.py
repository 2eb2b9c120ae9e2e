# mutant: the driver sends each job as two messages (trial and rung, then the resources): right schedule, twice the messages
# loses: driver
# says: one message per job
REPLACE = [
    ('            comm.send(np.array([trial, rung, r_from, sched.rungs[rung]], dtype=np.float64), w)',
     '            comm.send(np.array([trial, rung], dtype=np.float64), w)\n'
     '            comm.send(np.array([r_from, sched.rungs[rung]], dtype=np.float64), w)'),
    ('            trial, rung, r_from, r_to = int(msg[0]), int(msg[1]), msg[2], msg[3]',
     '            trial, rung = int(msg[0]), int(msg[1])\n            r_from, r_to = comm.recv(0)'),
]
