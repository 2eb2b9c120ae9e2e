# mutant: the owner adds the gradients its peers send but forgets those of its own bags
# loses: update_sgd, update_rowwise, small, correct_process
REPLACE = [("        part = g_u[pos[r]] if j == r else comm.recv(j)\n",
            "        part = np.zeros((len(loc[j]), d), my_rows.dtype) if j == r else comm.recv(j)\n")]
