# mutant: on receive the clock is replaced by the message's clock instead of the element-wise max
# loses: clocks
# says: element-wise max
REPLACE = [
    ('V = np.maximum(V, comm.recv(int(peer)))',
     'V = comm.recv(int(peer)).copy()'),
]
