"""Plots for Chapters 3 and 5: the roofline and speedup/efficiency curves (matplotlib loaded lazily)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .models import ridge_point, roofline, scaling_table


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(6, 4))[1]


def plot_roofline(peak_flops: float, peak_bandwidth: float, points: dict[str, float] | None = None,
                  ax: Any = None) -> Any:
    """Log-log roofline: attainable FLOP/s vs arithmetic intensity (FLOP/byte) (Ch 3).

    ``points`` maps a kernel's name to its intensity; each is drawn on the roof it hits.
    Returns the Axes; its first line is the roof.
    """
    ridge = ridge_point(peak_flops, peak_bandwidth)
    points = dict(points or {})
    xs = [ridge / 100, ridge * 100, *[v for v in points.values() if v > 0]]
    x = np.geomspace(min(xs) / 2, max(xs) * 2, 256)
    ax = _axes(ax)
    ax.loglog(x, roofline(x, peak_flops, peak_bandwidth), color="k", lw=2, label="roofline")
    ax.axvline(ridge, color="gray", ls=":", lw=1)
    ax.text(np.sqrt(x[0] * ridge), peak_flops * 1.15, "memory-bound", ha="center", va="bottom")
    ax.text(np.sqrt(ridge * x[-1]), peak_flops * 1.15, "compute-bound", ha="center", va="bottom")
    for name, intensity in points.items():
        y = roofline(intensity, peak_flops, peak_bandwidth)
        ax.plot([intensity], [y], "o", label=f"{name} (I = {intensity:.3g})")
    ax.set_ylim(top=peak_flops * 3)
    ax.set_xlabel("arithmetic intensity I (FLOP/byte)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title(f"roofline (ridge at I = {ridge:.3g} FLOP/byte)")
    ax.legend(loc="lower right", fontsize="small")
    return ax


def plot_scaling(times: dict[int, float], ax: Any = None, title: str | None = None) -> Any:
    """Speedup S_p (left axis, with the ideal line) and efficiency E_p (twin right axis) vs p (Ch 5).

    Returns the left Axes (lines: measured S_p, ideal); the twin holds E_p and the E = 1 line.
    """
    rows = scaling_table(times)
    p = np.array([r["p"] for r in rows], dtype=float)
    s = np.array([r["speedup"] for r in rows])
    e = np.array([r["efficiency"] for r in rows])
    ax = _axes(ax)
    ax.plot(p, s, "o-", color="C0", label="speedup $S_p$")
    ax.plot(p, p / p[0], "--", color="gray", label="ideal")
    ax.set_xlabel("workers p")
    ax.set_ylabel("speedup $S_p$", color="C0")
    if p[-1] / p[0] >= 8:  # log-log keeps the ideal line straight over a wide sweep
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
    right = ax.twinx()
    right.plot(p, e, "s-", color="C1", label="efficiency $E_p$")
    right.axhline(1.0, color="C1", ls=":", lw=1)
    right.set_ylim(0, max(1.1, float(e.max()) * 1.1))
    right.set_ylabel("efficiency $E_p$", color="C1")
    handles = ax.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    ax.legend(handles[0] + more[0][:1], handles[1] + more[1][:1], loc="upper center",
              bbox_to_anchor=(0.5, -0.15), ncol=3, fontsize="small")
    ax.set_title(title or "strong scaling")
    return ax
