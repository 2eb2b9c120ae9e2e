"""The one error the capstone tools raise for bad input: a readable line, exit status 2 at the CLI."""
from __future__ import annotations

from ..cli import UserError


class CapstoneError(UserError, ValueError):
    """What was wrong and what to do, in one line (unknown experiment, instance type, bad prices file)."""
