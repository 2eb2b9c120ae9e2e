# mutant: bucketed_allreduce returns this rank's own gradients: no communication at all
# loses: allreduce, train_sim, train_process, messages, frozen, own_code
def bucketed_allreduce(comm, grads, bucket_bytes):
    return {name: value.copy() for name, value in grads.items()}
