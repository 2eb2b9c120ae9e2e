# mutant: torch's randperm for the epoch's order: a consistent elastic sampler (the schedules pass), but not the
# lab's rule index for index
# loses: same_k, k_changes
REPLACE = [("perm = np.random.default_rng(seed + epoch).permutation(n)",
            "import torch\n    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).numpy()")]
