# mutant: the residual is y - sigmoid(z): the gradient of the log-likelihood, pointing uphill on the loss
# loses: local, sharded, stable, communication
REPLACE = [
    ('    residual = -sign * wrong  # equals sigmoid(z) - y, to relative rounding',
     '    residual = sign * wrong'),
]
