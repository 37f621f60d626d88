#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (tests/fuzz/corpus/<fuzzer>/) from the
repository's fixtures: SavedModels, checkpoints and text protos as they
are, plus requests, configs and warmup records encoded here byte by byte
(standard library only). Deterministic; rerun after fixtures change and
commit the result. Crashes found later go into the same folders."""
import glob
import hashlib
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIX = os.path.join(ROOT, "tests", "fixtures")
HPT = os.path.join(ROOT, "examples", "half_plus_two", "00000123")
OUT = os.path.join(HERE, "corpus")
MAX_SEED = 160 << 10


def put(fuzzer, data):
    if isinstance(data, str):
        data = data.encode()
    if len(data) > MAX_SEED:
        return
    d = os.path.join(OUT, fuzzer)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


# --- protobuf wire format ---------------------------------------------------------

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def ld(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def vi(field, v):
    return varint(field << 3) + varint(v & (2**64 - 1))


def tensor(dtype, dims, content=None, floats=None, ints=None, strings=None):
    t = vi(1, dtype) + ld(2, b"".join(ld(2, vi(1, d)) for d in dims))
    if content is not None:
        t += ld(4, content)
    if floats:
        t += ld(5, b"".join(struct.pack("<f", f) for f in floats))
    if ints:
        t += ld(7, b"".join(varint(i & (2**64 - 1)) for i in ints))
    for s in strings or ():
        t += ld(8, s)
    return t


def spec(name="half_plus_two", version=None, label=None, signature=None):
    s = ld(1, name.encode())
    if version is not None:
        s += ld(2, vi(1, version))
    if label is not None:
        s += ld(4, label.encode())
    if signature is not None:
        s += ld(3, signature.encode())
    return s


def predict(inputs, **kw):
    r = ld(1, spec(**kw))
    for k, t in inputs.items():
        r += ld(2, ld(1, k.encode()) + ld(2, t))
    return r


def example(features):
    """tf.Example{features{feature{key: Feature}}}; values are float lists,
    int lists or bytes lists."""
    fs = b""
    for k, v in features.items():
        if isinstance(v[0], float):
            feat = ld(2, ld(1, b"".join(struct.pack("<f", x) for x in v)))
        elif isinstance(v[0], int):
            feat = ld(3, ld(1, b"".join(varint(x) for x in v)))
        else:
            feat = ld(1, b"".join(ld(1, x) for x in v))
        fs += ld(1, ld(1, k.encode()) + ld(2, feat))
    return ld(1, fs)


# --- TFRecord framing (masked CRC32C) ----------------------------------------------

def _crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_T = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked(n)) + data + struct.pack("<I", masked(data))


def main():
    # SavedModels, binary.
    for pb in sorted(glob.glob(os.path.join(FIX, "models", "**", "saved_model.pb"), recursive=True)
                     + [os.path.join(HPT, "saved_model.pb")]):
        put("fuzz_savedmodel", read(pb))
    # Checkpoints: 4-byte index length, index, shard.
    for idx in sorted(glob.glob(os.path.join(FIX, "models", "**", "variables.index"), recursive=True)
                      + [os.path.join(HPT, "variables", "variables.index")]):
        shard = idx[:-len(".index")] + ".data-00000-of-00001"
        if os.path.exists(shard):
            i, d = read(idx), read(shard)
            put("fuzz_bundle", struct.pack("<I", len(i)) + i + d)
    # Text protos: 0 model config, 1 batching, 2 SSL, 3 text SavedModel.
    for txt in sorted(glob.glob(os.path.join(FIX, "pbtxt", "*.pbtxt"))):
        put("fuzz_pbtxt", b"\x03" + read(txt))
    put("fuzz_pbtxt", b"\x00" + b"""model_config_list {
  config { name: "a" base_path: "/models/a" model_platform: "tensorflow"
    model_version_policy { specific { versions: 1 versions: 2 } }
    version_labels { key: "stable" value: 1 } }
  config { name: 'b' base_path: "/models/b" model_version_policy { latest { num_versions: 2 } } }
  config { name: "c" base_path: "/m/c" model_version_policy { all {} } }
}
""")
    put("fuzz_pbtxt", b"\x01" + b"""max_batch_size { value: 32 }
