# mutant: every rank reads and verifies every shard of a candidate, not only those its block overlaps: right answer, K times the reads, flags that do not say what the rank itself needs
# loses: checksum
# says: overlap
REPLACE = [
    ("        out, filled = np.empty((2, hi - lo), dtype=dtype), 0\n",
     "        for entry in manifest[\"shards\"]:\n"
     "            with open(os.path.join(folder, os.path.basename(entry[\"file\"])), \"rb\") as fh:\n"
     "                if hashlib.sha256(fh.read()).hexdigest() != entry[\"sha256\"]:\n"
     "                    raise ValueError(\"a shard does not verify\")\n"
     "        out, filled = np.empty((2, hi - lo), dtype=dtype), 0\n"),
]
