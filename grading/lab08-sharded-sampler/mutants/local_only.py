# mutant: no message: every rank resumes from the rows it holds
# loses: agree
REPLACE = [("    while hop < K:", "    while False:")]
