# mutant: the ring's points are made from each member's position in the list, not its id: right only when the
# members are 0..M-1 in order (as in the runs), wrong for members such as [3, 1, 7]
# loses: ring
# says: server j's points
REPLACE = [("base = np.uint64(1 << 62) + np.uint64(1 << 20) * ids.astype(np.uint64)",
            "base = np.uint64(1 << 62) + np.uint64(1 << 20) * np.arange(len(ids), dtype=np.uint64)")]
