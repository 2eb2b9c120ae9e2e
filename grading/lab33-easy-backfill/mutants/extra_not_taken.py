# mutant: a job backfilled into the extra does not take its CPUs and GPUs out of it: two such jobs delay the head
# loses: one_resource, two_resources, legal
REPLACE = [("spare_c, spare_g = spare_c - c, spare_g - g", "spare_c, spare_g = spare_c, spare_g")]
