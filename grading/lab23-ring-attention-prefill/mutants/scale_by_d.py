# mutant: scores divided by sqrt(d) of the whole model instead of sqrt(d_h) of a head
# loses: pieces, forward, tiny, correct_process, random
REPLACE = [("/ float(np.sqrt(d_h))", "/ float(np.sqrt(width))")]
