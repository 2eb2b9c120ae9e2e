"""Part IV (Chapters 15-21): parallel deep learning from scratch in NumPy, every gradient by hand.

The models and optimizers are the shared ``scaleoutai.nn``; scaling laws and MFU are ``perf.scaling``.
Modules (import them directly; this package imports nothing heavy):
    ddp       Ch15 data parallelism: naive and bucketed all-reduce, gradient accumulation
    zero      Ch16 ZeRO stages 1-3 over reduce-scatter / all-gather, and the 2Psi + 2Psi + 12Psi memory model
    tensor    Ch16 tensor parallelism: column/row-parallel linear, Megatron MLP and attention by heads
    pipeline  Ch16 GPipe and 1F1B schedules, the bubble (p-1)/(m+p-1), activation checkpointing
    moe_dense Ch17 the single-machine MoE layer: router, top-k gating, capacity factor, load-balancing loss
    moe       Ch17 expert parallelism: all-to-all dispatch/combine (re-exports moe_dense)
    elastic   Ch18 atomic checkpoints, resume, re-sharding from K to K' workers
    mesh      Ch19 DP x TP x PP on a device mesh (cluster.groups), memory and communication model
    rl        Ch20 actor-learner reinforcement learning with V-trace off-policy correction
    hpo       Ch21 the trial driver; re-exports hpo_search (random search), hpo_halving (successive
              halving, ASHA), hpo_pbt (population-based training) and hpo_objectives
"""
