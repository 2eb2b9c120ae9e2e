# mutant: every LSH candidate pair is united, its Jaccard never checked
# loses: keepers, chains, verified, random
REPLACE = [("if (common / either if either else 1.0) >= threshold:", "if True:")]
