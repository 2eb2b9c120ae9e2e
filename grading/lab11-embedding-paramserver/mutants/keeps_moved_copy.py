# mutant: an old server keeps the rows it handed on and returns them at the end too
# loses: final_rows, correct_process
# says: none it handed on
REPLACE = [("                keep(~moving)\n", "")]
