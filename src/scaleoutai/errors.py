"""Errors a person sees: each message is one readable line saying what was wrong and what to do.

This module imports nothing of ours, so every layer (cluster, perf, the parts, the tooling) can raise
these without importing upward. The ``scaleout`` command turns a ``UserError`` into one line on
stderr and exit status 2; a ``ClusterError`` reaches the caller of a distributed run.
"""
from __future__ import annotations


class UserError(Exception):
    """Bad input from the person at the terminal: printed as one line, exit status 2."""


def interrupted(exc: BaseException | None) -> bool:
    """Whether Ctrl-C (a KeyboardInterrupt) is anywhere in the causes and contexts of ``exc``: some libraries
    turn it into an error of their own while cleaning up, and the user should still see "interrupted"."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class NotebookError(UserError, ValueError):
    """A notebook source, pattern or option the tooling cannot use; the message is one readable line."""


class CapstoneError(UserError, ValueError):
    """What was wrong and what to do, in one line (unknown experiment, instance type, bad prices file)."""


class ClusterError(RuntimeError):
    """Base class of every error a distributed run raises in the caller."""


class RankError(ClusterError):
    """A rank raised: ``.rank`` names it, ``.traceback`` is its formatted traceback."""

    def __init__(self, rank: int, summary: str, traceback: str = ""):
        self.rank = rank
        self.summary = summary
        self.traceback = traceback
        tail = f"\n\n--- traceback of rank {rank} ---\n{traceback}" if traceback else ""
        super().__init__(f"rank {rank} failed: {summary}{tail}")


class RankCrashed(ClusterError):
    """A rank stopped because a crash fault was injected (fail-stop model, Chapter 2)."""

    def __init__(self, rank: int, after_messages: int):
        self.rank = rank
        self.after_messages = after_messages
        super().__init__(f"rank {rank} crashed (injected fault after {after_messages} messages sent)")


class PeerCrashedError(ClusterError):
    """``recv(src)`` found ``src`` crashed with nothing left in flight: a perfect failure detector."""

    def __init__(self, rank: int, peer: int):
        self.rank = rank
        self.peer = peer
        super().__init__(f"rank {rank} waited for rank {peer}, which has crashed; "
                         f"catch cluster.PeerCrashedError to tolerate the fault")


class MessageLostError(ClusterError):
    """``recv(src)`` reached a message that ``Faults(drop=...)`` lost: the receiver's timeout fired at the
    time the message would have arrived (an omission fault seen through a timeout detector)."""

    def __init__(self, rank: int, peer: int):
        self.rank = rank
        self.peer = peer
        super().__init__(f"rank {rank} timed out waiting for a message from rank {peer}: it was lost on the link; "
                         f"catch cluster.MessageLostError to retransmit or go on without it")


class DeadlockError(ClusterError):
    """Every live rank waits and no message can arrive. ``.waiting`` maps rank -> what it waits for."""

    def __init__(self, waiting: dict[int, str]):
        self.waiting = dict(sorted(waiting.items()))
        lines = "; ".join(f"rank {r} waits {w}" for r, w in self.waiting.items())
        super().__init__(f"deadlock: {lines}. Check that every recv has a matching send "
                         f"and that every rank calls barrier() the same number of times.")


class RunTimeout(ClusterError, TimeoutError):
    """The run exceeded its wall-clock timeout; ``.running`` lists the ranks still busy."""

    def __init__(self, timeout: float, running: list[int]):
        self.timeout = timeout
        self.running = running
        super().__init__(f"distributed run exceeded timeout={timeout:g}s; ranks still running: "
                         f"{running}. Raise timeout= or look for a rank stuck in a loop or a recv.")
