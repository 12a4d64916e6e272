#!/usr/bin/env bash
# Installs the SageMaker side's real clients from PyPI into a venv outside the clone, reused while
# the pins stay: boto3 (its sagemaker-runtime client drives the integration test of the runtime
# API) and Locust (the load tool of bench:sagemaker). Locust is imported first: it patches the
# standard library for gevent, which fails once botocore has built an SSL context.
# Prints the venv's bin folder on its last line.
set -euo pipefail
exec bash "$(dirname "$0")/pip-venv.sh" sagemaker-clients-venv 'import locust, boto3, botocore' \
  boto3==1.44.5 botocore==1.44.5 locust==2.47.0
