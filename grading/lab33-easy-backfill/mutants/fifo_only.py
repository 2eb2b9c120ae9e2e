# mutant: no backfilling at all: plain FIFO (the head blocks everyone)
# loses: one_resource, two_resources, kills, cluster
REPLACE = [("            if c <= self.room[0] and g <= self.room[1]:\n                if t + limit",
            "            if False:\n                if t + limit")]
