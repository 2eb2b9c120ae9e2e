# mutant: a backfill candidate is checked against the free CPUs only: GPUs are handed out twice
# loses: two_resources, legal, cluster
REPLACE = [("            if c <= self.room[0] and g <= self.room[1]:\n                if t + limit",
            "            if c <= self.room[0]:\n                if t + limit")]
