"""``scaleout lab``: JupyterLab on the student's workspace, landing on the course index.

The server's root is the workspace (``workspace.py``): generated ``.ipynb`` copies of the chapters and
the released labs, so opening, running and saving never touch a tracked file of the course. Where a
py:percent file is opened anyway, jupytext's server extension (enabled by its install) serves a ``.py`` file as a notebook when asked
for ``type=notebook``, and its lab extension registers the "Jupytext Notebook" viewer. A double-click
uses the default viewer of the file type, which for ``python`` is the text editor; we make it
"Jupytext Notebook" through ``@jupyterlab/docmanager-extension:plugin`` ``defaultViewers`` written to
an ``overrides.json`` in an app settings dir of our own (_build/lab/settings), so nothing outside the
repository changes and a person's own saved settings still win.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from .sources import find_repo_root

DEFAULT_VIEWERS = {"python": "Jupytext Notebook"}
DOCMANAGER = "@jupyterlab/docmanager-extension:plugin"
# No "would you like to receive news?" pop-up on a student's first start, and no request to a website:
# the lab runs offline on a laptop or a cluster node.
NOTIFICATION = "@jupyterlab/apputils-extension:notification"
QUIET = {"fetchNews": "false", "checkForUpdates": False}


def _merge(base: dict, extra: dict) -> dict:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def write_app_settings(root: Path) -> Path:
    """Create ``root/_build/lab/settings``: the installed app settings plus our defaultViewers, news off."""
    from jupyterlab.commands import get_app_dir

    target = Path(root) / "_build" / "lab" / "settings"
    target.mkdir(parents=True, exist_ok=True)
    installed = Path(get_app_dir()) / "settings"
    overrides: dict = {}
    if installed.is_dir():
        # Keep what the installation configured (page_config.json, overrides.d) in force.
        for entry in installed.iterdir():
            if entry.name.startswith("overrides.json"):
                continue
            copy = shutil.copytree if entry.is_dir() else shutil.copy2
            copy(entry, target / entry.name, **({"dirs_exist_ok": True} if entry.is_dir() else {}))
        if (installed / "overrides.json").is_file():
            overrides = json.loads((installed / "overrides.json").read_text(encoding="utf-8"))
    _merge(overrides, {DOCMANAGER: {"defaultViewers": DEFAULT_VIEWERS}, NOTIFICATION: dict(QUIET)})
    tmp = target / "overrides.json.tmp"
    tmp.write_text(json.dumps(overrides, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, target / "overrides.json")
    return target


def lab_argv(root: Path, port: int | None = None, open_browser: bool = True, ws: Path | None = None) -> list[str]:
    """Command-line options for LabApp: localhost only, rooted at the workspace, opening its index."""
    root = Path(root).resolve()
    ws = Path(ws).resolve() if ws is not None else root
    argv = [
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={ws}",
        f"--LabApp.app_settings_dir={write_app_settings(root)}",
        # Saving from the notebook view writes the .py back; keep it free of a jupytext YAML header.
        "--ContentsManager.notebook_metadata_filter=-all",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # Course containers often run as root; the server listens on localhost only.
        argv.append("--ServerApp.allow_root=True")
    if (ws / "index.ipynb").is_file():
        argv.append("--LabApp.default_url=/lab/tree/index.ipynb")
    elif (ws / "chapters").is_dir():
        argv.append("--ServerApp.default_url=/lab/tree/chapters")
    if port is not None:
        argv += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if not open_browser:
        argv.append("--ServerApp.open_browser=False")
    return argv


def lab(port: int | None = None, open_browser: bool = True, root: Path | None = None) -> int:
    """Build the workspace, then run JupyterLab on it in this process until it is stopped (Ctrl-C)."""
    import time

    from jupyterlab.labapp import LabApp

    from .workspace import build_workspace, default_workspace

    root = root or find_repo_root()
    ws = default_workspace(root)
    t0 = time.perf_counter()
    report = build_workspace(root, ws)
    print(f"[scaleout lab] workspace {ws} ready in {time.perf_counter() - t0:.1f} s: {len(report.written)} "
          f"copies written, {len(report.unchanged)} unchanged", flush=True)
    for rel in report.kept:
        print(f"[scaleout lab] you edited {rel}; the course's new version is beside it as "
              f"{Path(rel).stem}.updated{Path(rel).suffix}", flush=True)
    print("[scaleout lab] starting JupyterLab (the course files are never modified from here)", flush=True)
    LabApp.launch_instance(argv=lab_argv(root, port, open_browser, ws))
    return 0
