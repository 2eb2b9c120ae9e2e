"""The host/agent-rank plumbing that independent Q-learning and COMA share (Chapter 30, Section 4).

Invariants every ``train_*`` relies on to equal its ``reference_*`` loop bit for bit:

    random streams   environment (seed, 0), agent i (seed, 1, i), host fallback actions (seed, 2), so an
                     agent draws the same numbers whichever rank it lives on
    placement        agents 0..n-1 sit on ranks in contiguous blocks (``collectives.block_bounds``)
    faults           the host treats a crashed rank (remembered) or a lost reply as "no answer": None
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import cluster
from ..cluster import Comm
from ..collectives import block_bounds


def _streams(seed: int, n: int) -> tuple[np.random.Generator, list[np.random.Generator], np.random.Generator]:
    return (np.random.default_rng([seed, 0]), [np.random.default_rng([seed, 1, i]) for i in range(n)],
            np.random.default_rng([seed, 2]))


def _owned(n_agents: int, K: int) -> list[range]:
    return [range(lo, hi) for lo, hi in block_bounds(n_agents, K)]


def _host_recv(comm: Comm, r: int, dead: set[int]) -> np.ndarray | None:
    """Rank r's reply, or None when it crashed (remembered) or the message was lost."""
    if r in dead:
        return None
    try:
        return comm.recv(r)
    except cluster.PeerCrashedError:
        dead.add(r)
    except cluster.MessageLostError:
        pass
    return None


def _check(steps: int, E: int) -> None:
    if int(steps) != steps or steps < 0 or int(E) != E or E < 1:
        raise ValueError(f"need steps >= 0 and E >= 1 copies, got steps={steps}, E={E}")


def _collect(res: Any) -> dict[str, Any]:
    out = dict(res.values[0])
    for v in res.values[1:]:
        if isinstance(v, dict):
            out["Q" if "Q" in v else "theta"].update(v.get("Q", v.get("theta", {})))
    return out
