#!/usr/bin/env bash
# Makes the engine benchmark's Python: a virtualenv over the test install's
# tensorflow-cpu 2.19.1 (scripts/install-deps.sh --test) with the peers of
# requirements.txt, then keras-hub without its declared dependencies (see
# requirements.txt). Usage: bench/engine/venv.sh VENV
set -euo pipefail
venv=${1:?usage: $0 VENV}
here=$(cd "$(dirname "$0")" && pwd)
python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q -r "$here/requirements.txt"
"$venv/bin/pip" install -q --no-deps 'keras-hub==0.21.1'
"$venv/bin/python" -c 'import tensorflow as tf; assert tf.__version__ == "2.19.1", tf.__version__'
