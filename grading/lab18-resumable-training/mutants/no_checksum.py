# mutant: the restart trusts any shard that loads: the sha256 in the manifest is never compared
# loses: checksum
# says: sha256
REPLACE = [
    ('                if hashlib.sha256(raw).hexdigest() != entry["sha256"]:\n                    raise ValueError(f"{entry[\'file\']} does not match its sha256")\n',
     ''),
]
