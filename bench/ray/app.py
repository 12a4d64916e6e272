"""The Ray Serve side of modelmux's multiplexing benchmark.

The deployment follows Ray's model multiplexing guide: `@serve.multiplexed(max_num_models_per_replica=N)`
on a loader, `serve.get_multiplexed_model_id()` in the request handler, R replicas. It loads the same
ONNX models from the same store as modelmux (an S3-compatible endpoint through boto3, or a folder;
model ID at `<source>/<ID>/model.onnx`) into onnxruntime, the engine modelmux's replica runs, and
accepts the same rows body (`{"instances": [row, ...]}`), answered with `{"predictions": [[q], ...]}`.

Per-model dynamic batching is Ray's own `@serve.batch`, which splits a batch by multiplexed model ID,
so both systems can be given the same batch size and wait.

Every model load appends one line to the load log (O_APPEND from every replica process), so the load
generator counts Ray's loads the way it reads modelmux's load counters from /metrics.

With a cache folder, the loader keeps every downloaded file there (one folder for all replicas of the
machine, as modelmux's replicas share theirs) and a later load of the same model reads it from disk
instead of the store: the same on-disk download cache modelmux has, so the two differ by architecture.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, List, Optional
from urllib.parse import urlparse

import numpy as np
import onnxruntime as ort
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

WINE_INPUT = "features"  # common/wine-model.ts WINE_INPUT
WINE_FEATURES = 11


@dataclass(frozen=True)
class Settings:
    model_source: str  # s3://bucket/prefix or file:///dir
    s3_endpoint: Optional[str]
    s3_region: str
    replicas: int
    max_models_per_replica: int
    max_ongoing_requests: int
    max_batch_size: int
    batch_wait_timeout_s: float
    session_options: str  # "modelmux" (the replica's own) or "default" (onnxruntime's)
    load_log: Optional[str]
    cache_dir: Optional[str]  # on-disk download cache shared by the replicas; None downloads on every load
    log_level: str  # Serve's logging_config log_level of the replicas, e.g. "WARNING"
    access_log: bool  # Serve's enable_access_log of the replicas


def _session_options(kind: str) -> ort.SessionOptions:
    opts = ort.SessionOptions()
    if kind == "modelmux":
        # Exactly what modelmux's replica creates its sessions with (replica/onnx-runtime.ts), so
        # the two systems differ by architecture, not by onnxruntime tuning.
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
        opts.add_session_config_entry("session.disable_prepacking", "1")
    return opts


class LoadedModel:
    """One onnxruntime session; Serve drops it on LRU eviction, and __del__ releases it then."""

    def __init__(self, model_id: str, data: bytes, session_options: str) -> None:
        self.model_id = model_id
        self.session = ort.InferenceSession(data, sess_options=_session_options(session_options), providers=["CPUExecutionProvider"])
        self.bytes = len(data)

    def run(self, rows: np.ndarray) -> np.ndarray:
        (out,) = self.session.run(None, {WINE_INPUT: rows})
        return out

    def __del__(self) -> None:
        self.session = None


class ModelNotFound(Exception):
    pass


def _fetch(settings: Settings, s3_client: Any, model_id: str) -> tuple[bytes, bool]:
    """The model file's bytes, and whether they came from the store (False: the disk cache)."""
    if settings.cache_dir:
        cached = os.path.join(settings.cache_dir, model_id, "model.onnx")
        try:
            with open(cached, "rb") as f:
                return f.read(), False
        except FileNotFoundError:
            pass
        data = _download(settings, s3_client, model_id)
        os.makedirs(os.path.dirname(cached), exist_ok=True)
        # Write then rename: another replica never reads a torn file.
        tmp = f"{cached}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, cached)
        return data, True
    return _download(settings, s3_client, model_id), True


def _download(settings: Settings, s3_client: Any, model_id: str) -> bytes:
    url = urlparse(settings.model_source)
    if url.scheme == "file":
        path = os.path.join(url.path, model_id, "model.onnx")
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError as e:
            raise ModelNotFound(model_id) from e
    key = "/".join(p for p in (url.path.strip("/"), model_id, "model.onnx") if p)
    try:
        return s3_client.get_object(Bucket=url.netloc, Key=key)["Body"].read()
    except s3_client.exceptions.NoSuchKey as e:
        raise ModelNotFound(model_id) from e


