"""The open-loop load generator against a local HTTP server: latencies, replies, failures reported."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from scaleoutai.serving.loadgen import open_loop


class _Echo(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("fail"):
            self.send_response(500)
            self.end_headers()
            return
        time.sleep(body.get("sleep", 0.0))
        data = json.dumps({"echo": body["x"]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/"
    finally:
        srv.shutdown()
        srv.server_close()


def test_open_loop_returns_every_reply_in_order_and_its_latency(server):
    lat, replies = open_loop(server, 200.0, [{"x": i, "sleep": 0.02 * (i == 3)} for i in range(20)], seed=1)
    assert [r["echo"] for r in replies] == list(range(20))
    assert lat.shape == (20,) and lat[3] >= 0.02 and np.all(lat > 0)


def test_open_loop_does_not_wait_for_slow_replies_before_sending(server):
    t = time.perf_counter()
    lat, _ = open_loop(server, 100.0, [{"x": i, "sleep": 0.3} for i in range(10)], seed=0)
    assert time.perf_counter() - t < 1.5  # a closed loop would take 10 x 0.3 s
    assert lat.min() >= 0.3


def test_a_failed_request_is_an_error_not_a_missing_sample(server):
    with pytest.raises(RuntimeError, match="1 of 5 requests failed"):
        open_loop(server, 100.0, [{"x": i, "fail": i == 2} for i in range(5)])
