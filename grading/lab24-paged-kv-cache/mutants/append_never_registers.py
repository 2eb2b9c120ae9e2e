# mutant: only admit registers full blocks; a block filled by append (generated tokens) is never cached
# loses: lru_eviction
REPLACE = [("        if pos % B == B - 1:  # this token fills the block\n            self._register(tbl[-1], seen)\n", "")]
