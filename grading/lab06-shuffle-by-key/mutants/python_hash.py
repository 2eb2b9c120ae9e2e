# mutant: Python's built-in hash as the partitioner: salted per process for str, and not the lab's rule
# loses: placement, correct_process
# says: same in every process
REPLACE = [('    digest = hashlib.blake2b(repr(key).encode("utf-8"), digest_size=8).digest()\n'
            '    return int.from_bytes(digest, "little") % R',
            '    return hash(key) % R')]
