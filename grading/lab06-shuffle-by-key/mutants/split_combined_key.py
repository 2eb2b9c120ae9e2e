# mutant: with combine='sum' still cuts by the element (key, rank, i): a key equal to a splitter's key ends on
#   two ranks, each with a partial sum
# loses: combine
# says: every key is one pair on one rank
REPLACE = [("        cuts = [bisect.bisect_right(keys, t[0]) for t in splitters]",
            "        cuts = [bisect.bisect_right(elems, t) for t in splitters]")]
