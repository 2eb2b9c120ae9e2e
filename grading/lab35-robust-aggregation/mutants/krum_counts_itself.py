# mutant: Krum counts a vector as its own nearest neighbour (distance 0), so it scores one real neighbour too few
# loses: krum, multi_krum, server
REPLACE = [("    np.fill_diagonal(dist, np.inf)  # a vector is not its own neighbour\n", "")]
