"""Read a capstone experiment back from MLflow and draw its speedup, efficiency and cost (Chapter 41).

Per series (scale, instance type) and world size K the repeats collapse to their median T_p. With a
baseline run (tagged by ``track(..., baseline=True)``) S_p = T_1 / T_p and E_p = S_p / K; without one
the smallest K is the reference (``perf.scaling_table``). Cost per run C = price * instances * T / 3600.
A configuration is on the Pareto front when no other is at least as fast and as cheap and better in one.
"""
from __future__ import annotations

import datetime
import math
import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..perf import run_cost, scaling_table
from ..errors import CapstoneError
from .tracking import quiet_mlflow_logs, tracking_uri

BASELINE = 0  # the workers column of the single-machine baseline row


@dataclass
class Row:
    """One configuration: K workers (0 for the baseline) of one series, medians over its repeats."""

    series: str
    workers: int
    runs: int
    time: float
    speedup: float
    efficiency: float
    cost: float
    throughput: float
    pareto: bool = False

    @property
    def label(self) -> str:
        return "baseline" if self.workers == BASELINE else f"K={self.workers}"


def _num(value: Any, default: float = math.nan) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(out) else out


def load_runs(experiment: str, uri: str | None = None, sweep_id: str | None = None) -> list[dict[str, Any]]:
    """Every run of ``experiment`` as a flat dict (params, metrics, tags); an unknown name lists the known."""
    import mlflow

    quiet_mlflow_logs()
    uri = uri or tracking_uri()
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        names = sorted(e.name for e in client.search_experiments()) or ["none"]
        raise CapstoneError(f"no experiment {experiment!r} in {uri}; available: {', '.join(names)} "
                            "(set MLFLOW_TRACKING_URI or pass --tracking-uri for another store)")
    query = f"tags.`scaleout.sweep` = '{sweep_id}'" if sweep_id else ""
    runs = []
    for r in client.search_runs([exp.experiment_id], filter_string=query, max_results=50_000):
        d: dict[str, Any] = {"run_id": r.info.run_id, "status": r.info.status, **r.data.params}
        d.update(r.data.metrics)
        d["role"] = r.data.tags.get("scaleout.role", "distributed")
        d["trial"] = r.data.tags.get("scaleout.trial", "")
        d["error"] = r.data.tags.get("scaleout.error", "")
        d["verified"] = r.data.tags.get("scaleout.verified", "")
        runs.append(d)
    return runs


def pareto_front(times: Sequence[float], costs: Sequence[float]) -> list[bool]:
    """mask[i] is True when no point j has t_j <= t_i and c_j <= c_i with one of them strict."""
    pts = list(zip(times, costs))
    return [not any(tj <= ti and cj <= ci and (tj < ti or cj < ci) for tj, cj in pts) for ti, ci in pts]


def _cost(run: dict[str, Any]) -> float:
    if "cost" in run:
        return float(run["cost"])
    return float(run_cost(_num(run.get("price_per_hour"), 0.0), _num(run.get("instances"), 1.0), run["wall_time"]))


def aggregate(runs: list[dict[str, Any]]) -> list[Row]:
    """Median T_p, S_p, E_p, cost and throughput per (series, K) over FINISHED runs; Pareto flags set.

    A run whose answer failed its check against the baseline (tag scaleout.verified = false) is left
    out: a fast wrong answer is not a speedup."""
    done = [r for r in runs if r.get("status") == "FINISHED" and _num(r.get("wall_time")) > 0
            and r.get("verified") != "false"]
    if not done:
        raise CapstoneError("no finished run with a wall_time to report on; did the script call "
                            "capstone.track, and did any run succeed?")
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in done:
        series = f"{r.get('scale', '?')}/{r.get('instance_type', '?')}"
        k = BASELINE if r["role"] == "baseline" else int(_num(r.get("world_size"), 1))
        groups.setdefault((series, k), []).append(r)
    all_base = [r["wall_time"] for (s, k), rs in groups.items() if k == BASELINE for r in rs]
    rows: list[Row] = []
    for series in sorted({s for s, _ in groups}):
        base = [r["wall_time"] for r in groups.get((series, BASELINE), [])] or all_base
        t_ref = statistics.median(base) if base else None
        times = {k: statistics.median(r["wall_time"] for r in rs) for (s, k), rs in groups.items()
                 if s == series and k != BASELINE}
        table = {row["p"]: row for row in scaling_table(times, baseline=t_ref)} if times else {}
        if (series, BASELINE) in groups:
            table[BASELINE] = {"time": t_ref, "speedup": 1.0, "efficiency": 1.0}
        for k in sorted(table):
            rs = groups[(series, k)]
            rows.append(Row(series, k, len(rs), table[k]["time"], table[k]["speedup"], table[k]["efficiency"],
                            statistics.median(_cost(r) for r in rs),
                            statistics.median(_num(r.get("throughput")) for r in rs)))
    for row, on in zip(rows, pareto_front([r.time for r in rows], [r.cost for r in rows])):
        row.pareto = on
    return rows


