# mutant: cuts by the key alone even without a combiner: a hot key stays whole on one rank
# loses: balance
# says: a hot key split across consecutive ranks
REPLACE = [("        cuts = [bisect.bisect_right(elems, t) for t in splitters]",
            "        cuts = [bisect.bisect_right([e[0] for e in elems], t[0]) for t in splitters]")]
