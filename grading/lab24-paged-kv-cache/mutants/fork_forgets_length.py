# mutant: the child of a fork starts with length 0, so its first token goes to a new block instead of after the parent's tokens
# loses: tokens, copy_on_write
REPLACE = [("        self.lengths[child] = self.lengths[parent]\n", "        self.lengths[child] = 0\n")]
