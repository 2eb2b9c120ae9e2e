# mutant: mean mode divides the pooled bag by |b| but the backward forgets it: every entry gets G[b], not G[b]/|b|
# loses: update_sgd, update_rowwise, small, gradients
REPLACE = [("per_bag = grad / np.maximum(lengths, 1).astype(grad.dtype)[:, None] if mode == \"mean\" else grad",
            "per_bag = grad")]
