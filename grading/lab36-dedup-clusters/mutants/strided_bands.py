# mutant: band b takes the entries b, b + bands, b + 2 bands, ... instead of r contiguous entries
# loses: keepers, chains, random
REPLACE = [("cols = sigs.astype(np.uint64).reshape(n, bands, width // bands)",
            "cols = sigs.astype(np.uint64).reshape(n, width // bands, bands).transpose(0, 2, 1)")]
