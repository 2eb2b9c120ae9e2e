# mutant: partition by the length of the key's text: stable, but not the lab's rule (and badly skewed)
# loses: placement, correct_process
REPLACE = [('    digest = hashlib.blake2b(repr(key).encode("utf-8"), digest_size=8).digest()\n'
            '    return int.from_bytes(digest, "little") % R',
            '    return len(str(key)) % R')]
