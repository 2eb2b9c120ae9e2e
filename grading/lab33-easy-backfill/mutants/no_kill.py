# mutant: a job always runs for its runtime, even past its limit (the chapter's trace promises runtime <= estimate)
# loses: kills, legal, cluster
# says: killed
REPLACE = [("            comm.send(np.array([t + min(runtimes[r].item(), jobs[r, 4].item())]), 0)",
            "            comm.send(np.array([t + runtimes[r].item()]), 0)"),
           ("            return t + min(runtimes[r].item(), jobs[r, 4].item())",
            "            return t + runtimes[r].item()"),
           ("lambda j, t: t + min(runtimes[j].item(), rows[j][4])", "lambda j, t: t + runtimes[j].item()")]
