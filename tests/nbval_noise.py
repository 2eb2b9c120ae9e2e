"""A pytest plugin for the nbval run of a chapter: it keeps what each cell wrote to stderr (warnings, library
logs, progress bars of libraries; ipykernel forwards C and JVM output there too) and every widget it drew (a
library's progress bar once ipywidgets is installed), and writes them as JSON to the
file named by ``SCALEOUT_NOISE_OUT``, one ``[first line of the cell, text]`` pair per stderr stream (issue 33,
item 6).

Loaded by ``tests/test_notebooks.py`` with ``-p nbval_noise``; nbval's cell items keep their outputs in
``test_outputs``, so nothing runs twice."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

_FOUND: list[tuple[str, str]] = []


def _start_kernel_as_jupyter_does(original):
    """ipykernel forwards what native code writes to descriptor 2 (a JVM, a C++ profiler) into the cell, as
    JupyterLab shows it, unless PYTEST_CURRENT_TEST is in its environment; nbval starts its kernel from
    inside a test, so without this that output would bypass the check."""
    def start(*args, **kwargs):
        kwargs.setdefault("env", {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"})
        return original(*args, **kwargs)
    return start


def pytest_configure(config):
    import nbval.kernel

    nbval.kernel.start_new_kernel = _start_kernel_as_jupyter_does(nbval.kernel.start_new_kernel)
WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield
    outs = getattr(item, "test_outputs", None) or []
    source = str(getattr(getattr(item, "cell", None), "source", ""))
    first = next((ln for ln in source.splitlines() if ln.strip() and not ln.startswith("#")), "")
    for out in outs:
        if out.get("output_type") == "stream" and out.get("name") == "stderr":
            _FOUND.append((first[:120], "".join(out.get("text", ""))))
        data = out.get("data") or {}
        if WIDGET in data:  # a library's progress bar drawn as a widget (tqdm.auto with ipywidgets)
            text = data.get("text/plain", "")
            _FOUND.append((first[:120], "[widget] " + ("".join(text) if isinstance(text, list) else str(text))))


def pytest_sessionfinish(session, exitstatus):
    target = os.environ.get("SCALEOUT_NOISE_OUT")
    if target:
        tmp = Path(target).with_suffix(".tmp")
        tmp.write_text(json.dumps(_FOUND))
        tmp.replace(target)
