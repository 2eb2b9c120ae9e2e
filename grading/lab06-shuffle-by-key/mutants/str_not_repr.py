# mutant: hashes str(key) instead of repr(key): the same for int and tuple keys, another rank for str keys
# loses: placement, correct_process
# says: wrong rank
REPLACE = [('hashlib.blake2b(repr(key).encode("utf-8")', 'hashlib.blake2b(str(key).encode("utf-8")')]
