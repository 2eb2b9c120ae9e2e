# mutant: merge_partials adds l and acc without rescaling them to the new maximum
# loses: pieces, forward, tiny, stable, correct_process, random
REPLACE = [("f_a, f_b = np.exp(m_a - ref), np.exp(m_b - ref)", "f_a, f_b = np.ones_like(m_a), np.ones_like(m_b)")]
