"""Checkpoint integrity (Chapter 35, Sections 4 and 6): a signed manifest of content hashes per shard.

A sharded checkpoint is a folder of shards ``shard-00000.npy``, ``shard-00001.npy``, ... and a
``MANIFEST.json`` that lists, per shard, its name, byte count and sha256, plus free metadata (the step);
the manifest carries ``hmac`` = HMAC-SHA256(key, canonical JSON of everything else). Every file is
written atomically (a temp file in the same folder, fsync, ``os.replace``, fsync of the folder), and the
manifest is written last: it is the commit point, so a writer that dies earlier leaves a folder that no
loader accepts. A load checks the manifest's HMAC first (an attacker who rewrites a shard and its hash
in the manifest, without the key, is caught there), then every shard's size and hash; a corrupted,
truncated, missing or swapped shard is refused with an ``IntegrityError`` that names it.

Distributed (``save_sharded``): rank r writes shard r and sends its (size, sha256) to rank 0, which writes
the manifest once every shard is on disk; ``load_sharded`` verifies the manifest and its own shard only.
"""
from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..cluster import Comm

__all__ = ["MANIFEST", "IntegrityError", "atomic_write", "shard_name", "step_folder", "sign", "write_manifest",
           "read_manifest", "write_sharded_checkpoint", "load_sharded_checkpoint", "save_sharded", "load_sharded",
           "latest_verified"]

MANIFEST = "MANIFEST.json"
FORMAT = "scaleoutai-sharded/1"


class IntegrityError(ValueError):
    """A checkpoint failed verification; the message names the file and what is wrong with it."""


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the new one, never a torn one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:  # the rename itself must survive a power cut
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on a folder
        pass


def shard_name(i: int) -> str:
    return f"shard-{int(i):05d}.npy"


def step_folder(root: str | os.PathLike, step: int) -> Path:
    return Path(root) / f"step-{int(step):08d}"


def _key(key: bytes) -> bytes:
    if not isinstance(key, (bytes, bytearray)) or len(key) < 16:
        raise ValueError("the HMAC key must be bytes, at least 16 of them (e.g. os.urandom(32)), kept apart from "
                         "the checkpoint")
    return bytes(key)


