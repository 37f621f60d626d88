#!/usr/bin/env bash
# Quick start: install the Debian packages, build, and serve the bundled
# example model half_plus_two (y = 0.5 * x + 2) with TF Serving's ports:
# gRPC on 8500, REST on 8501. Then, from another shell:
#   curl -d '{"instances": [1.0, 2.0, 5.0]}' localhost:8501/v1/models/half_plus_two:predict
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
exec build/tensord --port=8500 --rest_api_port=8501 \
  --model_name=half_plus_two --model_base_path="$PWD/examples/half_plus_two"
