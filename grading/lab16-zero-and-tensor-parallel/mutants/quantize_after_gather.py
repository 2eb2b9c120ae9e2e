# mutant: all-gathers the master shards in full precision and quantizes every shard after the gather
# loses: int8_wire, bytes
# says: a full-precision all-gather
REPLACE = [("    codes, scales = quantize_blocks(master, qblock)\n"
            "    all_codes = all_gather(comm, codes)  # n int8 codes\n"
            "    all_scales = all_gather(comm, scales)  # one scale per block of every shard\n",
            "    full = all_gather(comm, master)\n"
            "    parts = [quantize_blocks(b, qblock) for b in np.array_split(full, K)]\n"
            "    all_codes = np.concatenate([c for c, _ in parts])\n"
            "    all_scales = np.concatenate([s for _, s in parts])\n")]