def format_table(rows: list[Row]) -> str:
    """The rows as a markdown table (also readable in a terminal)."""
    lines = ["| series | config | runs | T_p (s) | S_p | E_p | cost (USD) | throughput (items/s) | Pareto |",
             "|---|---|---:|---:|---:|---:|---:|---:|:---:|"]
    for r in rows:
        tput = "-" if math.isnan(r.throughput) else f"{r.throughput:.4g}"
        lines.append(f"| {r.series} | {r.label} | {r.runs} | {r.time:.4g} | {r.speedup:.3f} | {r.efficiency:.3f} "
                     f"| {r.cost:.3g} | {tput} | {'yes' if r.pareto else ''} |")
    return "\n".join(lines)


def _atomic_write(path: Path, write: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def plot_report(rows: list[Row], path: str | os.PathLike, title: str = "") -> Path:
    """2x2 figure: S_p with the ideal line, E_p, cost against K, and time against cost with the front."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 8))
    (ax_s, ax_e), (ax_c, ax_p) = axes
    for series in sorted({r.series for r in rows}):
        rs = [r for r in rows if r.series == series and r.workers != BASELINE]
        ks = [r.workers for r in rs]
        ax_s.plot(ks, [r.speedup for r in rs], "o-", label=series)
        ax_e.plot(ks, [r.efficiency for r in rs], "o-", label=series)
        ax_c.plot(ks, [r.cost for r in rs], "o-", label=series)
    ks = sorted({r.workers for r in rows if r.workers != BASELINE}) or [1]
    ax_s.plot(ks, ks, "k--", lw=1, label="ideal S_p = K")
    ax_e.axhline(1.0, color="k", ls="--", lw=1, label="ideal E_p = 1")
    for ax, name in ((ax_s, "speedup S_p"), (ax_e, "efficiency E_p"), (ax_c, "cost per run (USD)")):
        ax.set_xlabel("workers K")
        ax.set_ylabel(name)
        ax.set_xticks(ks)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax_e.set_ylim(0, max(1.1, max((r.efficiency for r in rows), default=1) * 1.1))
    front = sorted((r for r in rows if r.pareto), key=lambda r: r.time)
    ax_p.scatter([r.time for r in rows], [r.cost for r in rows], c="lightgray", edgecolors="k", label="dominated")
    ax_p.plot([r.time for r in front], [r.cost for r in front], "o-", color="tab:red", label="Pareto front")
    for r in rows:
        ax_p.annotate(r.label, (r.time, r.cost), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax_p.set_xlabel("wall time T_p (s)")
    ax_p.set_ylabel("cost per run (USD)")
    ax_p.grid(alpha=0.3)
    ax_p.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    _atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)
    return path


def default_template() -> Path:
    from .prices import default_prices_path

    return default_prices_path().parent / "REPORT_TEMPLATE.md"


@dataclass
class Report:
    experiment: str
    rows: list[Row]
    png: Path
    markdown: Path
    table: str


def report(experiment: str, out: str | os.PathLike = ".", uri: str | None = None,
           template: str | os.PathLike | None = None) -> Report:
    """Read ``experiment`` back, write ``report.png`` and ``report.md`` (from REPORT_TEMPLATE.md) to ``out``."""
    template = Path(template) if template is not None else default_template()
    if not template.is_file():
        raise CapstoneError(f"no report template at {template}; pass --template PATH (see capstone/REPORT_TEMPLATE.md)")
    runs = load_runs(experiment, uri)
    rows = aggregate(runs)
    out = Path(out)
    png = plot_report(rows, out / "report.png", title=f"experiment {experiment}")
    table = format_table(rows)
    first = next(r for r in runs if r.get("status") == "FINISHED")
    failed = [r for r in runs if r.get("status") != "FINISHED"]
    wrong = [r for r in runs if r.get("status") == "FINISHED" and r.get("verified") == "false"]
    values = {
        "experiment": experiment, "date": datetime.date.today().isoformat(), "table": table,
        "figure": f"![speedup, efficiency and cost]({png.name})", "tracking_uri": uri or tracking_uri(),
        "runs": f"{len(runs)} runs: {sum(r.runs for r in rows)} used, {len(failed)} failed or killed, "
                f"{len(wrong)} failed the check against the baseline",
        "hardware": f"{first.get('cpu_model', '?')}, {first.get('cpu_cores', '?')} cores, GPU: {first.get('gpu', '?')}",
        "prices": "; ".join(sorted({f"{r.get('instance_type')}: {r.get('price_per_hour')} USD/h "
                                    f"({r.get('price_source')}, {r.get('price_date')})" for r in runs})),
    }
    text = template.read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", str(value))
    md = out / "report.md"
    _atomic_write(md, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return Report(experiment, rows, png, md, table)
