# mutant: adds each received half in float64 and casts back: exact for small integers, wrong for int64 beyond 2**53
# loses: correct_sim
# says: integer sums must be exact
REPLACE = [
    ("buf[edges[lo]:edges[hi]] += incoming",
     "buf[edges[lo]:edges[hi]] = (buf[edges[lo]:edges[hi]] + incoming.astype(float)).astype(buf.dtype)"),
]
