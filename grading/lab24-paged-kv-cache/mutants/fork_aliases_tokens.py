# mutant: the child of a fork shares the parent's token list object, so the child's appends extend the parent's tokens too
# loses: tokens, copy_on_write, lru_eviction
REPLACE = [("        self.tokens[child] = list(self.tokens[parent])\n", "        self.tokens[child] = self.tokens[parent]\n")]
