"""Timeline of a traced run: one lane per rank, a bar per send/recv, an arrow per message (Chapter 4)."""
from __future__ import annotations

from typing import Any

from .core import RunResult


def plot_timeline(result: RunResult, ax: Any = None, title: str | None = None) -> Any:
    import matplotlib.pyplot as plt

    if result.trace is None:
        raise ValueError("this run has no trace: call cluster.run(..., trace=True)")
    K = len(result.stats)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.45 * K + 1.5))
    colors = {"send": "tab:blue", "recv": "tab:orange"}
    sends: dict[tuple[int, int], list] = {}
    for e in result.trace:
        width = max(e.end - e.start, 1e-12)
        ax.barh(e.rank + (-0.18 if e.kind == "send" else 0.18), width, left=e.start, height=0.34,
                color=colors[e.kind], edgecolor="none")
        if e.kind == "send":
            sends.setdefault((e.rank, e.peer), []).append(e)
    for e in result.trace:  # match the n-th recv of a pair with the n-th send: FIFO per pair
        if e.kind == "recv":
            queue = sends.get((e.peer, e.rank))
            if queue:
                s = queue.pop(0)
                ax.annotate("", xy=(e.end, e.rank), xytext=(s.end, s.rank),
                            arrowprops=dict(arrowstyle="->", color="gray", lw=0.6, alpha=0.6))
    ax.set_yticks(range(K), [f"rank {r}" for r in range(K)])
    ax.invert_yaxis()
    unit = "simulated s" if result.backend == "sim" else "wall s"
    ax.set_xlabel(f"time ({unit})")
    ax.set_title(title or f"{result.backend}: sends (blue) and receives (orange)")
    return ax
