"""Job slots: with ``--jobs J`` each slot is a grader process of its own, pinned to its own core.

A slot owns a zygote, the hidden tests and every frame its submissions send. A hostile submission that
floods the grader with frames, forks, allocates or spins therefore spends its own slot's core and its
own memory cgroup: the honest submission next to it is parsed by another interpreter on another core
(the GIL of one grader process would otherwise serve both). With one job the slot runs in this process.
Each submission's ``results.json`` is written by its slot, atomically; the parent counts and shows progress.
"""
from __future__ import annotations

import os
import queue
import time
from pathlib import Path
from typing import Callable

from . import results as R
from .jail import Limits
from .labs import Lab, read_cells
from .sandbox import UIDS_PER_SLOT
from .zygote import SetupFailed, Zygote
from ..errors import UserError


def grade_one(hidden, sub, cells: list[dict], zygote: Zygote, base: Path, first_uid: int, cpu: int | None,
              limits: Limits) -> dict:
    """Run every case of one submission in its sandboxes and grade what the grader observed."""
    from .cgroups import peak_mb
    from .engine import RunReport, grade_run
    from .hub import SubmissionRun

    t = time.perf_counter()
    tag = f"s{os.urandom(5).hex()}"
    run = SubmissionRun(zygote, tag, list(range(first_uid, first_uid + UIDS_PER_SLOT)), cpu, str(base / tag),
                        limits, cells, hidden.plan)
    outcomes, setup_error, peak = {}, "", None
    try:
        try:
            run.ensure(1)  # rank 0 runs the cells first: its output is "what your notebook printed"
            for case in hidden.plan.cases:
                outcomes[case.id] = run.run(case)
        except SetupFailed as exc:
            setup_error = str(exc)
        except EOFError:
            run.cells_failure = "exit"  # rank 0 died in the cells
        except TimeoutError:
            run.cells_failure = "timeout"
        peak = peak_mb(tag)
    finally:
        run.close()
    report = RunReport(outcomes, run.cells_report, setup_error, run.confinement, run.cells_failure)
    res = grade_run(hidden, report, cells, limits, wall=time.perf_counter() - t)
    if peak is not None:
        res["scaleout"]["peak_mb"] = round(peak, 1)
    return res


def _grade_slot(lab: Lab, uid: int, cpu: int | None, base: Path, limits: Limits, out: Path,
                take: Callable[[], object], done: Callable[[str, str], None]) -> None:
    """One slot's life: a zygote, the hidden tests, then submissions from ``take`` until it gives None."""
    from .engine import grade_run, load_hidden, unimportable_files

    zygote = Zygote(limits.mode)  # a fresh process, started before the hidden tests are imported
    try:
        hidden = load_hidden(lab)
        limits.unimportable = unimportable_files(hidden, zygote.roots)
        limits.shared = str(getattr(hidden.module, "SHARED_FOLDER", ""))
        while (sub := take()) is not None:
            try:
                cells, problem = (read_cells(sub.notebook) if sub.notebook else None), sub.problem
            except ValueError as exc:
                cells, problem = None, str(exc)
            if cells is None:
                res = grade_run(hidden, None, None, limits, error=problem or "no notebook found")
            else:
                res = grade_one(hidden, sub, cells, zygote, base, uid, cpu, limits)
            R.write_results(out / sub.id / "results.json", res)
            done(sub.id, str(res["scaleout"].get("status")))
    finally:
        zygote.close()


def _slot_main(lab: Lab, uid: int, cpu: int, base: Path, limits: Limits, out: Path, tasks, finished) -> None:
    """A slot's process (spawned): its core, then ``_grade_slot`` fed from the parent's queue."""
    os.sched_setaffinity(0, {cpu})  # the grader's own work for this slot stays on the slot's core
    try:
        _grade_slot(lab, uid, cpu, base, limits, out, tasks.get, lambda sid, st: finished.put((sid, st)))
    except BaseException as exc:  # noqa: BLE001 - the parent reports it; a slot never dies silently
        finished.put(("", f"{type(exc).__name__}: {exc}"[:2000]))
        raise


def run_slots(lab: Lab, todo: list, out: Path, base: Path, uids: list[int], limits: Limits, summary,
              tick: Callable[[int], object]) -> None:
    """Grade ``todo``, one slot per uid block; fills ``summary`` and calls ``tick(1)`` per submission."""
    def done(_sid: str, status: str) -> None:
        summary.graded += 1
        summary.failed += status != "ok"
        tick(1)

    if len(uids) == 1:
        subs = iter(todo)
        _grade_slot(lab, uids[0], None, base, limits, out, lambda: next(subs, None), done)
        return
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # a clean interpreter: no grader thread or lock is copied into a slot
    tasks, finished = ctx.Queue(), ctx.Queue()
    for sub in todo:
        tasks.put(sub)
    cpus = sorted(os.sched_getaffinity(0))
    procs = [ctx.Process(target=_slot_main, daemon=True, name=f"grader-slot-{i}",
                         args=(lab, uid, cpus[i % len(cpus)], base, limits, out, tasks, finished))
             for i, uid in enumerate(uids)]
    for p in procs:
        tasks.put(None)
        p.start()
    try:
        left = len(todo)
        while left:
            try:
                sid, status = finished.get(timeout=0.5)
            except queue.Empty:
                if all(p.exitcode is not None for p in procs):
                    raise RuntimeError("every grading slot ended before the batch was done; rerun to resume") \
                        from None
                continue
            if not sid:
                raise UserError(status) if status.startswith("UserError") else RuntimeError(
                    f"a grading slot failed: {status}; rerun to resume the batch")
            done(sid, status)
            left -= 1
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
