# mutant: the ring hashes keys cast to int32: right below 2**31, other positions (and owners) beyond
# loses: ring, routing, migration, final_rows
# says: no narrower type
REPLACE = [("spot = mix64(np.asarray(keys, dtype=np.int64))", "spot = mix64(np.asarray(keys).astype(np.int32))")]
