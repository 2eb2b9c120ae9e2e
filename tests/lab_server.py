"""Start `scaleout lab` for a test: a free port, a token, its own Jupyter dirs; always stopped."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from scaleoutai.cluster.procs import free_port, stop

TOKEN = "scaleout-test-token"


def get_json(url: str, token: str = TOKEN) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


@contextlib.contextmanager
def lab_server(cwd: Path, tmp_path: Path, ws: Path | None = None, wait: float = 120):
    """Yield (base url, log path) of a running `scaleout lab`; its process group is ended on exit."""
    port = free_port()
    env = dict(os.environ, JUPYTER_TOKEN=TOKEN, JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"))
    if ws is not None:
        env["SCALEOUT_WORKSPACE"] = str(ws)
    log_path = tmp_path / "lab.log"
    log = log_path.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "scaleoutai.cli", "lab", "--no-browser", "--port", str(port)],
                            cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait
        while True:
            assert proc.poll() is None, f"scaleout lab exited {proc.returncode}:\n{log_path.read_text()}"
            try:
                get_json(f"{base}/api/status")
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, f"JupyterLab did not answer within {wait:g} s"
                time.sleep(0.5)
        yield base, log_path
    finally:
        stop([proc], grace=15)
        log.close()
