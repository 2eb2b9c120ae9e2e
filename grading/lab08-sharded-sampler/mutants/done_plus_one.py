# mutant: off by one at a step boundary: `done` read as the index of the last completed entry, so the job resumes
# one batch position per old rank too late and the next samples of the tape are never read
# loses: agree
# says: past a step some rank never completed
REPLACE = [("mine = int(np.min(epochs * n + starts + k_olds * dones))",
            "mine = int(np.min(epochs * n + starts + k_olds * (dones + 1)))")]
