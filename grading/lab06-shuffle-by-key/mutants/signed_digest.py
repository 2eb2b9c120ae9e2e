# mutant: reads the 8-byte digest as a NumPy int64 (signed): the same partition only when R is a power of two
# loses: placement, correct_process
# says: wrong rank
REPLACE = [('    return int.from_bytes(digest, "little") % R',
            '    return int(np.frombuffer(digest, dtype="<i8")[0]) % R')]
