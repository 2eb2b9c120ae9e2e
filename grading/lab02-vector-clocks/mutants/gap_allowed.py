# mutant: the rule accepts any later message of the sender (stamp[s] > delivered[s]), so a gap in its seq goes unseen
# loses: rule
REPLACE = [("    if ahead[sender] != 1:", "    if ahead[sender] < 1:")]
