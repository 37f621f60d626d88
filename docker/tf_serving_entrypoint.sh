#!/bin/sh
# The image's entrypoint, with tensorflow/serving's contract: gRPC on 8500,
# REST on 8501, the model ${MODEL_NAME} at ${MODEL_BASE_PATH}/${MODEL_NAME},
# and any arguments given after the image name appended as flags (a flag
# given twice: the last one wins, so they can override these). exec keeps
# the PID: tini (PID 1) forwards SIGTERM straight to tensord.
exec /usr/bin/tensorflow_model_server --port=8500 --rest_api_port=8501 \
  --model_name="${MODEL_NAME}" --model_base_path="${MODEL_BASE_PATH}/${MODEL_NAME}" "$@"
