# mutant: on receive the message's clock is read and thrown away: the element-wise max is forgotten
# loses: clocks
# says: element-wise max
REPLACE = [
    ('V = np.maximum(V, comm.recv(int(peer)))',
     'comm.recv(int(peer))'),
]
