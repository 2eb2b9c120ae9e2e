"""The in-sandbox driver: cells run like a notebook, cases hand back plain data (run here unsandboxed)."""
from __future__ import annotations

import numpy as np

from scaleoutai.grading.driver import _record, exec_cells, run_case

RING_ISH = "import numpy as np\ndef f(comm, x):\n    if comm.size > 1:\n        comm.send(x, (comm.rank + 1) % comm.size)\n        return x + comm.recv((comm.rank - 1) % comm.size)\n    return x"


def test_cells_run_in_order_and_failures_including_sys_exit_are_reported_not_fatal():
    ns: dict = {"__name__": "__main__"}
    report = exec_cells([{"source": "a = 1", "skip": False}, {"source": "import sys; sys.exit(2)", "skip": False},
                         {"source": "b = a + 1", "skip": False}, {"source": "c = 1/0", "skip": True}], ns)
    assert ns["b"] == 2 and "c" not in ns
    assert [r["cell"] for r in report] == [2] and "sys.exit(2)" in report[0]["error"]


def test_spmd_case_on_the_simulator_returns_arrays_and_stats():
    ns: dict = {"__name__": "__main__"}
    exec_cells([{"source": RING_ISH, "skip": False}], ns)
    inputs = {"c/x/0": np.ones(3), "c/x/1": np.full(3, 2.0), "c/x/2": np.full(3, 3.0)}
    case = {"id": "c", "fn": "f", "mode": "spmd", "world_size": 3, "backend": "sim", "args": [{"key": "c/x", "per_rank": True}]}
    meta, arrays, stuck = run_case(ns, case, inputs, 10)
    assert meta["ok"] and not stuck and arrays["r0"].tolist() == [4.0, 4.0, 4.0]
    assert [s["messages_sent"] for s in meta["stats"]] == [1, 1, 1]


def test_process_case_runs_on_two_forked_real_processes():
    ns: dict = {"__name__": "__main__"}
    exec_cells([{"source": RING_ISH, "skip": False}], ns)
    inputs = {"c/x/0": np.ones(2), "c/x/1": np.full(2, 5.0)}
    case = {"id": "c", "fn": "f", "mode": "spmd", "world_size": 2, "backend": "process",
            "args": [{"key": "c/x", "per_rank": True}]}
    meta, arrays, _ = run_case(ns, case, inputs, 60)
    assert meta["ok"], meta
    assert arrays["r0"].tolist() == arrays["r1"].tolist() == [6.0, 6.0] and meta["stats"][1]["bytes_sent"] == 16


def test_missing_function_and_a_stuck_call_are_named():
    meta, _, _ = run_case({}, {"id": "c", "fn": "g", "mode": "call", "args": []}, {}, 1)
    assert "no function named g()" in meta["error"]
    # The stuck thread spins forever (in the sandbox its process is killed): run it in a forked child so
    # it cannot hold this test process's GIL for the rest of the suite.
    import multiprocessing

    def stuck_call(queue) -> None:
        ns: dict = {}
        exec_cells([{"source": "def g():\n    while True:\n        pass", "skip": False}], ns)
        meta, _, stuck = run_case(ns, {"id": "c", "fn": "g", "mode": "call", "args": []}, {}, 0.3)
        queue.put((meta, stuck))

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=stuck_call, args=(queue,), daemon=True)
    child.start()
    try:
        meta, stuck = queue.get(timeout=60)
    finally:
        child.kill()
        child.join(10)
    assert stuck and "did not return within 0.3 s" in meta["error"]


def test_record_keeps_numbers_only():
    arrays: dict = {}
    assert _record([1, 2], "a", arrays)["type"] == "list" and arrays["a"].tolist() == [1, 2]
    assert "stored" not in _record({"x": 1}, "b", arrays) and "b" not in arrays
    assert "not numbers" in _record(np.array(["s"]), "c", arrays)["note"]
