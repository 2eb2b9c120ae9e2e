# mutant: sums only after the exchange: the right totals, but every raw pair crosses the network
# loses: traffic
# says: combine before the exchange
REPLACE = [("        mine = combine_sum(mine)  # one pair per key leaves this rank", "        pass")]
