#!/bin/sh
# Same contract as tensorflow/serving's entrypoint: ports 8500/8501, the model
# at ${MODEL_BASE_PATH}/${MODEL_NAME}, extra arguments appended as flags.
exec /usr/bin/tensord --port=8500 --rest_api_port=8501 \
  --model_name="${MODEL_NAME}" --model_base_path="${MODEL_BASE_PATH}/${MODEL_NAME}" "$@"
