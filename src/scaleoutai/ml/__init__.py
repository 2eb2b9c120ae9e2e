"""Part III, Distributed Machine Learning (Chapters 10-14): the modules a chapter of Part III teaches.

NumPy, the communicator and the shared layers only; the production libraries (torch DDP hooks, Ray,
scikit-learn, LightGBM, PyTorch Geometric, Opacus) run beside these in the chapters and the tests.

    optimization       Ch10  sync SGD, asynchronous SGD with staleness tau, local SGD with H local steps
    compression        Ch10  top-k, QSGD, PowerSGD, error feedback, compressed_allreduce and its bytes
    large_batch        Ch10  linear scaling and warm-up, LARS and LAMB layer-wise trust ratios
    paramserver        Ch11  sharded key-value parameter server: sparse push/pull, SSP bound enforced and
                             measured, primary-backup replicas (paramserver_server: the server loop)
    classical          Ch12  linear/ridge regression from one all-reduce of sufficient statistics, Lloyd k-means
    trees              Ch12  histogram split finding for gradient-boosted trees (XGBoost's eq. 7 gain, gamma
                             pruning); LightGBM's data-parallel learner
    glm                Ch12  L2-regularised logistic regression on K ranks: L-BFGS (one all-reduce of d + 1
                             numbers per evaluation), Newton, consensus ADMM with residual bound
    graph_partition    Ch13  edge-cut (hash, range, LDG) and vertex-cut (random, HDRF) partitions and their metrics
    graph              Ch13  Pregel PageRank and connected components over the communicator, checkpoints
                             (graph_gas: PowerGraph-style vertex-cut PageRank)
    graph_sampling     Ch13  GraphSAGE neighbour sampling, mean/sum aggregation, remote feature fetch
    federated          Ch14  FedAvg with client dropout, Dirichlet non-IID splits, FedProx
    gossip             Ch14  gossip averaging on graphs and its rate against the spectral gap
    privacy            Ch14  DP-SGD (per-example clipping, Gaussian noise) and an RDP accountant
    dp_fedavg          Ch14  DP-FedAvg: client-level DP (client sampling, clipped deltas, noise on the sum)
    secure_agg         Ch14  secure aggregation (Bonawitz et al.): double masks, exact under client dropout
    shamir             Ch14  Shamir t-of-n secret sharing over F_p (the secure aggregation's recovery)
"""
