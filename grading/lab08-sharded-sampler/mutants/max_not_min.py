# mutant: resumes where the most advanced rank stopped (max): the samples of a step not every rank completed are
# never read
# loses: agree
# says: min
REPLACE = [("best = np.minimum(best, np.asarray(got", "best = np.maximum(best, np.asarray(got"),
           ("mine = NOBODY", "mine = -1"),
           ("if total == NOBODY:", "if total < 0:")]
