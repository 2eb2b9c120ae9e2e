"""Capstone tooling (Chapter 41, also Chapter 5): track runs in MLflow, sweep world sizes, report curves.

    with capstone.track(comm, experiment="logreg", params={"n": n}) as run:   # in the script, every rank
        ...; run.log_items(n)
    capstone.sweep("distributed.py", workers=[1, 2, 4], baseline="baseline.py")   # or `scaleout capstone sweep`
    capstone.report("logreg", out="report/")                                      # or `scaleout capstone report`

Prices come from ``capstone/prices.yaml`` (dated and sourced). MLflow, matplotlib and tqdm load inside
the functions that use them.
"""
from ..errors import CapstoneError
from .prices import Price, PriceTable, load_prices, lookup
from .report import Report, Row, aggregate, format_table, load_runs, pareto_front, plot_report, report
from .sweep import SweepResult, Trial, sweep
from .sweep import summary as sweep_summary
from .tracking import NullRun, Run, hardware, open_experiment, track, tracking_uri

__all__ = ["CapstoneError", "Price", "PriceTable", "load_prices", "lookup", "track", "Run", "NullRun",
           "hardware", "tracking_uri", "open_experiment", "sweep", "sweep_summary", "SweepResult", "Trial", "report", "Report", "Row",
           "aggregate", "format_table", "load_runs", "pareto_front", "plot_report"]
