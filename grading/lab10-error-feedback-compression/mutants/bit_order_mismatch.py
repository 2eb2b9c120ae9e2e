# mutant: packs coordinate 0 in the least significant bit (np.packbits(..., bitorder="little")) but decodes
#   from the most significant one
# loses: bits, compressor, contraction, allreduce, residual, correct_process, training
# says: wrong order
REPLACE = [("np.array([128, 64, 32, 16, 8, 4, 2, 1], dtype=np.uint16)", "np.array([1, 2, 4, 8, 16, 32, 64, 128], dtype=np.uint16)")]
