#!/usr/bin/env bash
# Installs the Python tools of the model-corpus tests (skl2onnx, onnx, onnxruntime for reference
# answers and dynamic quantization, scikit-learn, the Triton HTTP and gRPC clients; the gRPC one
# brings grpcio and protobuf) from PyPI into a venv outside the clone, reused while the pins stay
# (a fresh install takes about a minute, less with pip's cache warm). Prints the venv's bin folder
# on its last line.
set -euo pipefail
exec bash "$(dirname "$0")/pip-venv.sh" model-corpus-venv 'import skl2onnx, onnx, onnxruntime, onnxruntime.quantization, sklearn, numpy, tritonclient.http, tritonclient.grpc' \
  skl2onnx==1.20.0 onnx==1.23.2 onnxruntime==1.32.0 scikit-learn==1.9.1 numpy==2.4.6 'tritonclient[http,grpc]==2.73.0' grpcio==1.85.1
