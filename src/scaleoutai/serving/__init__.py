"""Part V, Distributed Inference and Serving (Chapters 22-26): the modules a chapter of Part V teaches.

NumPy, the communicator and the shared layers only; the production stack (torchao, transformers,
Ray Serve, FAISS, MLflow's registry) runs beside these in the chapters and the tests.

    decoder    Ch22, 24  a tiny decoder-only language model in NumPy with a pluggable KV cache
"""
