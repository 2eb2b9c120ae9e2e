# mutant: the codes are rounded but kept in the parameters' dtype: right weights, 4-8x the bytes on the wire
# loses: int8_wire, bytes
# says: as an int8 array
REPLACE = [("codes = np.zeros(x.size, dtype=np.int8)", "codes = np.zeros(x.size, dtype=x.dtype)"),
           ("np.clip(q, -127, 127).astype(np.int8)", "np.clip(q, -127, 127)")]
