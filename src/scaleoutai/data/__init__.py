"""Part II, Distributed Data Processing (Chapters 6-9): the modules a chapter of Part II teaches.

    mapreduce   Ch6  map, hash-partition, shuffle over the communicator, combine, reduce
                     (mapreduce_tasks: map tasks, a master, heartbeats and speculative backup tasks)
    dataframe   Ch7  partitioned DataFrame, lazy plan cut into stages at shuffles, lineage recompute
                     (dataframe_plan: expressions and plan nodes; dataframe_exec: partitions and stages)
    storage     Ch8  consistent hashing (virtual nodes, replicas), sharded files with offset indexes, read amplification
    sampler     Ch8  the deterministic distributed sampler (torch's DistributedSampler rule; resumable)
    streaming   Ch9  event-time windows, watermarks, micro-batches over the communicator
                     (streaming_sinks: exactly-once via checkpointed offsets and an idempotent sink, Redis
                     Streams consumer groups; streaming_sgd: online SGD under drift; broker: a redis-server)
    spark       Ch7, 9  the one local Spark session (quiet, local[2]) and the settings that make plans comparable
"""
