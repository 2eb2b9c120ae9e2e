# mutant: takes vector clocks from the course library through an import path a grep does not see
# loses: clocks
import importlib


def vector_clock_run(comm, events):
    lib = importlib.import_module("scaleoutai." + "clo" + "cks")
    return lib.vector_clock_run(comm, events)
