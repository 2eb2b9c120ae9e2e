# mutant: a rank that holds no row reports progress 0, which pulls the minimum back to the start of epoch 0
# loses: agree
# says: must not pull the minimum down
REPLACE = [("        mine = NOBODY", "        mine = 0")]
