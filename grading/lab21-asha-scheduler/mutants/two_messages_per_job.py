# mutant: the driver sends each job as two messages ([trial, rung], then [units]): right schedule, twice the messages
# loses: protocol
# says: one message per job
REPLACE = [("            comm.send(np.array([trial, rung, units], dtype=np.float64), worker)",
            "            comm.send(np.array([trial, rung], dtype=np.float64), worker)\n"
            "            comm.send(np.array([units], dtype=np.float64), worker)"),
           ("            trial, rung, units = comm.recv(0)\n            if trial < 0:",
            "            head = comm.recv(0)\n            trial, rung = head[0], head[-1]\n            if trial < 0:"),
           ("            comm.compute(time_per_unit * units)", "            comm.compute(time_per_unit * comm.recv(0)[0])")]
