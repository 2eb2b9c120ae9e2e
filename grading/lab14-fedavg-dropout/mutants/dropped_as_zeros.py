# mutant: a client that dropped is averaged in as a zero model (weight 1) instead of being left out
# loses: dropout, all_drop
REPLACE = [
    ("            except cluster.PeerCrashedError:\n                alive.remove(q)\n                continue\n",
     "            except cluster.PeerCrashedError:\n                counts.append(1.0)\n"
     "                models.append(np.zeros_like(w))\n                continue\n"),
]
