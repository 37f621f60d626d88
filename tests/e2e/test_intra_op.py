"""--tensorflow_intra_op_parallelism splits the engine's kernels over a
thread pool: the same requests to a daemon with one thread per op and to
one with two (and three) give the same bits, on the zoo's convolutional,
depthwise and attention models at batch 1 and at a batch large enough that
their convolutions, depthwise layers and products are split."""
import json
import os

import pytest

from conftest import ROOT
from test_zoo import ZOO, zoo_input

CASES = [("cnn", 32), ("mobilenet_v2", 8), ("transformer", 32)]


def predict(s, name, body):
    status, out = s.json("POST", "/v1/models/%s:predict" % name, body)
    assert status == 200, out
    return out["outputs"]


@pytest.mark.parametrize("name,batch", CASES)
def test_same_bits_at_one_two_and_three_threads(serve, name, batch):
    entry = ZOO[name]
    base = os.path.dirname(os.path.join(ROOT, entry["dir"]))
    bodies = [json.dumps({"inputs": {a: zoo_input(spec, b) for a, spec in entry["inputs"].items()}})
              for b in (1, batch)]
    answers = {}
    for threads in (1, 2, 3):
        s = serve(name, base, "--tensorflow_intra_op_parallelism=%d" % threads)
        answers[threads] = [predict(s, name, body) for body in bodies]
        s.stop()
    # JSON carries each float32 with enough digits to round-trip: equal
    # text is equal bits.
    assert answers[2] == answers[1]
    assert answers[3] == answers[1]
