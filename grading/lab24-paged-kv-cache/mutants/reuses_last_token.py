# mutant: a prompt whose every block is cached reuses its last block too, so its last token's logits are never computed
# loses: prefix_hits
# says: never the prompt's last token
REPLACE = [("        while end < len(prompt) and tuple(prompt[:end]) in self.block_for:  # never the last token's block\n",
            "        while end <= len(prompt) and tuple(prompt[:end]) in self.block_for:\n")]
