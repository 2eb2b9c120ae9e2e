# mutant: the shadow walk stops at the first job that makes the head fit (the chapter's _shadow): jobs whose
# limit ends at the same time are not counted in the extra
# loses: two_resources, cluster
# says: every job whose limit ends by then
REPLACE = [("            while k < len(by_end) and by_end[k][1] == when:  # a tie releases all at once",
            "            while k < len(by_end) and by_end[k][1] == when"
            " and not (need_c <= have_c and need_g <= have_g):")]
