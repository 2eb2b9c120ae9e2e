"""Part IV (Chapters 15-19): parallel deep learning from scratch in NumPy, every gradient by hand.

Modules (import them directly; this package imports nothing heavy):
    model     MLP, transformer block, losses, flatten/unflatten, SGD and Adam (the single-device reference)
    ddp       Ch15 data parallelism: naive and bucketed all-reduce, gradient accumulation
    zero      Ch16 ZeRO stages 1-3 over reduce-scatter / all-gather, and the 2Psi + 2Psi + 12Psi memory model
    tensor    Ch16 tensor parallelism: column/row-parallel linear, Megatron MLP and attention by heads
"""
