# mutant: only jobs that end by the shadow time backfill; the extra CPUs and GPUs are never used
# loses: one_resource, two_resources, kills, cluster
REPLACE = [("if c <= spare_c and g <= spare_g:  # lives", "if False:  # lives")]