def sign(body: dict[str, Any], key: bytes) -> str:
    """HMAC-SHA256 of the canonical JSON of ``body`` (sorted keys, no spaces), as hex."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(_key(key), text, hashlib.sha256).hexdigest()


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def write_manifest(folder: str | os.PathLike, entries: list[dict[str, Any]], key: bytes,
                   meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Sign and atomically write the manifest (the commit point); returns it."""
    body = {"format": FORMAT, "shards": entries, "meta": dict(meta or {})}
    manifest = dict(body, hmac=sign(body, key))
    atomic_write(Path(folder) / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
    return manifest


def write_sharded_checkpoint(folder: str | os.PathLike, shards: list[np.ndarray], key: bytes,
                             meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every shard atomically, then the signed manifest; returns the manifest. Chapter 35, Section 4."""
    _key(key)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, arr in enumerate(shards):
        data = _npy(arr)
        atomic_write(folder / shard_name(i), data)
        entries.append({"name": shard_name(i), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return write_manifest(folder, entries, key, meta)


def read_manifest(folder: str | os.PathLike, key: bytes) -> dict[str, Any]:
    """The manifest after its HMAC is checked; IntegrityError if it is missing, torn or not ours."""
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise IntegrityError(f"{folder}: no {MANIFEST}: this checkpoint was never committed (its writer stopped "
                             f"before the manifest); use an older one")
    try:
        manifest = json.loads(path.read_text())
        body = {k: manifest[k] for k in ("format", "shards", "meta")}
        tag = str(manifest["hmac"])
    except (ValueError, KeyError, TypeError):
        raise IntegrityError(f"{path} is not a complete manifest (torn or edited): refusing the checkpoint") from None
    if not hmac.compare_digest(sign(body, key), tag):
        raise IntegrityError(f"{path}: the HMAC does not match: the manifest was edited (or the key is wrong); "
                             f"refusing every shard of this checkpoint")
    return manifest


def _verified_bytes(folder: Path, entry: dict[str, Any], entries: list[dict[str, Any]]) -> bytes:
    name = str(entry["name"])
    if Path(name).name != name:
        raise IntegrityError(f"{folder}: shard name {name!r} is not a plain file name")
    path = folder / name
    if not path.exists():
        raise IntegrityError(f"{path}: {name} is missing")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if hmac.compare_digest(digest, str(entry["sha256"])) and len(data) == entry["bytes"]:
        return data
    twin = [e["name"] for e in entries if e["sha256"] == digest and e["name"] != name]
    if twin:
        raise IntegrityError(f"{path}: {name} holds the content of {twin[0]} (shards swapped)")
    if len(data) != entry["bytes"]:
        raise IntegrityError(f"{path}: {name} has {len(data)} bytes, the manifest says {entry['bytes']} "
                             f"(truncated or padded)")
    raise IntegrityError(f"{path}: {name} does not match its sha256 in the manifest (corrupted)")


def load_sharded_checkpoint(folder: str | os.PathLike, key: bytes, only: list[int] | None = None
                            ) -> tuple[list[np.ndarray], dict[str, Any]]:
    """(shards, meta) after the manifest's HMAC and every requested shard's size and sha256 check out."""
    folder = Path(folder)
    manifest = read_manifest(folder, key)
    entries = manifest["shards"]
    wanted = range(len(entries)) if only is None else only
    out = [np.load(io.BytesIO(_verified_bytes(folder, entries[i], entries)), allow_pickle=False) for i in wanted]
    return out, manifest["meta"]


def save_sharded(comm: Comm, folder: str | os.PathLike, shard: np.ndarray, key: bytes,
                 meta: dict[str, Any] | None = None) -> None:
    """Per rank: write shard ``comm.rank``; rank 0 gathers every (bytes, sha256) and commits the manifest.

    Rank 0 waits for each rank in turn (no receive-from-any); a rank that crashes before reporting leaves
    no manifest, so the checkpoint is never committed. A barrier ends the call after the commit.
    """
    _key(key)
    folder = Path(folder)
    if comm.rank == 0:
        folder.mkdir(parents=True, exist_ok=True)
    comm.barrier()  # the folder exists before anyone writes into it
    data = _npy(shard)
    atomic_write(folder / shard_name(comm.rank), data)
    report = np.concatenate([[len(data)], np.frombuffer(hashlib.sha256(data).digest(), np.uint8)]).astype(np.int64)
    if comm.rank != 0:
        comm.send(report, 0)
    else:
        entries = []
        for q in range(comm.size):
            rep = report if q == 0 else comm.recv(q)
            entries.append({"name": shard_name(q), "bytes": int(rep[0]), "sha256": bytes(rep[1:].astype(np.uint8)).hex()})
        write_manifest(folder, entries, key, meta)
    comm.barrier()


def load_sharded(comm: Comm, folder: str | os.PathLike, key: bytes) -> np.ndarray:
    """Per rank: verify the manifest and this rank's own shard, and return it (no messages)."""
    return load_sharded_checkpoint(folder, key, only=[comm.rank])[0][0]


def latest_verified(root: str | os.PathLike, key: bytes) -> tuple[int, list[np.ndarray], dict[str, Any], list[str]]:
    """The newest ``step-*`` folder under ``root`` that verifies: (step, shards, meta, why each newer one was refused)."""
    refused = []
    for folder in sorted(Path(root).glob("step-*"), reverse=True):
        try:
            shards, meta = load_sharded_checkpoint(folder, key)
        except IntegrityError as err:
            refused.append(str(err))
            continue
        return int(folder.name.split("-")[1]), shards, meta, refused
    raise IntegrityError(f"{root}: no checkpoint verifies ({len(refused)} refused): " + " | ".join(refused))
