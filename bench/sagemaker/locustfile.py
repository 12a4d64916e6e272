"""The SageMaker multi-model article's load test, against a modelmux pool (npm run bench:sagemaker).

Each Locust user sends InvokeEndpoint as the runtime API takes it on the wire
(POST /endpoints/<endpoint>/invocations, X-Amzn-SageMaker-Target-Model, a JSON body), one request
after another, to one of MODELMUX_MODELS archives `wine-<i>.tar.gz` drawn by MODELMUX_PATTERN:

- uniform: every model alike;
- one-hot: 80% to one model, the rest spread over the others;
- five-popular: 80% to five models, the rest spread over the others.

These are bench/simulator/patterns.ts's, as the article's three Locust scripts weigh their tasks.
Requests are not signed: the router checks no signature (docs/sagemaker.md), and boto3's signing
would take the load generator's CPU on the machine under test.
"""

import json
import os
import random

from locust import constant, task
from locust.contrib.fasthttp import FastHttpUser

MODELS = int(os.environ.get("MODELMUX_MODELS", "1000"))
PATTERN = os.environ.get("MODELMUX_PATTERN", "uniform")
ENDPOINT = os.environ.get("MODELMUX_ENDPOINT", "wine")
BODY = json.dumps({"instances": [[7.4, 0.7, 0, 1.9, 0.076, 11, 34, 0.9978, 3.51, 0.56, 9.4]]})
PATTERNS = ("uniform", "one-hot", "five-popular")
if PATTERN not in PATTERNS:
    raise SystemExit(f"MODELMUX_PATTERN must be one of {PATTERNS}, not {PATTERN!r}")


def other(first):
    """A model drawn uniformly from those at index `first` and above."""
    return random.randrange(first, MODELS) if first < MODELS else random.randrange(MODELS)


def draw():
    if PATTERN == "one-hot":
        return 0 if random.random() < 0.8 else other(1)
    if PATTERN == "five-popular":
        return random.randrange(min(5, MODELS)) if random.random() < 0.8 else other(5)
    return random.randrange(MODELS)


class InvokeEndpoint(FastHttpUser):
    wait_time = constant(0)

    @task
    def invoke(self):
        model = f"wine-{draw()}.tar.gz"
        headers = {"Content-Type": "application/json", "Accept": "application/json", "X-Amzn-SageMaker-Target-Model": model}
        # One name for every model: Locust's table stays one row per pattern.
        with self.client.post(f"/endpoints/{ENDPOINT}/invocations", data=BODY, headers=headers, name="invoke_endpoint", catch_response=True) as r:
            if r.status_code != 200:
                r.failure(f"{r.status_code} {r.headers.get('x-amzn-ErrorType')}: {r.text[:200]}")
