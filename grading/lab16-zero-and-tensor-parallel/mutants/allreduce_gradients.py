# mutant: all-reduces the whole gradient and slices its block (ZeRO-1 traffic): right numbers, more bytes
# loses: bytes
# says: reduce-scatter
from scaleoutai.collectives import ring_allreduce

REPLACE = [("    g_mine = reduce_scatter(comm, grad_flat)  # my block of the summed gradient\n",
            "    g_mine = ring_allreduce(comm, grad_flat)[state['lo']:state['lo'] + state['master'].size]\n")]
