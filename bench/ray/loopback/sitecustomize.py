"""Keeps Ray Serve's HAProxy on loopback (bench/ray/run_ray.py puts this folder on PYTHONPATH).

Ray 2.60's HAProxy template binds its Prometheus and stats listeners to every interface
(`bind :<port>`, `bind *:<port>`) whatever `http_options.host` says; the benchmark listens on
127.0.0.1 only. Python imports this module in every process of the Ray cluster (the HAProxy
manager actor included), and the hook below rewrites those two bind lines when Serve's template
module is first imported. Nothing else of Ray changes.
"""

import importlib.abc
import importlib.util
import sys

_TEMPLATES = "ray.serve._private.haproxy_templates"
_LOOPBACK_BINDS = (
    ("bind :{{ config.metrics_port }}", "bind 127.0.0.1:{{ config.metrics_port }}"),
    ("bind *:{{ config.stats_port }}", "bind 127.0.0.1:{{ config.stats_port }}"),
)


class _LoopbackTemplates(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TEMPLATES:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            text = module.HAPROXY_CONFIG_TEMPLATE
            for old, new in _LOOPBACK_BINDS:
                text = text.replace(old, new)
            module.HAPROXY_CONFIG_TEMPLATE = text

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _LoopbackTemplates())
