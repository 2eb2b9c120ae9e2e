"""Sub-communicators and the device mesh: any group of ranks is a communicator of its own.

``SubComm(comm, ranks)`` presents ``ranks`` as a ``Communicator`` (rank = index in the group, size =
len(ranks)): the base class checks peers and counts this group's traffic, so every Chapter 4
collective and every per-rank function of a part runs on a sub-group unchanged.

``DeviceMesh(dp, tp, pp)``: K = dp * tp * pp ranks; rank = (p * dp + d) * tp + t, so the tp group is the
fastest-varying (consecutive ranks: one node's NVLink domain), then dp, then pp (Megatron-LM's order;
Chapter 19). Two distinct ranks share at most one axis group, so the per-pair FIFO order of the
underlying links cannot mix groups.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .core import Communicator

__all__ = ["AXES", "DeviceMesh", "SubComm"]

AXES = ("dp", "tp", "pp")


class DeviceMesh:
    """P = dp * tp * pp ranks; rank = (p * dp + d) * tp + t; groups along one axis vary only that coordinate."""

    def __init__(self, dp: int, tp: int, pp: int):
        for name, v in (("dp", dp), ("tp", tp), ("pp", pp)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"DeviceMesh needs integer degrees >= 1, got {name}={v!r}")
        self.dp, self.tp, self.pp = int(dp), int(tp), int(pp)
        self.shape = {"dp": self.dp, "tp": self.tp, "pp": self.pp}
        self.size = self.dp * self.tp * self.pp

    def __repr__(self) -> str:
        return f"DeviceMesh(dp={self.dp}, tp={self.tp}, pp={self.pp})"

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(d, t, p) of a global rank."""
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} is not in the mesh: ranks are 0..{self.size - 1}")
        t, rest = rank % self.tp, rank // self.tp
        return rest % self.dp, t, rest // self.dp

    def rank(self, d: int, t: int, p: int) -> int:
        """Inverse of ``coords``."""
        if not (0 <= d < self.dp and 0 <= t < self.tp and 0 <= p < self.pp):
            raise ValueError(f"coordinates (d={d}, t={t}, p={p}) are outside {self!r}")
        return (p * self.dp + d) * self.tp + t

    def group(self, rank: int, axis: str) -> list[int]:
        """Global ranks that share every coordinate of ``rank`` except ``axis``, ordered by that coordinate."""
        if axis not in AXES:
            raise ValueError(f"axis={axis!r} is unknown: choose one of {AXES}")
        c = dict(zip(AXES, self.coords(rank)))
        out = []
        for i in range(self.shape[axis]):
            c[axis] = i
            out.append(self.rank(c["dp"], c["tp"], c["pp"]))
        return out

    def groups(self, axis: str) -> list[list[int]]:
        """All groups along ``axis`` (each rank in exactly one), sorted by their first rank."""
        return [list(g) for g in sorted({tuple(self.group(r, axis)) for r in range(self.size)})]


class SubComm(Communicator):
    """A sub-group of ``comm``'s ranks as a communicator: rank = index in ``ranks``, size = len(ranks).

    Sends and receives translate group ranks to the parent's; ``barrier`` is a gather-release among the
    group only; ``stats`` counts this group's traffic (the parent's count everything).
    """

    backend = "group"

    def __init__(self, comm: Communicator, ranks: Sequence[int]):
        ranks = [int(r) for r in ranks]
        if len(set(ranks)) != len(ranks) or not all(0 <= r < comm.size for r in ranks):
            raise ValueError(f"SubComm ranks must be distinct ranks of 0..{comm.size - 1}, got {ranks}")
        if comm.rank not in ranks:
            raise ValueError(f"rank {comm.rank} is not in the group {ranks}: only its members may build it")
        super().__init__(ranks.index(comm.rank), len(ranks))
        self.parent, self.ranks = comm, ranks

    def __repr__(self) -> str:
        return f"<SubComm rank={self.rank} size={self.size} of global {self.ranks}>"

    def _send(self, arr: np.ndarray, dst: int) -> None:
        self.parent.send(arr, self.ranks[dst])
        self._count_send(arr.nbytes)

    def _recv(self, src: int) -> np.ndarray:
        out = self.parent.recv(self.ranks[src])
        self._count_recv(out.nbytes)
        return out

    def _recv_into(self, src: int, out: np.ndarray) -> np.ndarray:
        got = self.parent.recv(self.ranks[src], out=out)  # still a posted receive on the parent
        self._count_recv(got.nbytes)
        return got

    def _sendrecv(self, arr: np.ndarray, dst: int, src: int, out: np.ndarray | None) -> np.ndarray:
        got = self.parent.sendrecv(arr, self.ranks[dst], self.ranks[src], out=out)
        self._count_send(arr.nbytes)
        self._count_recv(got.nbytes)
        return got

    def barrier(self) -> None:
        """Every member sends a token to group rank 0, which answers each once all have arrived."""
        token = np.zeros(0, np.uint8)
        if self.rank == 0:
            for r in range(1, self.size):
                self.recv(r)
            for r in range(1, self.size):
                self.send(token, r)
        else:
            self.send(token, 0)
            self.recv(0)

    def compute(self, seconds: float) -> None:
        self.parent.compute(seconds)
