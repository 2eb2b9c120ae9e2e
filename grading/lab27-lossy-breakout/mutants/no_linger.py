# mutant: the close sends one fin instead of linger: a peer whose copy is lost waits forever
# loses: solved_lossy, channel, traffic_lossless, traffic_lossy
REPLACE = [("        for _ in range(linger):", "        for _ in range(1):")]
