# mutant: the gradient rows that come back overwrite dX instead of being added to it
# loses: input_grads, small, process, random, halo_traffic
# says: added there
REPLACE = [("np.add.at(dX, local[wanted[j]], rows)", "dX[local[wanted[j]]] = rows")]
