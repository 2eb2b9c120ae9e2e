# mutant: sums in float64 (np.sum of an array), exact below 2**53 only
# loses: combine, correct_process
# says: sums are wrong
import numpy as np

REPLACE = [("            summed[-1] = (key, summed[-1][1] + value)",
            "            summed[-1] = (key, int(np.sum(np.array([summed[-1][1], value], dtype=np.float64))))")]
