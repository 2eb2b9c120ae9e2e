# mutant: the shadow time is the first limit end at which the head's CPUs are free (its GPUs are not looked at)
# loses: two_resources, cluster
REPLACE = [("            if need_c <= have_c and need_g <= have_g:\n                return when,",
            "            if need_c <= have_c:\n                return when,")]
