# mutant: the digest is the sha256 of the array's bytes, not of the file: self-consistent, but the manifest does not match the files
# loses: traffic, commit
REPLACE = [
    ('    digest = np.frombuffer(hashlib.sha256(raw).digest(), dtype=np.uint8)',
     '    digest = np.frombuffer(hashlib.sha256(np.ascontiguousarray(state).tobytes()).digest(), dtype=np.uint8)'),
    ('                if hashlib.sha256(raw).hexdigest() != entry["sha256"]:\n                    raise ValueError(f"{entry[\'file\']} does not match its sha256")\n                part = np.load(io.BytesIO(raw), allow_pickle=False)\n',
     '                part = np.load(io.BytesIO(raw), allow_pickle=False)\n                if hashlib.sha256(np.ascontiguousarray(part).tobytes()).hexdigest() != entry["sha256"]:\n                    raise ValueError("mismatch")\n'),
]
