# mutant: zero_init reads the first index of its block even when the block is empty (K > Psi): IndexError
# loses: zero_sim, zero_memory, zero_bytes, own_code
# says: more ranks than elements
REPLACE = [('"lo": int(owned[0]) if owned.size else 0', '"lo": int(owned[0])')]
