# mutant: a single round of label exchange: a chain whose links sit on several ranks is not closed
# loses: keepers, chains, verified, small, process, random
REPLACE = [("if total == 0:", "if total >= 0:")]