def _valid_model_id(model_id: str) -> bool:
    # The same rule as common/model-id.ts in spirit: never let an id walk the store.
    return 0 < len(model_id) <= 128 and "/" not in model_id and ".." not in model_id and model_id.isprintable()


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status)


def build_app(settings: Settings):
    """The application for `settings`: the multiplexing bound is fixed at decoration time."""

    @serve.deployment(
        name="WineMux",
        num_replicas=settings.replicas,
        max_ongoing_requests=settings.max_ongoing_requests,
        ray_actor_options={"num_cpus": 0},
        # The same log level and access-log setting as modelmux's processes in the benchmark.
        logging_config={"log_level": settings.log_level, "enable_access_log": settings.access_log},
    )
    class WineMux:
        def __init__(self, s: dict) -> None:
            self.settings = Settings(**s)
            self.s3 = None
            if self.settings.model_source.startswith("s3://"):
                import boto3
                from botocore.config import Config

                self.s3 = boto3.client(
                    "s3",
                    endpoint_url=self.settings.s3_endpoint,
                    region_name=self.settings.s3_region,
                    config=Config(s3={"addressing_style": "path"}, max_pool_connections=16),
                )
            self.loads = 0

        @serve.multiplexed(max_num_models_per_replica=settings.max_models_per_replica)
        async def get_model(self, model_id: str) -> LoadedModel:
            started = time.monotonic()
            # Download and session creation block: off the replica's event loop, as aioboto3 is in the guide.
            data, downloaded = await asyncio.to_thread(_fetch, self.settings, self.s3, model_id)
            model = await asyncio.to_thread(LoadedModel, model_id, data, self.settings.session_options)
            self.loads += 1
            if self.settings.load_log:
                ms = round((time.monotonic() - started) * 1000, 1)
                line = json.dumps({"model": model_id, "ms": ms, "downloaded": downloaded, "pid": os.getpid()}) + "\n"
                fd = os.open(self.settings.load_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, line.encode())
                finally:
                    os.close(fd)
            return model

        async def _infer_one(self, rows: np.ndarray) -> np.ndarray:
            model = await self.get_model(serve.get_multiplexed_model_id())
            return model.run(rows)

        @serve.batch(max_batch_size=max(1, settings.max_batch_size), batch_wait_timeout_s=settings.batch_wait_timeout_s)
        async def _infer_batch(self, batch: List[np.ndarray]) -> List[np.ndarray]:
            # Serve splits a batch by multiplexed model ID, so one batch is one model.
            model = await self.get_model(serve.get_multiplexed_model_id())
            sizes = [len(r) for r in batch]
            out = model.run(np.concatenate(batch, axis=0))
            return list(np.split(out, np.cumsum(sizes)[:-1]))

        async def __call__(self, request: Request) -> Response:
            if request.method == "GET":
                return JSONResponse({"ready": True, "loads": self.loads})
            model_id = serve.get_multiplexed_model_id()
            if not model_id:
                return _error(400, "missing_model_id", "set the serve_multiplexed_model_id header")
            if not _valid_model_id(model_id):
                return _error(400, "invalid_model_id", "model id must be 1-128 printable characters without / or ..")
            try:
                body = json.loads(await request.body())
                rows_raw = body["instances"] if isinstance(body, dict) else body
                rows = np.asarray(rows_raw, dtype=np.float32)
                if rows.ndim == 1:
                    rows = rows[None, :]
                if rows.ndim != 2 or rows.shape[1] != WINE_FEATURES:
                    raise ValueError(f"rows must have {WINE_FEATURES} features")
            except (ValueError, KeyError, TypeError) as e:
                return _error(400, "invalid_request", str(e))
            try:
                if self.settings.max_batch_size > 1:
                    out = await self._infer_batch(rows)
                else:
                    out = await self._infer_one(rows)
            except ModelNotFound:
                return _error(404, "model_not_found", f"model {model_id} is not in the store")
            return JSONResponse({"predictions": out.tolist()}, headers={"x-bench-replica": str(os.getpid())})

    return WineMux.bind(asdict(settings))
