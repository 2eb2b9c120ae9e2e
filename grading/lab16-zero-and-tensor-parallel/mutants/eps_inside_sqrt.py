# mutant: Adam with eps inside the square root, sqrt(v_hat + eps), not sqrt(v_hat) + eps (tiny gradients show it)
# loses: master_sim, master_process, weights_sim, weights_process
# says: gradients of size 1e-07
REPLACE = [("(np.sqrt(v_hat) + eps)", "np.sqrt(v_hat + eps)")]
