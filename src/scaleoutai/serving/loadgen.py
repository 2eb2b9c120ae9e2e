"""An open-loop HTTP load generator for a served model (Chapter 23, Section 5).

Open loop: request i leaves at its Poisson time whether or not earlier requests returned, as real
users do; a closed loop (send, wait, send) would slow down with the server and hide its queueing.
Each request runs on its own thread and is timed from send to reply.
"""
from __future__ import annotations

import json
import threading
import time
import urllib.request
from typing import Any

import numpy as np


def post_json(url: str, body: Any, timeout: float = 60.0) -> tuple[float, Any]:
    """POST ``body`` as JSON; returns (seconds from send to reply, the decoded reply)."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        reply = json.loads(resp.read())
    return time.perf_counter() - t, reply


def open_loop(url: str, rate: float, bodies: list[Any], seed: int = 0, timeout: float = 60.0
              ) -> tuple[np.ndarray, list[Any]]:
    """Send ``bodies`` at Poisson times of ``rate`` per second; returns (latencies in s, replies).

    A request that fails or never returns raises here, naming how many did, instead of being dropped
    from the percentiles (a dropped slow request would flatter the tail).
    """
    if rate <= 0:
        raise ValueError(f"rate must be > 0 requests per second, got {rate}")
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=len(bodies))
    out: list[Any] = [None] * len(bodies)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            out[i] = post_json(url, bodies[i], timeout)
        except BaseException as exc:  # recorded and re-raised below for the caller
            errors.append(exc)

    threads, due = [], time.perf_counter()
    for i in range(len(bodies)):
        due += gaps[i]
        time.sleep(max(0.0, due - time.perf_counter()))
        threads.append(threading.Thread(target=one, args=(i,), daemon=True))
        threads[-1].start()
    for th in threads:
        th.join(timeout=timeout + 5)
    missing = sum(o is None for o in out)
    if errors or missing:
        raise RuntimeError(f"{missing} of {len(bodies)} requests failed or never returned"
                           + (f"; the first error: {errors[0]!r}" if errors else ""))
    return np.array([o[0] for o in out]), [o[1] for o in out]


def start_decoder_service(config: dict[str, Any], replicas: int = 2, num_cpus: float = 0.5,
                          port: int | None = None) -> str:
    """Serve the tiny decoder's next token with Ray Serve (``replicas`` actors behind its HTTP proxy on
    127.0.0.1); returns the URL. Ray must be initialised; the caller calls ``serve.shutdown()``.

    POST ``{"tokens": [...]}`` -> ``{"next": argmax of the last logits, "pid": the replica's process}``.
    """
    from ray import serve

    from ..cluster.procs import free_port

    @serve.deployment(num_replicas=replicas, ray_actor_options={"num_cpus": num_cpus})
    class NextToken:
        def __init__(self, cfg: dict[str, Any]):
            import os

            from .decoder import decoder_init
            self.params, self.pid = decoder_init(**cfg), os.getpid()

        async def __call__(self, request: Any) -> dict[str, int]:
            from .decoder import decoder_forward
            tokens = np.array([(await request.json())["tokens"]])
            return {"next": int(np.argmax(decoder_forward(self.params, tokens)[0, -1])), "pid": self.pid}

    port = port or free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(NextToken.bind(config), route_prefix="/next", blocking=False)
    return f"http://127.0.0.1:{port}/next"
