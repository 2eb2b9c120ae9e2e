# mutant: ignores start: a resumed rank rereads its epoch from the beginning
# loses: resume
# says: whole list
REPLACE = [("return order[rank::K][start:].copy()", "return order[rank::K].copy()")]
