# mutant: the backward scatter uses fancy-index += (a source with several out-edges keeps only one)
# loses: input_grads, small, process, random, halo_traffic
REPLACE = [("np.add.at(pulled, src, per_edge)", "pulled[src] += per_edge")]