batch_timeout_micros { value: 1000 }
max_enqueued_batches { value: 100 }
num_batch_threads { value: 4 }
allowed_batch_sizes: 8
allowed_batch_sizes: 32
pad_variable_length_inputs: true
""")
    put("fuzz_pbtxt", b"\x02" + b'server_key: "-----BEGIN PRIVATE KEY-----\\nAA\\n"\n'
                        b'server_cert: "x" custom_ca: "y" client_verify: true\n')
    # gRPC requests: first byte is the method (fuzz_grpc.c's table).
    x = {"x": tensor(1, [3], floats=[1.0, 2.0, 5.0])}
    put("fuzz_grpc", b"\x00" + predict(x))
    put("fuzz_grpc", b"\x00" + predict({"x": tensor(1, [2, 1], content=struct.pack("<2f", 1, 2))},
                                       version=123, signature="serving_default"))
    put("fuzz_grpc", b"\x00" + predict({"x": tensor(7, [2], strings=[b"a", b"bc"]),
                                        "y": tensor(9, [2], ints=[1, -1])}, label="stable"))
    ex = example({"x": [1.0, 2.0], "k": [3], "s": [b"abc"]})
    inp = ld(1, ld(1, ex + ex))  # Input.example_list
    put("fuzz_grpc", b"\x01" + ld(1, spec()) + ld(2, inp))
    inp2 = ld(2, ld(1, ex) + ld(2, example({"c": [1.0]})))  # example_list_with_context
    put("fuzz_grpc", b"\x01" + ld(1, spec(signature="regress")) + ld(2, inp2))
    put("fuzz_grpc", b"\x02" + ld(1, inp) + ld(2, ld(1, spec()) + ld(2, b"tensorflow/serving/classify")))
    put("fuzz_grpc", b"\x03" + ld(1, spec()) + ld(2, b"signature_def"))
    put("fuzz_grpc", b"\x04" + ld(1, spec(version=123)))
    cfg = ld(1, ld(1, ld(1, b"m") + ld(2, b"/models/m") + ld(4, b"tensorflow")))
    put("fuzz_grpc", b"\x05" + ld(1, cfg))
    put("fuzz_grpc", b"\x06" + ld(1, b"tensorflow.serving.PredictionService"))
    # TensorProtos.
    for dtype, t in [(1, tensor(1, [2, 2], floats=[1, 2, 3, 4])), (1, tensor(1, [4], floats=[7])),
                     (3, tensor(3, [3], ints=[1, 2, 3])), (9, tensor(9, [1], ints=[-5])),
                     (7, tensor(7, [2], strings=[b"", b"xyz"])), (19, tensor(19, [2]) + ld(13, b"\x00\x3c")),
                     (1, tensor(1, [1, 2], content=struct.pack("<2f", 0.5, 1.5))), (10, tensor(10, []) + ld(11, b"\x01"))]:
        put("fuzz_tensorproto", t)
    # Warmup files: one or two PredictionLog{predict_log{request}} records.
    req = predict(x)
    log = ld(6, ld(1, req))
    put("fuzz_warmup", record(log))
    put("fuzz_warmup", record(log) + record(ld(6, ld(1, predict({"x": tensor(1, [1], floats=[9])})))))
    # REST bodies.
    for body in [{"instances": [1.0, 2.0, 5.0]}, {"inputs": [1.0, 2.0]},
                 {"signature_name": "serving_default", "instances": [[1.0, 2.0, 3.0]]},
                 {"inputs": {"a": [[1, 2, 3]], "b": [7], "c": [{"b64": "YWJj"}], "d": [[[True, False]]]}},
                 {"instances": [{"a": [1, 2, 3], "b": 7, "c": "s", "d": [[True, False]]}]},
                 {"examples": [{"x": [1.0, 2.0], "k": 3, "s": "abc"}], "context": {"c": 1.5}},
                 {"examples": [{"b": {"b64": "AAE="}}]}]:
        put("fuzz_json", json.dumps(body))
    for num in ["0.1", "-0.081000000000000003", "1e22", "123456789.12345678", "1.7976931348623157e308",
                "0.000000000000000000001", "9007199254740993.0"]:
        put("fuzz_json", num)
    with open(os.path.join(FIX, "reference.json")) as f:
        ref = json.load(f)
    for case in list(ref.values())[:8] if isinstance(ref, dict) else []:
        if isinstance(case, dict) and "request" in case:
            put("fuzz_json", json.dumps(case["request"]))
    # REST paths: first byte is the method (fuzz_route.c's table).
    for m, p in [(1, "/v1/models/m:predict"), (1, "/v1/models/m/versions/3:classify"),
                 (1, "/v1/models/m/labels/stable:regress"), (0, "/v1/models/m"),
                 (0, "/v1/models/m/versions/00012/metadata"), (0, "/v1/models/m%2Fx"),
                 (3, "/v1/models/m:predict"), (0, "/v1/models/m/versions/-1")]:
        put("fuzz_route", bytes([m]) + p.encode())


if __name__ == "__main__":
    main()
