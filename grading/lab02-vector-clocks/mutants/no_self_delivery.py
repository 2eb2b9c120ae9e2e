# mutant: a rank does not deliver its own broadcasts (it logs only what it receives)
# loses: delivery, causal, process, timestamps
REPLACE = [("            log.append((me, int(delivered[me])))\n", "")]
