# mutant: integer keys go to key % R, everything else by the lab's rule
# loses: placement, correct_process
# says: wrong rank
REPLACE = [('    digest = hashlib.blake2b(',
            '    if isinstance(key, int):\n        return key % R\n    digest = hashlib.blake2b(')]
