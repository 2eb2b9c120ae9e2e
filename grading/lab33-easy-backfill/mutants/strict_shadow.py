# mutant: a backfilled job must end strictly before the shadow time (t + l < S): a job ending exactly at S is refused
# loses: two_resources, cluster
REPLACE = [("if t + limit <= shadow:", "if t + limit < shadow:")]
