# mutant: counts start in positions of the epoch's whole order (order[start:][rank::K]), not in this rank's own list
# loses: resume
# says: start=
REPLACE = [("return order[rank::K][start:].copy()", "return order[start:][rank::K].copy()")]
