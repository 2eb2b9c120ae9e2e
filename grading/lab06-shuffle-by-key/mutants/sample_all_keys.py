# mutant: the "sample" is every element (weight 1): exact splitters, but each rank sends its whole key list
#   to every rank
# loses: traffic
# says: sample s entries (not every key)
REPLACE = [("    sample = encode(regular_sample(elems, s))", "    sample = encode([(e, 1) for e in elems])")]
