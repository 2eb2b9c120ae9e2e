# mutant: hierarchical_allreduce returns this rank's own gradients: no communication at all
# loses: allreduce, train_sim, train_process, frozen, cross_node, messages
def hierarchical_allreduce(comm, grads, G, bucket_bytes):
    return {name: value.copy() for name, value in grads.items()}
