# mutant: the driver returns [best trial, best score] in float32: the score loses its digits
# loses: driver
# says: float64
REPLACE = [
    ('    return np.array([trial, score], dtype=np.float64)',
     '    return np.array([trial, score], dtype=np.float32)'),
]
