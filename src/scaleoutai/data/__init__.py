"""Part II, Distributed Data Processing (Chapters 6-9): the modules a chapter of Part II teaches.

    mapreduce   Ch6  map, hash-partition, shuffle over the communicator, combine, reduce
"""
