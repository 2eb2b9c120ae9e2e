# mutant: the candidate pairs cross the network as int32: ids past 2^31 overflow
# loses: keepers, chains
REPLACE = [("got = np.concatenate(exchange(out, np.int64, 4))", "got = np.concatenate(exchange(out, np.int32, 4))")]
