# mutant: a result at the current top rung is reported "stop", as if the current top were the last rung
# loses: decisions
REPLACE = [("        if rung == self.last:\n            fate = \"stop\"", "        if rung == self.top:\n            fate = \"stop\"")]
