# mutant: Krum scores sum the plain distances ||v_i - v_j|| instead of the squared distances
# loses: krum, multi_krum
# says: squared distances
REPLACE = [("    np.fill_diagonal(dist, np.inf)  # a vector is not its own neighbour\n",
            "    dist = np.sqrt(dist)\n    np.fill_diagonal(dist, np.inf)  # a vector is not its own neighbour\n")]
