"""Starts a local Ray cluster (no network beyond 127.0.0.1) and the multiplexing app of app.py on it.

Prints one line `MODE ...` (Serve's HAProxy, throughput-optimised and direct-ingress switches as
Serve read them from the environment: RAY_SERVE_ENABLE_HA_PROXY=1 and RAY_SERVE_THROUGHPUT_OPTIMIZED=1
turn on its high-throughput ingress), then `READY <url>` on stdout when the app answers, then serves
until SIGTERM/SIGINT, and shuts Serve and Ray down. Run with the bench venv's python (test/tools/install-bench.sh):

  ~/.cache/modelmux/bench-venv/bin/python bench/ray/run_ray.py --port 8000 --replicas 2 \
      --max-models 8 --model-source s3://models/wine --s3-endpoint http://127.0.0.1:PORT --load-log /tmp/loads
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import urllib.request

# Nothing leaves the machine: no usage reports; the dashboard is off below.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray  # noqa: E402
import ray.cloudpickle  # noqa: E402
from ray import serve  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import app as app_module  # noqa: E402

# Replicas run in other processes that cannot import bench/ray: ship the app's code by value.
ray.cloudpickle.register_pickle_by_value(app_module)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--route-prefix", default="/")
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--max-models", type=int, default=3, help="max_num_models_per_replica")
    p.add_argument("--max-ongoing-requests", type=int, default=16)
    p.add_argument("--max-batch-size", type=int, default=1, help="1: no @serve.batch")
    p.add_argument("--batch-wait-ms", type=float, default=0)
    p.add_argument("--session-options", choices=["modelmux", "default"], default="modelmux", help="onnxruntime session options: modelmux's replica's, or onnxruntime's defaults")
    p.add_argument("--model-source", required=True, help="s3://bucket/prefix or file:///dir")
    p.add_argument("--s3-endpoint", default=None)
    p.add_argument("--s3-region", default="us-east-1")
    p.add_argument("--load-log", default=None, help="file that gets one line per model load")
    p.add_argument("--num-cpus", type=int, default=os.cpu_count() or 1)
    p.add_argument("--cache-dir", default=None, help="on-disk download cache shared by the replicas (default: none, download on every load)")
    p.add_argument("--log-level", default="WARNING", help="Serve's log level for the replicas, proxy and controller")
    p.add_argument("--access-log", choices=["true", "false"], default="false", help="Serve's per-request access log")
    p.add_argument("--temp-dir", default=None, help="Ray's session folder, so two clusters can run side by side")
    a = p.parse_args()

    settings = app_module.Settings(
        model_source=a.model_source,
        s3_endpoint=a.s3_endpoint,
        s3_region=a.s3_region,
        replicas=a.replicas,
        max_models_per_replica=a.max_models,
        max_ongoing_requests=a.max_ongoing_requests,
        max_batch_size=a.max_batch_size,
        batch_wait_timeout_s=a.batch_wait_ms / 1000.0,
        session_options=a.session_options,
        load_log=a.load_log,
        cache_dir=a.cache_dir,
        log_level=a.log_level,
        access_log=a.access_log == "true",
    )
    from ray.serve._private import constants

    print(
        f"MODE ha_proxy={int(constants.RAY_SERVE_ENABLE_HA_PROXY)} throughput_optimized={int(constants.RAY_SERVE_THROUGHPUT_OPTIMIZED)} "
        f"direct_ingress={int(constants.RAY_SERVE_ENABLE_DIRECT_INGRESS)}",
        flush=True,
    )

    # Every Ray process binds to loopback: the benchmark never listens on a public interface.
    ray.init(
        num_cpus=a.num_cpus,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        address="local",  # always a cluster of its own, never one found on the machine
        _node_ip_address="127.0.0.1",
        **({"_temp_dir": a.temp_dir} if a.temp_dir else {}),
    )
    serve.start(
        http_options={"host": a.host, "port": a.port},
        logging_config={"log_level": a.log_level, "enable_access_log": a.access_log == "true"},
    )
    serve.run(app_module.build_app(settings), name="wine", route_prefix=a.route_prefix)

    url = f"http://{a.host}:{a.port}{a.route_prefix.rstrip('/')}/"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    print(f"READY {url}", flush=True)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    # serve.shutdown() waits for replicas to drain; bounded, so a stuck replica cannot hang the run.
    t = threading.Thread(target=serve.shutdown, daemon=True)
    t.start()
    t.join(timeout=30)
    ray.shutdown()


if __name__ == "__main__":
    main()
