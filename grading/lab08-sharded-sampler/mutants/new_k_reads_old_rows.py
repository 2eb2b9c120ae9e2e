# mutant: the new job's K interprets the old rows: progress = start + K_new * done
# loses: agree
# says: K_old from the row
REPLACE = [("mine = int(np.min(epochs * n + starts + k_olds * dones))",
            "mine = int(np.min(epochs * n + starts + comm.size * dones))")]
