# mutant: the old servers send the moved rows as they lie in the store, without applying the steps they missed
# loses: migration, final_rows, pulls_current, correct_process
# says: after step J-2
REPLACE = [("                catch_up(loc, c - 2)\n                wv", "                wv")]
