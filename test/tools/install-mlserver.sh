#!/usr/bin/env bash
# Installs MLServer (the serving runtime of the sidecar tests) with its scikit-learn and XGBoost
# runtimes from PyPI into a venv outside the clone, reused while the pins stay (a fresh install
# takes about a minute and a half). Prints the venv's bin folder on its last line.
set -euo pipefail
exec bash "$(dirname "$0")/pip-venv.sh" mlserver-venv 'import mlserver, mlserver_sklearn, mlserver_xgboost, sklearn, xgboost' \
  mlserver==1.7.1 mlserver-sklearn==1.7.1 mlserver-xgboost==1.7.1 scikit-learn==1.9.1 xgboost==3.2.0 numpy==2.4.6 pandas==3.1.1
