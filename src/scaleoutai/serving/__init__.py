"""Part V, Distributed Inference and Serving (Chapters 22-26): the modules a chapter of Part V teaches.

NumPy, the communicator and the shared layers only; the production stack (torchao, transformers,
Ray Serve, FAISS, MLflow's registry, river) runs beside these in the chapters and the tests.

    decoder           Ch22, 24  a tiny decoder-only language model in NumPy with a pluggable KV cache
    quantize          Ch22  symmetric int8 weights per channel / per tensor, weight-only and dynamic int8 linear
    efficiency        Ch22  KV-cache bytes, prefill/decode FLOPs and bytes on the measured roofline, static
                            batching and padding waste, our weights in a transformers GPT-2
    replicas          Ch23  replicated FIFO servers: routing policies, hedged requests, M/M/1 and Erlang C
    tensor_inference  Ch23  the decoder tensor-parallel over the communicator, equal to dense
    loadgen           Ch23  an open-loop HTTP load generator, and the decoder served by Ray Serve
    paged_cache       Ch24  block allocator (block tables, refcounts, copy-on-write, prefix sharing), paged KV cache
    llm               Ch24  continuous vs static batching over the paged cache, preemption by recompute or swap
    vectors           Ch25  exact k-NN, sharded scatter-gather equal to brute force, recall@k
    ivf               Ch25  k-means coarse quantizer, IVF (nprobe), product quantization
    hnsw              Ch25  HNSW graphs, deterministic given the seed
    rag               Ch25  a generated fact corpus, an extractive reader, RAG accuracy against k
    fleet             Ch26  model registry with aliases, staged canary and shadow rollout with rollback
    drift             Ch26  PSI and KS drift statistics, fleet PSI by one all-reduce, delay and false alarms
"""
