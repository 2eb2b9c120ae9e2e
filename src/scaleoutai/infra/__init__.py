"""Part VII, Cluster, Edge and Reliable Infrastructure (Chapters 33-35): the modules a chapter of Part VII teaches.

NumPy, the communicator and the shared layers only; the production tools (Slurm, Ray placement groups,
ONNX and onnxruntime, Opacus's accountant) run beside these in the chapters and the tests.

    scheduling     Ch33  discrete-event cluster scheduler: FIFO, EASY and conservative backfill, gang
                         scheduling, dominant resource fairness; makespan, waits, utilisation, fragmentation
    sched_dl       Ch33  deep-learning cluster scheduler (Tiresias-style 2D-LAS): preemption with a restore cost,
                         priority classes, weighted tenant shares, GPU types of different speeds
    edge           Ch34  split inference (the cut layer under latency and bandwidth), offloading over a varying
                         link, int8 compression of the edge half
    reliability    Ch35  Byzantine-robust aggregation (Krum, multi-Krum, median, trimmed mean) against attacks,
                         checkpoint integrity by content hashes, a differential-privacy budget accountant

Companions: ``sched_policies``, ``sched_metrics`` and ``slurm_compare`` (Ch33, the last replays a job set on a
real Slurm); ``offload`` (Ch34, offloading policies over a Markov link); ``robust_agg``, ``integrity`` and
``dp_budget`` (Ch35).
"""
