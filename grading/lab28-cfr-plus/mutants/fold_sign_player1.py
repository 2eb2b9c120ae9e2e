# mutant: the folds paid from player 0's side to both players: player 1 also gets +1 at "bp" and -1 at "pbp"
# loses: tables, converges, process, random, messages
REPLACE = [("    win_fold = 1 if player == 0 else -1", "    win_fold = 1")]
