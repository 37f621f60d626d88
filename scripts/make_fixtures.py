#!/usr/bin/env python3
"""Regenerate tensord's SavedModel test fixtures with real TensorFlow, plus the
reference outputs TensorFlow itself computes for them.

Run from the repo root:  python3 scripts/make_fixtures.py

Writes (after deleting any previous copy):
  examples/half_plus_two/00000123/                   TF2 tf.Module export (resource vars)
  tests/fixtures/models/half_plus_two_tf1/00000123/  TF1 graph export (ref vars, Saver V2)
  tests/fixtures/models/missing_var/00000001/        as TF1, but checkpoint lacks "b"
  tests/fixtures/models/half_plus_three_tf2/0000000{1,2}/  TF2, b=3 and b=4
  tests/fixtures/reference.json                      TF's own outputs for fixed inputs

With --zoo it writes only the engine's model zoo instead (Keras 3 MLP, CNN,
MobileNetV2, transformer encoder, two-input/two-output model):
  tests/fixtures/models/zoo/<model>/1/                model.export() or tf.saved_model.save
  tests/fixtures/zoo.json                            TF's outputs at batch 1 and 8

With --lowp it writes only Keras models whose weights are float16 or bfloat16
(dtype policies "float16" / "bfloat16"), exported with model.export():
  tests/fixtures/models/lowp/<model>/1/
  tests/fixtures/lowp.json                           TF's outputs at batch 1 and 8

With --control it writes only models with control flow, exported by Keras 3
model.export() (LSTM; GRU feeding a SimpleRNN: While loops over TensorLists), by
tf.saved_model.save (a tf.cond and a data-dependent tf.while_loop) and by TF1's
SavedModelBuilder (tf.cond as Switch/Merge):
  tests/fixtures/models/control/<model>/1/
  tests/fixtures/models/control/loop_unsupported/1/  a loop body with an op tensord lacks
  tests/fixtures/control.json                        TF's outputs at batch 1 and 8

With --large DIR it writes, for the engine benchmark only (never committed: the
weights are random and large), models at real sizes into DIR/<model>/1/ with
DIR/large.json in zoo.json's layout (absolute dirs, no reference outputs):
ResNet50, MobileNetV2 (alpha 1.0) and EfficientNetB0 at 224x224, a BERT-base
shaped encoder (keras-hub BertBackbone, 4 layers of width 768, sequence 128)
and a wide MLP (4 x 2048). Needs keras-hub (bench/engine/venv.sh).

With --applications DIR [NAME...] it writes, never committed (the networks
cannot shrink their widths), one member of every keras.applications family at
its smallest input into DIR/<name>/1/ with TF's outputs for a seeded batch of 2
beside each (DIR/<name>/io.npz) and DIR/applications.json; see
scripts/fixtures_applications.py.

With --coverage it writes only the models of the long tail of real exports
(export forms and layers beyond the zoo), each with TF's outputs (--coverage
NAME... and --coverage-ops NAME... rewrite only the models named):
  tests/fixtures/models/coverage/<model>/1/
  tests/fixtures/coverage.json                       TF's outputs at batch 1 and 8
Its hub_bert, hub_gpt2 and hub_vit models need keras-hub==0.21.1, installed
with --no-deps (see hub_coverage_models).

With --pbtxt it writes only text-format copies of existing SavedModels, made by
TensorFlow's own text_format from their saved_model.pb (the tests pair each with
its model's variables/ in a temporary directory):
  tests/fixtures/pbtxt/<name>.pbtxt                 half_plus_two_tf1, zoo_mlp, zoo_transformer

The summary at the end reads the files back with the standalone readers in
/work/shared/reference/tools (imported from there, not copied into the repo).
"""
import json
import os
import random
import shutil
import sys

# Quiet TF's C++ logging so the summary stays readable.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

PINNED_TF = "2.19.1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF_TOOLS = "/work/shared/reference/tools"

TF2_DIR = "examples/half_plus_two/00000123"
TF1_DIR = "tests/fixtures/models/half_plus_two_tf1/00000123"
MISSING_DIR = "tests/fixtures/models/missing_var/00000001"
THREE_DIRS = {"tests/fixtures/models/half_plus_three_tf2/00000001": 3.0,
              "tests/fixtures/models/half_plus_three_tf2/00000002": 4.0}
# Model roots (not version dirs) are wiped so stale versions cannot linger.
WIPE = ["examples/half_plus_two", "tests/fixtures/models/half_plus_two_tf1",
        "tests/fixtures/models/missing_var", "tests/fixtures/models/half_plus_three_tf2"]
REF_JSON = "tests/fixtures/reference.json"


def check_version():
    # The fixtures are committed; a different TF may emit different graphs
    # (op versions, default attrs, compression), so insist on the pinned one.
    if tf.__version__ != PINNED_TF:
        sys.exit("make_fixtures.py: need tensorflow==%s (pip install tensorflow-cpu==%s), "
                 "found %s" % (PINNED_TF, PINNED_TF, tf.__version__))


def seed_everything():
    random.seed(0)
    np.random.seed(0)
    tf.random.set_seed(0)


def p(rel):
    return os.path.join(ROOT, rel)


# ---------------------------------------------------------------- exports

class HalfPlus(tf.Module):
    """y = a*x + b with resource variables (VarHandleOp/ReadVariableOp)."""

    def __init__(self, a, b):
        super().__init__()
        self.a = tf.Variable(a, dtype=tf.float32, name="a")
        self.b = tf.Variable(b, dtype=tf.float32, name="b")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def serve(self, x):
        return {"y": self.a * x + self.b}


def export_tf2(rel, a, b):
    m = HalfPlus(a, b)
    tf.saved_model.save(m, p(rel), signatures={"serving_default": m.serve})


def build_tf1_graph():
    """TF Serving's half_plus_two shape: tf.Example string in, parsed "x" and
    "x2" (default 0), ref vars a=0.5, b=2, c=3; y = a*x+b, y2 = a*x+c,
    y3 = a*x2+c. Returns the tensors by name; call inside a graph context."""
    v1 = tf.compat.v1
    a = v1.Variable(0.5, dtype=tf.float32, name="a", use_resource=False)
    b = v1.Variable(2.0, dtype=tf.float32, name="b", use_resource=False)
    c = v1.Variable(3.0, dtype=tf.float32, name="c", use_resource=False)
    serialized = v1.placeholder(tf.string, name="tf_example")
    parsed = v1.parse_example(serialized, {
        "x": v1.FixedLenFeature([1], tf.float32),
        "x2": v1.FixedLenFeature([1], tf.float32, default_value=[0.0])})
    x = tf.identity(parsed["x"], name="x")
    x2 = tf.identity(parsed["x2"], name="x2")
    # raw_ops so the graph holds the TF1 "Add" op rather than AddV2.
    y = tf.raw_ops.Add(x=tf.raw_ops.Mul(x=a, y=x), y=b, name="y")
    y2 = tf.raw_ops.Add(x=tf.raw_ops.Mul(x=a, y=x), y=c, name="y2")
    y3 = tf.raw_ops.Add(x=tf.raw_ops.Mul(x=a, y=x2), y=c, name="y3")
    return {"tf_example": serialized, "x": x, "x2": x2, "y": y, "y2": y2, "y3": y3}


# TF Serving's classify/regress signatures of its half_plus_two test model.
TF1_INFER_SIGNATURES = ("classify_x_to_y", "regress_x_to_y", "regress_x_to_y2",
                        "regress_x2_to_y3")


def tf1_signatures(t):
    u = tf.compat.v1.saved_model.signature_def_utils
    return {
        "serving_default": u.predict_signature_def(inputs={"x": t["x"]}, outputs={"y": t["y"]}),
        "classify_x_to_y": u.classification_signature_def(
            examples=t["tf_example"], classes=None, scores=t["y"]),
        "regress_x_to_y": u.regression_signature_def(examples=t["tf_example"], predictions=t["y"]),
        "regress_x_to_y2": u.regression_signature_def(examples=t["tf_example"],
                                                      predictions=t["y2"]),
        # As in TF Serving's model: the input is x2 itself (a float), so
        # Regress, which feeds serialized Examples, cannot run it (TF 2.19's
        # regression_signature_def refuses to build it; build it by hand).
        "regress_x2_to_y3": u.build_signature_def(
            inputs={"inputs": tf.compat.v1.saved_model.build_tensor_info(t["x2"])},
            outputs={"outputs": tf.compat.v1.saved_model.build_tensor_info(t["y3"])},
            method_name="tensorflow/serving/regress"),
    }


def export_tf1(rel):
    v1 = tf.compat.v1
    with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
        t = build_tf1_graph()
        sess.run(v1.global_variables_initializer())
        builder = v1.saved_model.Builder(p(rel))
        builder.add_meta_graph_and_variables(
            sess, [v1.saved_model.tag_constants.SERVING],
            signature_def_map=tf1_signatures(t))
        builder.save()


def export_missing_var(rel):
    # Start from a valid TF1 export, then swap in a checkpoint that has only
    # "a": the graph's save/RestoreV2 still asks for "b", so loading must fail.
    export_tf1(rel)
    vdir = p(os.path.join(rel, "variables"))
    shutil.rmtree(vdir)
    os.makedirs(vdir)
    v1 = tf.compat.v1
    with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
        a = v1.Variable(0.5, dtype=tf.float32, name="a", use_resource=False)
        sess.run(v1.global_variables_initializer())
        v1.train.Saver(var_list=[a]).save(
            sess, os.path.join(vdir, "variables"), write_meta_graph=False, write_state=False)
    # Only variables.index / variables.data-* may remain, as in a real export.
    state = os.path.join(vdir, "checkpoint")
    if os.path.exists(state):
        os.remove(state)


# ---------------------------------------------------------------- reference outputs

def inputs():
    f32 = lambda v: np.asarray(v, dtype=np.float32)
    return [f32([1.0, 2.0, 5.0]), f32([0.0]), f32([-3.25, 1e-7, 123456.789, 7.0]),
            f32(np.random.default_rng(0).standard_normal(16))]


def floats(arr):
    # float32 -> python float is exact; json then keeps every digit (repr).
    return [float(v) for v in np.asarray(arr, dtype=np.float32).reshape(-1)]


def run_tf2(rel):
    fn = tf.saved_model.load(p(rel)).signatures["serving_default"]
    return [{"x": floats(x), "y": floats(fn(x=tf.constant(x))["y"].numpy())} for x in inputs()]


def run_tf1(rel):
    v1 = tf.compat.v1
    with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
        mg = v1.saved_model.loader.load(sess, ["serve"], p(rel))
        sig = mg.signature_def["serving_default"]
        xin, yout = sig.inputs["x"].name, sig.outputs["y"].name
        # x:0 has static shape [?,1] (FixedLenFeature([1])) and the Python
        # Session refuses a rank-1 feed, so feed [N,1]; y is flattened back.
        return [{"x": floats(x), "y": floats(sess.run(yout, {xin: x.reshape(-1, 1)}))}
                for x in inputs()]


def example_bytes(features):
    """A serialized tf.Example with float features {name: [values]}."""
    ex = tf.train.Example()
    for k, vs in features.items():
        ex.features.feature[k].float_list.value.extend(vs)
    return ex.SerializeToString()


# Classify/Regress requests (REST JSON bodies) and what TensorFlow computes
# for them: TF Serving feeds the signature's "inputs" tensor with one
# serialized Example per request example, context bytes first.
TF1_INFER_CASES = [
    {"signature": "classify_x_to_y", "body": {"examples": [{"x": 2.0}]}},
    {"signature": "classify_x_to_y", "body": {"examples": [{"x": [1.5]}, {"x": -3.25},
                                                           {"x": 1e-5}]}},
    {"signature": "regress_x_to_y", "body": {"examples": [{"x": 2.0}]}},
    {"signature": "regress_x_to_y", "body": {"examples": [{"x": 2.0}, {"x": 3.0},
                                                          {"x": 123456.789}]}},
    {"signature": "regress_x_to_y2", "body": {"examples": [{"x": 2.0}, {"x": 0.1}]}},
    # Context merging: context bytes ++ example bytes; the example's x wins.
    {"signature": "regress_x_to_y", "body": {"context": {"x": 7.0},
                                             "examples": [{}, {"x": 1.0}]}},
    # x is required: a missing one is TensorFlow's error.
    {"signature": "regress_x_to_y", "body": {"examples": [{"x2": 1.0}]}},
    # The input of regress_x2_to_y3 is a float: feeding strings fails.
    {"signature": "regress_x2_to_y3", "body": {"examples": [{"x2": 1.0}]}},
]


def json_features(obj):
    return {k: (v if isinstance(v, list) else [v]) for k, v in obj.items()}


def run_tf1_infer(rel):
    v1 = tf.compat.v1
    out = []
    with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
        mg = v1.saved_model.loader.load(sess, ["serve"], p(rel))
        for case in TF1_INFER_CASES:
            sig = mg.signature_def[case["signature"]]
            body = case["body"]
            ctx = example_bytes(json_features(body["context"])) if "context" in body else b""
            feed = [ctx + example_bytes(json_features(e)) for e in body["examples"]]
            (out_key,) = sig.outputs.keys()
            res = dict(case, output=out_key)
            try:
                y = sess.run(sig.outputs[out_key].name, {sig.inputs["inputs"].name: feed})
                res["values"] = floats(y)
            except Exception as e:  # noqa: BLE001 - record TF's failure
                res["tf_error"] = type(e).__name__
            out.append(res)
    return out


def signature_defs_json(rel):
    """The SignatureDef map as protobuf's JSON printer writes it with TF
    Serving's metadata options (proto field names, fields without presence
    printed): the golden form of GET .../metadata's signature_def."""
    from google.protobuf import json_format
    from tensorflow.core.protobuf import saved_model_pb2
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString(open(p(os.path.join(rel, "saved_model.pb")), "rb").read())
    (mg,) = [m for m in sm.meta_graphs if list(m.meta_info_def.tags) == ["serve"]]
    return {k: json.loads(json_format.MessageToJson(
        v, preserving_proto_field_name=True, always_print_fields_with_no_presence=True))
        for k, v in mg.signature_def.items()}


def tf1_load_error(rel):
    v1 = tf.compat.v1
    try:
        with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
            v1.saved_model.loader.load(sess, ["serve"], p(rel))
    except Exception as e:  # noqa: BLE001 - we record whatever TF raises
        # Drop the absolute checkout path so the file is the same on every machine.
        return "%s: %s" % (type(e).__name__, str(e).replace(ROOT + os.sep, ""))
    sys.exit("make_fixtures.py: %s unexpectedly loaded" % rel)


def write_reference():
    models = {}
    entry = lambda cases: {"signature": "serving_default", "input": "x", "output": "y",
                           "cases": cases}
    models[TF2_DIR] = entry(run_tf2(TF2_DIR))
    for rel in THREE_DIRS:
        models[rel] = entry(run_tf2(rel))
    models[TF1_DIR] = entry(run_tf1(TF1_DIR))
    models[TF1_DIR]["tf_feed_shape"] = [-1, 1]  # see run_tf1
    models[TF1_DIR]["infer_cases"] = run_tf1_infer(TF1_DIR)
    for rel in (TF1_DIR, TF2_DIR):
        models[rel]["signature_def_json"] = signature_defs_json(rel)
    models[MISSING_DIR] = {"signature": "serving_default", "input": "x", "output": "y",
                           "tf_error": tf1_load_error(MISSING_DIR)}
    with open(p(REF_JSON), "w") as f:
        json.dump({"models": models}, f, indent=1, sort_keys=True)
        f.write("\n")


# ---------------------------------------------------------------- model zoo (engine issue)
#
# Real Keras 3 models, exported with model.export() (the Keras path) or with
# tf.saved_model.save around the model (the plain TF2 path), plus TensorFlow's
# outputs for deterministic inputs at batch 1 and 8 in tests/fixtures/zoo.json.
# The inputs are not stored: they are generated by a formula that C and
# Python evaluate to the same float32 values (integer arithmetic, then one
# correctly rounded division and one subtraction), see zoo_input().
ZOO_ROOT = "tests/fixtures/models/zoo"
ZOO_JSON = "tests/fixtures/zoo.json"
ZOO_BATCHES = (1, 8)


def zoo_input(spec, batch):
    """spec: {"dtype", "shape" (without batch), "gen": kind, ...}. Same formula as
    zoo_fill() in tests/loader/test_ldr_zoo.c and tests/e2e/test_zoo.py."""
    shape = [batch] + spec["shape"]
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.int64)
    g = spec["gen"]
    if g == "float":
        k = (i * 7919 + spec["seed"]) % 2001
        return (k.astype(np.float32) / np.float32(1000.0) - np.float32(1.0)).reshape(shape)
    if g == "int":
        return ((i * 31 + spec["seed"]) % spec["mod"]).astype(spec["dtype"]).reshape(shape)
    if g == "words":  # the same cycle over a word list (vocabulary and unknown words)
        return np.array([spec["words"][k] for k in (i * 31 + spec["seed"]) % len(spec["words"])],
                        dtype=object).reshape(shape)
    if g == "mask":  # row b keeps its first T - 3*(b % 4) positions
        t = i % shape[-1]
        b = i // shape[-1]
        return (t < shape[-1] - 3 * (b % 4)).astype(spec["dtype"]).reshape(shape)
    raise ValueError(g)


def randomize_batchnorm(model, rng):
    # Fresh BatchNormalization layers are the identity (mean 0, variance 1,
    # gamma 1, beta 0); random statistics make the arithmetic observable.
    import keras
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.BatchNormalization):
            c = layer.moving_mean.shape[0]
            layer.gamma.assign(rng.uniform(0.5, 1.5, c).astype(np.float32))
            layer.beta.assign(rng.normal(0, 0.1, c).astype(np.float32))
            layer.moving_mean.assign(rng.normal(0, 0.1, c).astype(np.float32))
            layer.moving_variance.assign(rng.uniform(0.5, 1.5, c).astype(np.float32))


def zoo_mlp():
    import keras
    from keras import layers
    return keras.Sequential([keras.Input((784,), name="x"),
                             layers.Dense(512, activation="relu"),
                             layers.Dense(512, activation="relu"),
                             layers.Dense(10, activation="softmax")], name="mlp")


def zoo_cnn():
    import keras
    from keras import layers
    i = keras.Input((28, 28, 1), name="image")
    x = layers.Conv2D(8, 3, padding="same")(i)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Conv2D(16, 3, strides=2, padding="valid", activation="relu6")(x)
    x = layers.BatchNormalization()(x)
    x = layers.AveragePooling2D(3, strides=2, padding="same")(x)
    x = layers.Add()([x, layers.Conv2D(16, 1)(x)])  # a residual add
    x = layers.Flatten()(x)
    x = layers.Dense(10, activation="softmax")(x)
    return keras.Model(i, x, name="cnn")


def zoo_mobilenet():
    import keras
    # classes=10 instead of 1000 keeps the committed checkpoint small (the
    # 1280x1000 head alone would be 5 MB); the body is the stock network.
    return keras.applications.MobileNetV2(alpha=0.35, input_shape=(96, 96, 3), weights=None,
                                          classes=10)


def zoo_transformer():
    import keras
    from keras import layers, ops
    seq, dim, vocab = 16, 32, 100
    tok = keras.Input((seq,), dtype="int32", name="token_ids")
    mask = keras.Input((seq,), dtype="int32", name="attention_mask")
    x = layers.Embedding(vocab, dim)(tok)
    x = x + layers.Embedding(seq, dim)(ops.arange(seq))
    att = layers.MultiHeadAttention(num_heads=2, key_dim=16)(
        x, x, attention_mask=ops.cast(mask[:, None, :], "bool"))
    x = layers.LayerNormalization()(x + att)
    f = layers.Dense(64, activation="gelu")(x)
    x = layers.LayerNormalization()(x + layers.Dense(dim)(f))
    x = layers.GlobalAveragePooling1D()(x)
    return keras.Model([tok, mask], layers.Dense(3, activation="softmax")(x), name="encoder")


def zoo_two_io():
    import keras
    from keras import layers
    f = keras.Input((8,), name="features")
    c = keras.Input((1,), dtype="int32", name="category")
    e = layers.Flatten()(layers.Embedding(5, 4)(c))
    h = layers.Dense(16, activation="tanh")(layers.Concatenate()([f, e]))
    return keras.Model({"features": f, "category": c},
                       {"score": layers.Dense(1, activation="sigmoid", name="score")(h),
                        "probs": layers.Dense(3, activation="softmax", name="probs")(h)},
                       name="two_io")


def save_via_tf(model, path, spec):
    """tf.saved_model.save of a tf.Module holding the model's variables and a
    serving tf.function (not model.export())."""
    # The module tracks the backing tf.Variables themselves and reaches the
    # model only through the closure: tracking the Keras model would save its
    # variables a second time as "Variable_N" objects, which the session-based
    # loader TF Serving uses never binds to the handles the function reads.
    root = tf.Module()
    root.tf_vars = [v.value for v in model.weights]

    @tf.function(input_signature=[tf.TensorSpec([None] + spec["shape"], tf.float32,
                                                name=spec["name"])])
    def serve(x):
        return {"output_0": model(x, training=False)}

    root.serve = serve
    tf.saved_model.save(root, path, signatures={"serving_default": serve})


# name -> (builder, export path kind, inputs: alias -> spec)
ZOO = {
    "mlp": (zoo_mlp, "tf.saved_model.save",
            {"x": {"dtype": "float32", "shape": [784], "gen": "float", "seed": 1}}),
    "cnn": (zoo_cnn, "model.export",
            {"image": {"dtype": "float32", "shape": [28, 28, 1], "gen": "float", "seed": 2}}),
    "mobilenet_v2": (zoo_mobilenet, "tf.saved_model.save",
                     {"input_layer": {"dtype": "float32", "shape": [96, 96, 3], "gen": "float",
                                      "seed": 3}}),
    "transformer": (zoo_transformer, "model.export",
                    {"token_ids": {"dtype": "int32", "shape": [16], "gen": "int", "mod": 100,
                                   "seed": 7},
                     "attention_mask": {"dtype": "int32", "shape": [16], "gen": "mask"}}),
    "two_io": (zoo_two_io, "model.export",
               {"features": {"dtype": "float32", "shape": [8], "gen": "float", "seed": 5},
                "category": {"dtype": "int32", "shape": [1], "gen": "int", "mod": 5, "seed": 3}}),
}


def export_zoo():
    import keras
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    out = {}
    for name, (build, how, ins) in ZOO.items():
        model = build()
        randomize_batchnorm(model, rng)
        rel = os.path.join(ZOO_ROOT, name, "1")
        if how == "model.export":
            model.export(p(rel), verbose=False)
        else:
            (alias, spec), = ins.items()
            save_via_tf(model, p(rel), dict(spec, name=alias))
        fn = tf.saved_model.load(p(rel)).signatures["serving_default"]
        entry = {"dir": rel, "export": how, "signature": "serving_default",
                 "inputs": ins, "outputs": {}}
        for b in ZOO_BATCHES:
            res = fn(**{a: tf.constant(zoo_input(s, b)) for a, s in ins.items()})
            for alias, t in sorted(res.items()):
                o = entry["outputs"].setdefault(alias, {"dtype": t.dtype.name})
                o["batch%d" % b] = {"shape": list(t.shape), "values": floats(t.numpy())}
        out[name] = entry
        print("zoo:", name, how, "params", model.count_params())
    with open(p(ZOO_JSON), "w") as f:
        json.dump({"models": out}, f, indent=1, sort_keys=True)
        f.write("\n")


# ---------------------------------------------------------------- summary

def block_types(index_path):
    """Compression type byte (0 raw, 1 snappy) of each data block and of the index block."""
    import tf_bundle  # reference reader, imported from REF_TOOLS
    f = open(index_path, "rb").read()
    foot = f[-48:]
    _mo, q = tf_bundle.varint(foot, 0)
    _ms, q = tf_bundle.varint(foot, q)
    io, q = tf_bundle.varint(foot, q)
    isz, q = tf_bundle.varint(foot, q)
    data = []
    for _key, handle in tf_bundle.block_entries(tf_bundle.read_block(f, io, isz)):
        bo, r = tf_bundle.varint(handle, 0)
        bs, r = tf_bundle.varint(handle, r)
        tf_bundle.read_block(f, bo, bs)  # verifies CRC (and decompresses)
        data.append(f[bo + bs])
    return data, f[io + isz]


def summarize():
    from tensorflow.core.protobuf import saved_model_pb2
    sys.path.insert(0, REF_TOOLS)
    name = {0: "raw", 1: "snappy"}
    for rel in [TF2_DIR, *THREE_DIRS, TF1_DIR, MISSING_DIR]:
        print("==", rel)
        for dirpath, _dirs, files in sorted(os.walk(p(rel))):
            for fn in sorted(files):
                full = os.path.join(dirpath, fn)
                print("   %-40s %6d" % (os.path.relpath(full, p(rel)), os.path.getsize(full)))
        data, idx = block_types(p(os.path.join(rel, "variables/variables.index")))
        print("   variables.index data blocks:", [name.get(t, t) for t in data],
              "index block:", name.get(idx, idx))
        sm = saved_model_pb2.SavedModel()
        sm.ParseFromString(open(p(os.path.join(rel, "saved_model.pb")), "rb").read())
        for mg in sm.meta_graphs:
            print("   tags", list(mg.meta_info_def.tags),
                  "stripped_default_attrs", mg.meta_info_def.stripped_default_attrs)
            sd = mg.saver_def
            print("   saver_def restore_op=%s filename_tensor=%s save_tensor=%s" % (
                sd.restore_op_name, sd.filename_tensor_name, sd.save_tensor_name))
            for k, s in sorted(mg.signature_def.items()):
                print("   signature %s method=%s %s -> %s" % (
                    k, s.method_name, {i: t.name for i, t in s.inputs.items()},
                    {o: t.name for o, t in s.outputs.items()}))
            for key in ("saved_model_main_op", "legacy_init_op"):
                if key in mg.collection_def:
                    print("   init collection %s: %s" % (
                        key, list(mg.collection_def[key].node_list.value)))
            print("   graph ops:", sorted({n.op for n in mg.graph_def.node}))
            lib = sorted({n.op for f in mg.graph_def.library.function for n in f.node_def})
            print("   function ops:", lib)
            print("   functions:", sorted(f.signature.name for f in mg.graph_def.library.function))


PBTXT = {"half_plus_two_tf1": TF1_DIR, "zoo_mlp": "tests/fixtures/models/zoo/mlp/1",
         "zoo_transformer": "tests/fixtures/models/zoo/transformer/1"}


LOWP_ROOT = "tests/fixtures/models/lowp"
LOWP_JSON = "tests/fixtures/lowp.json"


def export_lowp():
    import keras
    from keras import layers
    keras.utils.set_random_seed(0)
    if os.path.isdir(p(LOWP_ROOT)):
        shutil.rmtree(p(LOWP_ROOT))
    out = {}
    spec = {"x": {"dtype": "float32", "shape": [32], "gen": "float", "seed": 11}}
    for name, dt in (("mlp_f16", "float16"), ("mlp_bf16", "bfloat16")):
        model = keras.Sequential([keras.Input((32,), name="x"),
                                  layers.Dense(64, activation="relu", dtype=dt),
                                  layers.Dense(10, activation="softmax", dtype=dt)], name=name)
        rel = os.path.join(LOWP_ROOT, name, "1")
        model.export(p(rel), verbose=False)
        fn = tf.saved_model.load(p(rel)).signatures["serving_default"]
        entry = {"dir": rel, "export": "model.export", "signature": "serving_default",
                 "weights": dt, "inputs": spec, "outputs": {}}
        for b in ZOO_BATCHES:
            res = fn(x=tf.constant(zoo_input(spec["x"], b)))
            for alias, t in sorted(res.items()):
                o = entry["outputs"].setdefault(alias, {"dtype": t.dtype.name})
                o["batch%d" % b] = {"shape": list(t.shape),
                                    "values": floats(tf.cast(t, tf.float32).numpy())}
        out[name] = entry
    with open(p(LOWP_JSON), "w") as f:
        json.dump({"models": out}, f, indent=1, sort_keys=True)
        f.write("\n")


CONTROL_ROOT = "tests/fixtures/models/control"
CONTROL_JSON = "tests/fixtures/control.json"


class CondLoop(tf.Module):
    """StatelessIf on the batch's sum; a While whose trip count depends on
    the data (ceil(3 * max(x)) halvings, at least none)."""

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def serve(self, x):
        y = tf.cond(tf.reduce_sum(x) > 0.0, lambda: x * 2.0 + 1.0, lambda: tf.nn.relu(x) - 3.0)
        n = tf.cast(tf.math.ceil(tf.reduce_max(x) * 3.0), tf.int32)
        _, z = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 0.5 + 1.0),
                             [tf.constant(0), x])
        return {"y": y, "z": z}


class LoopUnsupported(tf.Module):
    """A tf.while_loop whose body uses an op the engine lacks (Lgamma): the
    version must fail to load naming it."""

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def serve(self, x):
        _, z = tf.while_loop(lambda i, v: i < 3,
                             lambda i, v: (i + 1, tf.math.lgamma(v) * 0.5), [0, x])
        return {"z": z}


def export_tf1_cond(rel):
    """A TF1 graph with tf.cond as Switch/Merge (control flow v1): y picks a
    branch on the sum of x (one branch reads a ref variable), c picks
    between two constants that only control edges tie to the branches.
    Returns the session's signature function for the reference outputs."""
    v1 = tf.compat.v1
    v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
            w = v1.Variable([0.5, -1.0, 2.0, 0.25], dtype=tf.float32, name="w", use_resource=False)
            x = v1.placeholder(tf.float32, [None, 4], name="x")
            pred = tf.reduce_sum(x) > 0.0
            y = tf.identity(tf.cond(pred, lambda: x * w + 1.0, lambda: tf.nn.relu(x) - 3.0), name="y")
            c = tf.identity(tf.cond(pred, lambda: tf.constant(1.0), lambda: tf.constant(2.0)), name="c")
            sess.run(v1.global_variables_initializer())
            u = v1.saved_model.signature_def_utils
            builder = v1.saved_model.Builder(p(rel))
            builder.add_meta_graph_and_variables(
                sess, [v1.saved_model.tag_constants.SERVING],
                signature_def_map={"serving_default": u.predict_signature_def(
                    inputs={"x": x}, outputs={"y": y, "c": c})})
            builder.save()
            ops = {n.op for n in g.as_graph_def().node}
            assert "Switch" in ops and "Merge" in ops, sorted(ops)
    finally:
        v1.enable_control_flow_v2()


def export_control():
    import keras
    from keras import layers
    keras.utils.set_random_seed(0)
    if os.path.isdir(p(CONTROL_ROOT)):
        shutil.rmtree(p(CONTROL_ROOT))
    seq = {"x": {"dtype": "float32", "shape": [7, 5], "gen": "float", "seed": 21}}
    models = {
        "lstm": (keras.Sequential([keras.Input((7, 5), name="x"), layers.LSTM(8),
                                   layers.Dense(3)], name="lstm"), seq),
        "gru_stack": (keras.Sequential([keras.Input((7, 5), name="x"),
                                        layers.GRU(6, return_sequences=True),
                                        layers.SimpleRNN(4)], name="gru_stack"), seq),
        "cond_loop": (CondLoop(), {"x": {"dtype": "float32", "shape": [4], "gen": "float",
                                         "seed": 4}}),
        "tf1_while": (export_tf1_while, "tf1",
                      {"x": {"dtype": "float32", "shape": [4], "gen": "float", "seed": 29}}),
        "tf1_dropout": (export_tf1_dropout, "tf1",
                        {"x": {"dtype": "float32", "shape": [4], "gen": "float", "seed": 31}}),
    }
    tf1 = os.path.join(CONTROL_ROOT, "tf1_cond", "1")
    export_tf1_cond(tf1)
    models["tf1_cond"] = (None, {"x": {"dtype": "float32", "shape": [4], "gen": "float", "seed": 9}})
    bad = os.path.join(CONTROL_ROOT, "loop_unsupported", "1")
    m = LoopUnsupported()
    tf.saved_model.save(m, p(bad), signatures={"serving_default": m.serve})
    out = {}
    for name, (model, spec) in models.items():
        rel = os.path.join(CONTROL_ROOT, name, "1")
        if model is None:  # exported above
            how = "tf.compat.v1 SavedModelBuilder"
        elif isinstance(model, tf.Module) and not hasattr(model, "export"):
            tf.saved_model.save(model, p(rel), signatures={"serving_default": model.serve})
            how = "tf.saved_model.save"
        else:
            model.export(p(rel), verbose=False)
            how = "model.export"
        fn = tf.saved_model.load(p(rel)).signatures["serving_default"]
        entry = {"dir": rel, "export": how, "signature": "serving_default", "inputs": spec,
                 "outputs": {}}
        cases = [("batch%d" % b, zoo_input(spec["x"], b)) for b in ZOO_BATCHES]
        if name in ("cond_loop", "tf1_cond"):  # the other branch
            cases.append(("negated_batch8", -np.array(zoo_input(spec["x"], 8), np.float32)))
        for key, x in cases:
            res = fn(x=tf.constant(x))
            for alias, t in sorted(res.items()):
                o = entry["outputs"].setdefault(alias, {"dtype": t.dtype.name})
                o[key] = {"shape": list(t.shape), "values": floats(t.numpy())}
        out[name] = entry
    with open(p(CONTROL_JSON), "w") as f:
        json.dump({"models": out}, f, indent=1, sort_keys=True)
        f.write("\n")


COVERAGE_ROOT = "tests/fixtures/models/coverage"
COVERAGE_JSON = "tests/fixtures/coverage.json"
REFUSED_ROOT = "tests/fixtures/models/refused"


def coverage_models():
    """name -> (model, how it is saved, input alias -> spec). Kept small:
    random weights compress poorly, so widths stay narrow."""
    import keras
    from keras import layers
    keras.utils.set_random_seed(0)
    bn = keras.Sequential([keras.Input((6,), name="x"), layers.Dense(5, activation="relu"),
                           layers.BatchNormalization(), layers.Dense(3)], name="keras_direct")
    # Moving statistics that are not the initial ones, so that a server which
    # left the non-trainable variables unset, or bound them wrongly, differs.
    bn.layers[1].moving_mean.assign(np.linspace(-0.5, 0.5, 5).astype(np.float32))
    bn.layers[1].moving_variance.assign(np.linspace(0.5, 2.0, 5).astype(np.float32))
    # Keras 3 exports groups > 1 as one Conv2D whose filter is shallower than
    # its input (ConvNeXt's depthwise conv takes this form); a dilated conv
    # beside it.
    img = keras.Input((7, 7, 4), name="image")
    g = layers.Conv2D(6, 3, padding="same", groups=2, name="grouped")(img)
    g = layers.Conv2D(4, 3, groups=4, dilation_rate=2, activation="relu", name="grouped_dilated")(
        layers.Conv2D(4, 1, name="pointwise")(g))
    grouped = keras.Model(img, layers.GlobalAveragePooling2D()(g), name="grouped_conv")
    # Image preprocessing in the graph: Resizing (bilinear, half-pixel
    # centres), UpSampling2D(bilinear), nearest-neighbour resizing.
    pic = keras.Input((5, 6, 3), name="picture")
    r = layers.Conv2D(2, 3, padding="same")(layers.Resizing(8, 10)(pic))
    r = layers.UpSampling2D(2, interpolation="bilinear")(r)
    r = layers.Resizing(4, 5, interpolation="nearest")(r)
    resize = keras.Model(pic, layers.Dense(3)(layers.Flatten()(r)), name="image_resize")
    # Keras preprocessing layers with vocabularies and buckets: tables
    # filled by the init op, read by the serving signature.
    words = keras.Input((3,), dtype="string", name="words")
    codes = keras.Input((2,), dtype="int64", name="codes")
    amount = keras.Input((2,), name="amount")
    sl = layers.StringLookup(vocabulary=["cat", "dog", "bird", "fish"])(words)
    il = layers.IntegerLookup(vocabulary=[7, 11, 42])(codes)
    feats = layers.Concatenate()([
        keras.ops.cast(sl, "float32"), keras.ops.cast(il, "float32"),
        keras.ops.cast(layers.Discretization(bin_boundaries=[-0.5, 0.0, 0.5])(amount), "float32"),
        layers.CategoryEncoding(num_tokens=6, output_mode="multi_hot")(sl),
        layers.CategoryEncoding(num_tokens=4, output_mode="count")(il)])
    lookups = keras.Model([words, codes, amount],
                          {"features": feats, "score": layers.Dense(2)(feats)}, name="lookups")
    # A residual block of 3x3 convolutions (stride 1, 16 to 32 channels), as
    # the engine runs by Winograd's F(2x2, 3x3): batch norms folded, a
    # projection shortcut added before the ReLU, an odd-sized map (tiles
    # past the edge), then a VALID 3x3.
    fm = keras.Input((11, 9, 16), name="features")
    h = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(32, 3, padding="same",
                                                                use_bias=False)(fm)))
    h = layers.BatchNormalization()(layers.Conv2D(32, 3, padding="same", use_bias=False)(h))
    sc = layers.BatchNormalization()(layers.Conv2D(32, 1, use_bias=False)(fm))
    h = layers.ReLU()(layers.Add()([h, sc]))
    h = layers.Conv2D(24, 3, activation="relu")(h)
    residual = keras.Model(fm, layers.Dense(5)(layers.GlobalAveragePooling2D()(h)),
                           name="residual_3x3")
    randomize_batchnorm(residual, np.random.default_rng(3))
    return {
        "residual_3x3": (residual, "model.export()",
                         {"features": {"dtype": "float32", "shape": [11, 9, 16], "gen": "float",
                                       "seed": 47}}),
        # A Keras 3 model handed to tf.saved_model.save itself (not
        # model.export()): its functions read the Keras variables, which
        # only the checkpoint's object graph binds.
        "keras_direct": (bn, "tf.saved_model.save(model)",
                         {"inputs": {"dtype": "float32", "shape": [6], "gen": "float", "seed": 5}}),
        "grouped_conv": (grouped, "model.export()",
                         {"image": {"dtype": "float32", "shape": [7, 7, 4], "gen": "float",
                                    "seed": 11}}),
        "lookups": (lookups, "model.export()",
                    {"words": {"dtype": "string", "shape": [3], "gen": "words", "seed": 2,
                               "words": ["cat", "dog", "emu", "bird", "", "fish", "yak"]},
                     "codes": {"dtype": "int64", "shape": [2], "gen": "int", "mod": 50,
                               "seed": 7},
                     "amount": {"dtype": "float32", "shape": [2], "gen": "float", "seed": 9}}),
        "image_resize": (resize, "model.export()",
                         {"picture": {"dtype": "float32", "shape": [5, 6, 3], "gen": "float",
                                      "seed": 13}}),
        "tf_function_ops": (TfFunctionOps(), "tf.function",
                            {"x": {"dtype": "float32", "shape": [4, 6], "gen": "float", "seed": 3},
                             "ids": {"dtype": "int64", "shape": [5], "gen": "int", "mod": 23,
                                     "seed": 1}}),
        "string_head": (StringHead(), "tf.function",
                        {"x": {"dtype": "float32", "shape": [3], "gen": "float", "seed": 7}}),
        "fnet_block": (fnet_block(), "model.export()",
                       {"tokens": {"dtype": "float32", "shape": [7, 6], "gen": "float",
                                   "seed": 41}}),
        "spectral_pipeline": (SpectralPipeline(), "tf.function",
                              {"x": {"dtype": "float32", "shape": [11], "gen": "float",
                                     "seed": 43}}),
        "audio_features": (AudioFeatures(), "tf.function",
                           {"audio": {"dtype": "float32", "shape": [72], "gen": "float",
                                      "seed": 45}}),
    }


def fnet_block():
    """An FNet encoder block as keras-hub writes it: token mixing by the real
    part of a 2-D FFT over (sequence, hidden) of the input cast to complex,
    then residual, LayerNorm and a feed-forward block. Sequence 7 and width 6
    are not powers of two."""
    import keras
    from keras import layers

    class FourierMixing(layers.Layer):
        def call(self, x):
            return tf.math.real(tf.signal.fft2d(tf.cast(x, tf.complex64)))

    tokens = keras.Input((7, 6), name="tokens")
    h = layers.LayerNormalization(epsilon=1e-12)(tokens + FourierMixing()(tokens))
    f = layers.Dense(6)(layers.Dense(12, activation="gelu")(h))
    return keras.Model(tokens, layers.LayerNormalization(epsilon=1e-12)(h + f), name="fnet_block")


class AudioFeatures(tf.Module):
    """Audio front ends in a tf.function: an STFT (frames, Hann window,
    RFFT), log-mel features and MFCCs (a DCT through a complex
    exponential), and the inverse STFT (IRFFT, overlap-add)."""

    def __init__(self):
        super().__init__()
        # Computed once here, as a model's __init__ does: a constant in the graph.
        self.mel = tf.constant(tf.signal.linear_to_mel_weight_matrix(
            num_mel_bins=5, num_spectrogram_bins=9, sample_rate=8000,
            lower_edge_hertz=100.0, upper_edge_hertz=3500.0).numpy())

    @tf.function(input_signature=[tf.TensorSpec([None, 72], tf.float32, name="audio")])
    def serve(self, audio):
        stft = tf.signal.stft(audio, frame_length=16, frame_step=8, fft_length=16)
        magnitude = tf.abs(stft)                                     # [b, 8, 9]
        log_mel = tf.math.log(tf.tensordot(magnitude, self.mel, 1) + 1e-3)
        window = tf.signal.inverse_stft_window_fn(8)
        return {"magnitude": magnitude, "log_mel": log_mel,
                "mfcc": tf.signal.mfccs_from_log_mel_spectrograms(log_mel),
                "inverse": tf.signal.inverse_stft(stft, 16, 8, 16, window_fn=window)}


class SpectralPipeline(tf.Module):
    """A tf.function spectral filter: rfft, magnitudes (ComplexAbs) with a
    learned gain, back through irfft at the signal's odd length; and a
    global filter as GFNet writes it, a complex64 weight (a checkpointed
    complex variable) multiplying the signal's spectrum."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(44)
        self.gain = tf.Variable(np.linspace(1.5, 0.25, 6).astype(np.float32))
        self.filter = tf.Variable((rng.normal(1, 0.3, 6) + 1j * rng.normal(0, 0.3, 6))
                                  .astype(np.complex64))

    @tf.function(input_signature=[tf.TensorSpec([None, 11], tf.float32, name="x")])
    def serve(self, x):
        spec = tf.signal.rfft(x)                                   # [b, 6] complex64
        mag = tf.abs(spec) * self.gain
        smooth = tf.signal.irfft(tf.complex(mag, tf.zeros_like(mag)), fft_length=[11])
        filtered = tf.signal.irfft(spec * tf.cast(self.gain, tf.complex64), fft_length=[11])
        global_filter = tf.signal.irfft(spec * self.filter, fft_length=[11])
        return {"magnitude": mag, "smooth": smooth, "filtered": filtered,
                "global_filter": global_filter}


def hub_coverage_models():
    """Three keras-hub backbones (BERT, GPT-2, ViT) built from their config
    constructors at tiny widths, random weights. Needs keras-hub==0.21.1
    (pip install --no-deps keras-hub==0.21.1: its tensorflow-text dependency
    would replace TensorFlow 2.19.1, and the backbones do not use it)."""
    import keras
    import keras_hub
    keras.utils.set_random_seed(21)
    seq, vocab = 12, 97
    ids = {"dtype": "int32", "shape": [seq], "gen": "int", "mod": vocab, "seed": 3}
    mask = {"dtype": "int32", "shape": [seq], "gen": "mask"}
    bert = keras_hub.models.BertBackbone(vocabulary_size=vocab, num_layers=2, num_heads=2,
                                         hidden_dim=16, intermediate_dim=32,
                                         max_sequence_length=seq)
    gpt2 = keras_hub.models.GPT2Backbone(vocabulary_size=vocab, num_layers=2, num_heads=2,
                                         hidden_dim=16, intermediate_dim=32,
                                         max_sequence_length=seq)
    vit = keras_hub.models.ViTBackbone(image_shape=(16, 16, 3), patch_size=4, num_layers=2,
                                       num_heads=2, hidden_dim=16, mlp_dim=32)
    # The backbone's own input is named by Keras' global counter; a named
    # Input in front gives the signature a stable alias.
    images = keras.Input((16, 16, 3), name="images")
    vit = keras.Model(images, vit(images), name="vit")
    return {
        "hub_bert": (bert, "model.export()",
                     {"token_ids": ids, "segment_ids": dict(ids, mod=2, seed=5),
                      "padding_mask": mask}),
        "hub_gpt2": (gpt2, "model.export()", {"token_ids": dict(ids, seed=7),
                                              "padding_mask": mask}),
        "hub_vit": (vit, "model.export()",
                    {"images": {"dtype": "float32", "shape": [16, 16, 3], "gen": "float",
                                "seed": 17}}),
    }


HUB_COVERAGE = ("hub_bert", "hub_gpt2", "hub_vit")


class TfFunctionOps(tf.Module):
    """A tf.function pipeline of the ops real exports put around a network:
    an Einsum with an ellipsis, a causal band mask, arg/top-k picks, gathers
    by coordinates, floor division, rolls and flips, buckets, scans."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(16)
        self.w = tf.Variable(rng.normal(0, 0.5, (6, 5)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 4, 6], tf.float32, name="x"),
                                  tf.TensorSpec([None, 5], tf.int64, name="ids")])
    def serve(self, x, ids):
        h = tf.einsum("...ij,jk->...ik", x, self.w)                       # [b, 4, 5]
        scores = tf.einsum("...ik,...jk->...ij", h, h)                    # [b, 4, 4]
        causal = tf.linalg.band_part(tf.ones_like(scores), -1, 0)
        masked = tf.where(causal > 0, scores, tf.fill(tf.shape(scores), -1e9))
        top_v, top_i = tf.math.top_k(masked, k=2)
        flipped = tf.reverse(tf.roll(h, shift=1, axis=1), axis=[2])
        rows = tf.range(tf.shape(ids, out_type=tf.int64)[0])
        picked = tf.gather_nd(flipped, tf.stack([rows, ids[:, 0] % 4, ids[:, 1] % 5], axis=1))
        return {
            "picked": picked,
            "nonzero": tf.where(ids % 3 == 0),
            "argmax": tf.argmax(masked, axis=-1),
            "argmin": tf.argmin(h, axis=1, output_type=tf.int32),
            "top_values": top_v,
            "top_indices": top_i,
            "flipped": flipped,
            "buckets": tf.raw_ops.Bucketize(input=h, boundaries=[-1.0, 0.0, 0.5, 2.0]),
            "floor_div": tf.math.floordiv(ids, 4),
            "floor_mod": tf.math.floormod(ids - 11, 5),
            "angle": tf.math.atan2(h[:, :, 0], h[:, :, 1] + 0.5),
            "finite": tf.math.is_finite(tf.math.log(h + 1.0)),
            "cumprod": tf.math.cumprod(tf.nn.sigmoid(h), axis=2, exclusive=True),
            "cumsum": tf.math.cumsum(h, axis=1, reverse=True),
        }


class StringHead(tf.Module):
    """An Estimator-style classification head: class names as a string
    constant, tiled per example and gathered by the predicted class."""

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def serve(self, x):
        names = tf.constant(["cat", "dog", ""])
        tiled = tf.tile(tf.expand_dims(names, 0), tf.stack([tf.shape(x)[0], 1]))
        best = tf.argmax(x, axis=1)
        return {"classes": tiled, "scores": tf.nn.softmax(x),
                "label": tf.gather(names, best),
                "ranked": tf.gather(tiled, tf.argsort(-x, axis=1), batch_dims=1)}


def export_coverage(only=None):
    """Every coverage model, or (only: names) just those, the others' files
    and entries left as they are."""
    out = {}
    if only:
        with open(p(COVERAGE_JSON)) as f:
            out = json.load(f)["models"]
    elif os.path.isdir(p(COVERAGE_ROOT)):
        shutil.rmtree(p(COVERAGE_ROOT))
    models = {**coverage_models(), **text_coverage_models()}
    if not only or set(only) & set(HUB_COVERAGE):
        models.update(hub_coverage_models())
    for name, (model, how, spec) in models.items():
        if only and name not in only:
            continue
        rel = os.path.join(COVERAGE_ROOT, name, "1")
        if only and os.path.isdir(p(os.path.dirname(rel))):
            shutil.rmtree(p(os.path.dirname(rel)))
        if how.startswith("TF1"):
            model(p(rel))  # writes the SavedModel itself
        elif how == "tf.saved_model.save(model)":
            tf.saved_model.save(model, p(rel))
        elif how == "tf.function":
            tf.saved_model.save(model, p(rel), signatures={"serving_default": model.serve})
        else:
            model.export(p(rel), verbose=False)
        fn = tf.saved_model.load(p(rel)).signatures["serving_default"]
        entry = {"dir": rel, "export": how, "signature": "serving_default", "inputs": spec,
                 "outputs": {}}
        for b in ZOO_BATCHES:
            feeds = {a: tf.constant(zoo_input(sp, b)) for a, sp in spec.items()}
            for alias, t in sorted(fn(**feeds).items()):
                o = entry["outputs"].setdefault(alias, {"dtype": t.dtype.name})
                vals = ([v.decode() for v in t.numpy().reshape(-1)] if t.dtype == tf.string
                        else [int(v) for v in t.numpy().reshape(-1)] if not t.dtype.is_floating
                        else floats(t.numpy()))
                o["batch%d" % b] = {"shape": list(t.shape), "values": vals}
        out[name] = entry
    with open(p(COVERAGE_JSON), "w") as f:
        json.dump({"models": out}, f, indent=1, sort_keys=True)
        f.write("\n")
    if only:
        return
    # A model TensorFlow serves and tensord refuses at load (an Einsum that
    # sums a label away): the load must fail naming the node, while the
    # version before it keeps serving (tests/e2e/test_coverage.py).
    rel = os.path.join(REFUSED_ROOT, "einsum_summed", "1")
    if os.path.isdir(p(os.path.dirname(rel))):
        shutil.rmtree(p(os.path.dirname(rel)))
    m = EinsumSummed()
    tf.saved_model.save(m, p(rel), signatures={"serving_default": m.serve})


class EinsumSummed(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2))

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def serve(self, x):
        return {"y": tf.einsum("ij,jk->i", x, self.w)}


# --- text: strings, hashing, regexes, vocabularies (coverage models) ------
TEXT_WORDS = ["Hello World", "  Mixed Case\t", "tab\tend ", "x,y.z!", "H\u00e9llo W\u00f6rld",
              "abc", "The CAT, the dog.", "don't stop"]


def text_coverage_models():
    """The text half of the coverage set: name -> (model, how, spec), as
    coverage_models()."""
    import keras
    from keras import layers
    keras.utils.set_random_seed(0)
    words = keras.Input((3,), dtype="string", name="words")
    codes = keras.Input((2,), dtype="int64", name="codes")
    hashing = keras.Model([words, codes], {
        "fast": layers.Hashing(16)(words),
        "salted": layers.Hashing(16, salt=[3, 5])(words),
        "salt_int": layers.Hashing(8, salt=7)(words),
        "codes": layers.Hashing(10)(codes)}, name="hashing")
    # A text classifier's front: TextVectorization (lower_and_strip_punctuation,
    # whitespace split, a vocabulary table, padded or cut to 6 tokens).
    corpus = ["The cat sat on the mat.", "A dog, a cat!", "Dogs and cats don't mix",
              "the END"]
    text = keras.Input((1,), dtype="string", name="text")
    tv = layers.TextVectorization(max_tokens=12, output_sequence_length=6)
    tv.adapt(corpus)
    tokens = tv(text)
    emb = layers.GlobalAveragePooling1D()(layers.Embedding(12, 3)(tokens))
    vectorize = keras.Model(text, {"tokens": tokens, "score": layers.Dense(2)(emb)},
                            name="text_vectorization")
    sentences = {"dtype": "string", "shape": [1], "gen": "words", "seed": 5,
                 "words": ["The cat, the DOG!", "", "  mat  sat   on", "unknown words only",
                           "cats; dogs: mix? (a)", "the the the the the the the the",
                           "don't stop", "H\u00e9llo cat"]}
    # The bag-of-words modes over unigrams and bigrams (RaggedBincount), and
    # lookups turned back into words and codes (invert=True).
    modes = {}
    for mode in ("multi_hot", "count", "tf_idf"):
        layer = layers.TextVectorization(max_tokens=10, output_mode=mode, ngrams=2)
        layer.adapt(corpus)
        modes[mode] = layer(text)
    bags = keras.Model(text, modes, name="text_bags")
    ids = keras.Input((3,), dtype="int64", name="ids")
    inverted = keras.Model(ids, {
        "words": layers.StringLookup(vocabulary=["cat", "dog", "bird"], invert=True)(ids),
        "codes": layers.IntegerLookup(vocabulary=[7, 11, 42], invert=True)(ids)},
        name="lookup_invert")
    tf1_words = {"dtype": "string", "shape": [3], "gen": "words", "seed": 2,
                 "words": ["cat", "dog", "emu", "bird", "", "fish", "yak", "owl"]}
    return {
        "tf1_vocab": (lambda path: export_tf1_vocab(path, legacy=False),
                      "TF1 Builder, main_op, assets/", {"words": tf1_words}),
        "tf1_vocab_legacy": (lambda path: export_tf1_vocab(path, legacy=True),
                             "TF1 Builder, legacy_init_op, assets/", {"words": tf1_words}),
        "text_bags": (bags, "model.export()", {"text": sentences}),
        "lookup_invert": (inverted, "model.export()",
                          {"ids": {"dtype": "int64", "shape": [3], "gen": "int", "mod": 5,
                                   "seed": 1}}),
        "text_vectorization": (vectorize, "model.export()", {"text": sentences}),
        "text_ops": (TextOps(), "tf.function",
                     {"text": dict(sentences, shape=[], seed=3)}),
        # Keras Hashing with and without salt (Fingerprint64, SipHash-2-4),
        # over strings and integers.
        "hashing": (hashing, "model.export()",
                    {"words": {"dtype": "string", "shape": [3], "gen": "words", "seed": 4,
                               "words": ["cat", "dog", "", "H\u00e9llo", "a much longer word "
                                         "that takes the block loop of the hash" * 2]},
                     "codes": {"dtype": "int64", "shape": [2], "gen": "int", "mod": 1000,
                               "seed": 3}}),
        "string_ops": (StringOps(), "tf.function",
                       {"text": {"dtype": "string", "shape": [2], "gen": "words", "seed": 1,
                                 "words": TEXT_WORDS},
                        "x": {"dtype": "float32", "shape": [2], "gen": "float", "seed": 5},
                        "ids": {"dtype": "int64", "shape": [2], "gen": "int", "mod": 700,
                                "seed": 2},
                        "numbers": {"dtype": "string", "shape": [2], "gen": "words", "seed": 3,
                                    "words": ["3.5", " -2 ", "1e3", "0.1", "-0", "inf"]},
                        "counts": {"dtype": "string", "shape": [2], "gen": "words", "seed": 6,
                                   "words": ["7", "-12", " 300", "+4", "2147483647"]}}),
    }


def export_tf1_vocab(path, legacy):
    """A TF1 graph whose tables come from asset files (assets/vocab.txt, a
    tab-separated assets/labels.tsv), initialised by the main op or the
    legacy init op: words to ids (with and without OOV buckets, a cut
    vocab_size), ids back to words, words to labels by column."""
    import tempfile
    v1 = tf.compat.v1
    src = tempfile.mkdtemp()
    vocab = os.path.join(src, "vocab.txt")
    with open(vocab, "w") as f:
        f.write("cat\ndog\nbird\r\nfish\nowl\n")
    labels = os.path.join(src, "labels.tsv")
    with open(labels, "w") as f:
        f.write("cat\tfeline\t1\ndog\tcanine\t2\nowl\tstrigine\t3\n")
    g = tf.Graph()
    with g.as_default():
        words = v1.placeholder(tf.string, [None, 3], name="words")
        vocab_t = tf.constant(vocab, name="vocab_path")
        labels_t = tf.constant(labels, name="labels_path")
        v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, vocab_t)
        v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, labels_t)
        lines = tf.lookup.TextFileIndex

        def by_line(**kw):
            return tf.lookup.TextFileInitializer(vocab_t, tf.string, lines.WHOLE_LINE, tf.int64,
                                                 lines.LINE_NUMBER, **kw)
        ids = tf.lookup.StaticHashTable(by_line(), -1)
        oov = tf.lookup.StaticVocabularyTable(by_line(), num_oov_buckets=3)
        short = tf.lookup.StaticHashTable(by_line(vocab_size=3), -1)
        back = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
            vocab_t, tf.int64, lines.LINE_NUMBER, tf.string, lines.WHOLE_LINE), "UNK")
        by_col = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
            labels_t, tf.string, 0, tf.string, 1, delimiter="\t"), "?")
        num_col = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
            labels_t, tf.string, 0, tf.int64, 2, delimiter="\t"), -7)
        # A mutable table filled by the init op: two inserts in order, the
        # second overwriting a key of the first.
        mutable = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, -5)
        first = mutable.insert(tf.constant(["cat", "emu", "yak"]), tf.constant([10, 11, 12], tf.int64))
        with tf.control_dependencies([first]):
            second = mutable.insert(tf.constant(["yak", "owl"]), tf.constant([20, 21], tf.int64))
        found = ids.lookup(words)
        outs = {"ids": found, "oov_ids": oov.lookup(words), "short_ids": short.lookup(words),
                "back": back.lookup(tf.maximum(found, 0)), "label": by_col.lookup(words),
                "label_num": num_col.lookup(words), "inserted": mutable.lookup(words),
                "inserted_size": tf.fill([tf.shape(words)[0]], mutable.size())}
        init = tf.group(v1.tables_initializer(), second)
        with v1.Session() as sess:
            sess.run(init)
            b = v1.saved_model.Builder(path)
            sig = v1.saved_model.predict_signature_def({"words": words}, outs)
            kw = {"legacy_init_op": init} if legacy else {"main_op": init}
            b.add_meta_graph_and_variables(
                sess, ["serve"], signature_def_map={"serving_default": sig},
                assets_collection=v1.get_collection(v1.GraphKeys.ASSET_FILEPATHS), **kw)
            b.save()
    shutil.rmtree(src)


class TextOps(tf.Module):
    """Regexes, splits and n-grams as tf.strings pipelines use them: static
    and tensor patterns, whitespace and separator splits into ragged
    tensors, bigrams with and without padding, ragged results made dense."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(self, text):
        low = tf.strings.lower(text)
        words = tf.strings.split(low)                                  # ragged [b, None]
        grams = tf.strings.ngrams(words, 2, separator="_")
        padded = tf.strings.ngrams(words, (1, 3), separator=" ", pad_values=("<s>", "</s>"),
                                   padding_width=1)
        short = tf.strings.ngrams(words, 4, preserve_short_sequences=True)
        pattern = tf.constant("([a-z]+)'([a-z]+)")
        return {
            "stripped": tf.strings.regex_replace(low, r"[[:punct:]]", ""),
            "first_vowel": tf.strings.regex_replace(text, "[aeiou]", "#", replace_global=False),
            "swapped": tf.strings.regex_replace(low, pattern, r"\2'\1"),
            "mentions_cat": tf.strings.regex_full_match(low, ".*\\bcats?\\b.*"),
            "plain_words": tf.strings.regex_full_match(low, tf.constant("[a-z ]+")),
            "words": words.to_tensor(default_value="<pad>"),
            "word_count": words.row_lengths(),
            "fixed_words": words.to_tensor(shape=[None, 3]),
            "comma_split": tf.strings.split(text, sep=",", maxsplit=1).to_tensor(),
            "bigrams": grams.to_tensor(),
            "padded_grams": padded.to_tensor(),
            "short_grams": short.to_tensor(),
            "rejoined": tf.strings.reduce_join(words, axis=1, separator="+"),
            "by_length": tf.strings.unsorted_segment_join(
                words.flat_values, tf.minimum(tf.strings.length(words.flat_values), 4), 5,
                separator=","),
        }


class StringOps(tf.Module):
    """Elementwise string ops as tf.function pipelines put them: formatting
    numbers, lengths, joins, case, whitespace, substrings, parsing numbers,
    the legacy hash."""

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.string, name="text"),
                                  tf.TensorSpec([None, 2], tf.float32, name="x"),
                                  tf.TensorSpec([None, 2], tf.int64, name="ids"),
                                  tf.TensorSpec([None, 2], tf.string, name="numbers"),
                                  tf.TensorSpec([None, 2], tf.string, name="counts")])
    def serve(self, text, x, ids, numbers, counts):
        return {
            "as_int": tf.strings.as_string(ids),
            "as_fixed": tf.strings.as_string(x, precision=3),
            "as_sci": tf.strings.as_string(x * 1000.0, scientific=True),
            "as_short": tf.strings.as_string(x, shortest=True),
            "as_padded": tf.strings.as_string(ids, width=5, fill="0"),
            "as_bool": tf.strings.as_string(x > 0),
            "bytes": tf.strings.length(text),
            "chars": tf.strings.length(text, unit="UTF8_CHAR"),
            "joined": tf.strings.join([text, "|", tf.strings.as_string(ids)], separator="-"),
            "lower": tf.strings.lower(text),
            "upper": tf.strings.upper(text),
            "stripped": tf.strings.strip(text),
            "substr": tf.strings.substr(text, 1, 3),
            "substr_tail": tf.strings.substr(text, -2, 5),
            "substr_chars": tf.strings.substr(text, 1, 4, unit="UTF8_CHAR"),
            "legacy_bucket": tf.strings.to_hash_bucket(text, 100),
            "number": tf.strings.to_number(numbers),
            "count": tf.strings.to_number(counts, tf.int64),
            "count32": tf.strings.to_number(counts, tf.int32),
        }


def large_models():
    """name -> (builder, input alias -> spec) for export_large."""
    import keras
    from keras import layers
    img = {"dtype": "float32", "shape": [224, 224, 3], "gen": "float", "seed": 1}

    def app(fn, **kw):
        return lambda: fn(weights=None, input_shape=(224, 224, 3), **kw)

    def bert():
        import keras_hub
        return keras_hub.models.BertBackbone(vocabulary_size=30522, num_layers=4, num_heads=12,
                                             hidden_dim=768, intermediate_dim=3072,
                                             max_sequence_length=128)

    def wide_mlp():
        return keras.Sequential([keras.Input((512,), name="x")] +
                                [layers.Dense(2048, activation="relu") for _ in range(4)] +
                                [layers.Dense(1)], name="wide_mlp")
    ids = {"dtype": "int32", "shape": [128], "gen": "int", "mod": 30522, "seed": 3}
    return {
        "resnet50_224": (app(keras.applications.ResNet50), None),
        "mobilenet_v2_224": (app(keras.applications.MobileNetV2), None),
        "efficientnet_b0_224": (app(keras.applications.EfficientNetB0), None),
        "bert_4x768": (bert, {"token_ids": ids,
                              "segment_ids": dict(ids, mod=2, seed=5),
                              "padding_mask": {"dtype": "int32", "shape": [128], "gen": "mask"}}),
        "wide_mlp": (wide_mlp, {"x": {"dtype": "float32", "shape": [512], "gen": "float",
                                      "seed": 2}}),
    }, img


def export_large(out_dir):
    out_dir = os.path.abspath(out_dir)
    models, img = large_models()
    entries = {}
    for name, (build, inputs) in models.items():
        rel = os.path.join(out_dir, name, "1")
        if not os.path.isdir(rel):
            build().export(rel, verbose=False)
        if inputs is None:  # one image input: its alias is the signature's
            fn = tf.saved_model.load(rel).signatures["serving_default"]
            (alias,) = fn.structured_input_signature[1].keys()
            inputs = {alias: img}
        entries[name] = {"dir": rel, "export": "model.export", "signature": "serving_default",
                         "inputs": inputs}
    with open(os.path.join(out_dir, "large.json"), "w") as f:
        json.dump({"models": entries}, f, indent=1, sort_keys=True)
        f.write("\n")


def export_pbtxt():
    from google.protobuf import text_format
    from tensorflow.core.protobuf import saved_model_pb2
    os.makedirs(p("tests/fixtures/pbtxt"), exist_ok=True)
    for name, rel in PBTXT.items():
        sm = saved_model_pb2.SavedModel()
        with open(p(os.path.join(rel, "saved_model.pb")), "rb") as f:
            sm.ParseFromString(f.read())
        with open(p("tests/fixtures/pbtxt/%s.pbtxt" % name), "w") as f:
            f.write(text_format.MessageToString(sm))


# --- Numeric, image and control-flow ops of the long tail -------------------
# Small models whose graphs hold them, each checked against TensorFlow by
# tests/e2e/test_coverage_ops.py on the CPU and the reference device.
# python3 scripts/make_fixtures.py --coverage-ops
OPS_ROOT = "tests/fixtures/models/coverage_ops"
OPS_JSON = "tests/fixtures/coverage_ops.json"


def ops_models():
    """name -> (model or TF1 writer, how it is saved, input alias -> spec)."""
    import keras
    from keras import layers
    keras.utils.set_random_seed(1)
    # Keras Conv2DTranspose exports Conv2DBackpropInput: SAME with strides,
    # VALID with a non-square window.
    img = keras.Input((5, 6, 3), name="image")
    t = layers.Conv2DTranspose(4, 3, strides=2, padding="same", name="up")(img)
    t = layers.Conv2DTranspose(2, (2, 3), padding="valid", activation="relu", name="widen")(t)
    conv_t = keras.Model(img, t, name="conv_transpose")
    # Conv3D, 3-D pools and Conv3DTranspose (Conv3DBackpropInputV2).
    clip = keras.Input((4, 5, 6, 2), name="clip")
    v = layers.Conv3D(3, 2, padding="same", activation="relu", name="conv3d")(clip)
    v = layers.MaxPooling3D(2, padding="same", name="max3d")(v)
    v = layers.Conv3DTranspose(2, 2, strides=(1, 2, 2), name="conv3d_t")(v)
    v = layers.AveragePooling3D((1, 2, 2), strides=(1, 2, 1), padding="same", name="avg3d")(v)
    volume = keras.Model(clip, v, name="volumetric")
    return {
        "conv_transpose": (conv_t, "model.export()",
                           {"image": {"dtype": "float32", "shape": [5, 6, 3], "gen": "float",
                                      "seed": 21}}),
        "volumetric": (volume, "model.export()",
                       {"clip": {"dtype": "float32", "shape": [4, 5, 6, 2], "gen": "float",
                                 "seed": 23}}),
        "image_ops": (ImageOps(), "tf.function",
                      {"image": {"dtype": "float32", "shape": [6, 7, 3], "gen": "float",
                                 "seed": 25}}),
        "scatter_segments": (ScatterSegments(), "tf.function",
                             {"x": {"dtype": "float32", "shape": [6], "gen": "float", "seed": 27},
                              "ids": {"dtype": "int64", "shape": [5], "gen": "int", "mod": 23,
                                      "seed": 4}}),
        "tf1_while": (export_tf1_while, "tf1",
                      {"x": {"dtype": "float32", "shape": [4], "gen": "float", "seed": 29}}),
        "tf1_dropout": (export_tf1_dropout, "tf1",
                        {"x": {"dtype": "float32", "shape": [4], "gen": "float", "seed": 31}}),
        "spectral_ops": (SpectralOps(), "tf.function",
                         {"x": {"dtype": "float32", "shape": [3, 5], "gen": "float", "seed": 33},
                          "wave": {"dtype": "float32", "shape": [8], "gen": "float",
                                   "seed": 35}}),
        "unicode_text": (UnicodeText(), "tf.function",
                         {"text": {"dtype": "string", "shape": [2], "gen": "words", "seed": 3,
                                   "words": UNICODE_WORDS}}),
        "string_tail": (StringTail(), "tf.function",
                        {"text": {"dtype": "string", "shape": [3], "gen": "words", "seed": 2,
                                  "words": ["apple", "B\u00e9\"t'a\n", "cat", "dog\tx",
                                            "\u00e9mile", "fig", "apple", "ab\\c\x01"]},
                         "x": {"dtype": "float32", "shape": [3], "gen": "float", "seed": 7},
                         "n": {"dtype": "int32", "shape": [3], "gen": "int", "mod": 9,
                               "seed": 1}}),
        "conv3d_dilated": (DilatedConv3D(), "tf.function",
                           {"clip": {"dtype": "float32", "shape": [4, 5, 6, 2], "gen": "float",
                                     "seed": 33}}),
        "nchw": (ChannelsFirst2D(), "tf.function",
                 {"image": {"dtype": "float32", "shape": [3, 6, 7], "gen": "float",
                            "seed": 37}}),
        "ncdhw": (ChannelsFirst3D(), "tf.function",
                  {"clip": {"dtype": "float32", "shape": [2, 4, 5, 6], "gen": "float",
                            "seed": 35}}),
    }


def parts(z):
    """A complex tensor as [..., 2] floats (REST answers no complex values)."""
    return tf.stack([tf.math.real(z), tf.math.imag(z)], axis=-1)


class SpectralOps(tf.Module):
    """Every FFT op and the complex elementwise ops around them: prime, odd
    and even lengths, batch dims, fft_length cropping and zero-padding the
    signal. Two more signatures hold complex values at the edge: "spectrum"
    takes and returns complex64, "rfft" returns it (served over gRPC; REST
    refuses complex values as TF Serving does)."""

    @tf.function(input_signature=[tf.TensorSpec([None, 3, 5], tf.float32, name="x"),
                                  tf.TensorSpec([None, 8], tf.float32, name="wave")])
    def serve(self, x, wave):
        z = tf.complex(x, tf.reverse(x, axis=[2]) * 0.5)                        # [b, 3, 5]
        zc = tf.cast(x, tf.complex64) * tf.constant(0.5 - 0.25j, tf.complex64) + 1.0
        mixed = tf.concat([z, tf.transpose(zc, [0, 2, 1])[:, :3, :]], axis=2)  # [b, 3, 8]
        stacked = tf.stack([z, tf.math.conj(z) - zc], axis=1)                   # [b, 2, 3, 5]
        spec = tf.signal.rfft(wave)                                             # [b, 5]
        spec2 = tf.signal.rfft2d(x)                                             # [b, 3, 3]
        return {
            "fft": parts(tf.signal.fft(z)),
            "ifft": parts(tf.signal.ifft(mixed)),
            "fft2d": parts(tf.signal.fft2d(zc)),
            "ifft2d": parts(tf.signal.ifft2d(tf.reshape(mixed, [-1, 4, 6]))),
            "fft3d": parts(tf.signal.fft3d(stacked)),
            "ifft3d": parts(tf.signal.ifft3d(stacked)),
            "rfft": parts(spec),
            "rfft_cropped": parts(tf.signal.rfft(wave, fft_length=[5])),
            "rfft_padded": parts(tf.signal.rfft(wave, fft_length=[11])),
            "rfft2d": parts(spec2),
            "rfft2d_sized": parts(tf.signal.rfft2d(x, fft_length=[2, 4])),
            "rfft3d": parts(tf.signal.rfft3d(tf.reshape(x, [-1, 1, 3, 5]))),
            "irfft": tf.signal.irfft(spec),
            "irfft_odd": tf.signal.irfft(spec, fft_length=[9]),
            "irfft_cropped": tf.signal.irfft(spec, fft_length=[6]),
            "irfft_padded": tf.signal.irfft(spec, fft_length=[14]),
            "irfft2d": tf.signal.irfft2d(spec2, fft_length=[3, 5]),
            "irfft2d_sized": tf.signal.irfft2d(spec2, fft_length=[2, 6]),
            "irfft3d": tf.signal.irfft3d(tf.signal.rfft3d(tf.reshape(x, [-1, 1, 3, 5]))),
            "abs": tf.abs(z),
            "angle": tf.math.angle(zc),
            "real": tf.math.real(z - zc),
            "imag": tf.math.imag(z * zc),
            "quotient": parts(z / zc),
            "cast_back": tf.cast(tf.signal.fft(zc), tf.float32),
            "flat": parts(tf.reshape(tf.signal.fft(mixed), [-1, 24])),
        }

    @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.complex64, name="z")])
    def spectrum(self, z):
        return {"spectrum": tf.signal.fft(z), "power": tf.math.real(z * tf.math.conj(z))}

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="wave")])
    def rfft(self, wave):
        return {"spectrum": tf.signal.rfft(wave)}

    def extra_signatures(self):
        return {"spectrum": self.spectrum, "rfft": self.rfft}




class DilatedConv3D(tf.Module):
    """Dilated Conv3D both ways a graph holds it: the dilations attribute
    of Conv3D itself (tf.nn.conv3d), and SpaceToBatchND / BatchToSpaceND
    around an undilated one (tf.nn.convolution, Keras Conv3D with a
    dilation_rate)."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(19)
        self.w = tf.Variable(rng.normal(0, 0.5, (2, 2, 2, 2, 3)).astype(np.float32))
        self.v = tf.Variable(rng.normal(0, 0.5, (2, 3, 2, 2, 2)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 4, 5, 6, 2], tf.float32, name="clip")])
    def serve(self, clip):
        return {
            "same": tf.nn.conv3d(clip, self.w, [1, 1, 1, 1, 1], "SAME", dilations=[1, 1, 2, 2, 1]),
            "valid": tf.nn.conv3d(clip, self.v, [1, 1, 1, 1, 1], "VALID",
                                  dilations=[1, 3, 2, 1, 1]),
            "to_batch": tf.nn.convolution(clip, self.w, padding="SAME", dilations=[2, 2, 2]),
        }


class ChannelsFirst2D(tf.Module):
    """Conv2D (strided, dilated), DepthwiseConv2dNative, MaxPool, AvgPool,
    FusedBatchNormV3 and BiasAdd with data_format="NCHW", as a graph built
    for a GPU holds them. TensorFlow's CPU runs these through oneDNN; the
    export checks them against the NHWC ops on transposed tensors."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(29)
        self.w = tf.Variable(rng.normal(0, 0.5, (3, 2, 3, 4)).astype(np.float32))
        self.dw = tf.Variable(rng.normal(0, 0.5, (3, 3, 4, 2)).astype(np.float32))
        self.b = tf.Variable(rng.normal(0, 0.5, (8,)).astype(np.float32))
        self.bn = [tf.Variable(rng.uniform(0.5, 1.5, (8,)).astype(np.float32)) for _ in range(4)]

    def ops(self, x, fmt):
        def nd(v):  # a layout list written NHWC, in fmt
            return v if fmt == "NHWC" else [v[0], v[3], v[1], v[2]]
        conv = tf.nn.conv2d(x, self.w, nd([1, 2, 1, 1]), "SAME", data_format=fmt)
        dil = tf.nn.conv2d(x, self.w, 1, "VALID", data_format=fmt, dilations=nd([1, 2, 1, 1]))
        dw = tf.nn.depthwise_conv2d(tf.nn.relu(conv), self.dw, [1, 1, 1, 1], "SAME",
                                    data_format=fmt)
        scale, offset, mean, var = self.bn
        y = tf.compat.v1.nn.fused_batch_norm(dw, scale, offset, mean - 1.0, var, epsilon=1e-3,
                                             is_training=False, data_format=fmt)[0]
        return {"conv": conv, "dilated": dil,
                "bn_bias": tf.nn.bias_add(y, self.b, data_format=fmt),
                "max": tf.nn.max_pool2d(y, nd([1, 2, 2, 1]), nd([1, 2, 1, 1]), "SAME",
                                        data_format=fmt),
                "avg": tf.nn.avg_pool2d(x, nd([1, 2, 3, 1]), nd([1, 1, 2, 1]), "VALID",
                                        data_format=fmt)}

    @tf.function(input_signature=[tf.TensorSpec([None, 3, 6, 7], tf.float32, name="image")])
    def serve(self, image):
        return self.ops(image, "NCHW")

    def check(self, image):
        last = self.ops(tf.transpose(image, [0, 2, 3, 1]), "NHWC")
        for k, v in self.serve(image).items():
            want = tf.transpose(last[k], [0, 3, 1, 2])
            np.testing.assert_allclose(v.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


class ChannelsFirst3D(tf.Module):
    """Conv3D (dilated too), MaxPool3D and AvgPool3D with
    data_format="NCDHW". TensorFlow's CPU runs these through oneDNN; the
    export checks them against the NDHWC ops on transposed tensors."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(23)
        self.w = tf.Variable(rng.normal(0, 0.5, (2, 2, 3, 2, 3)).astype(np.float32))

    def ops(self, x, fmt):
        conv = tf.nn.conv3d(x, self.w, [1, 1, 1, 2, 1] if fmt == "NDHWC" else [1, 1, 1, 1, 2],
                            "SAME", data_format=fmt)
        dil = tf.nn.conv3d(x, self.w, [1] * 5, "VALID", data_format=fmt,
                           dilations=[1, 2, 1, 2, 1] if fmt == "NDHWC" else [1, 1, 2, 1, 2])
        win = [1, 2, 2, 2, 1] if fmt == "NDHWC" else [1, 1, 2, 2, 2]
        step = [1, 1, 2, 2, 1] if fmt == "NDHWC" else [1, 1, 1, 2, 2]
        return {"conv": conv, "dilated": dil,
                "max": tf.nn.max_pool3d(conv, win, step, "SAME", data_format=fmt),
                "avg": tf.nn.avg_pool3d(x, win, step, "VALID", data_format=fmt)}

    @tf.function(input_signature=[tf.TensorSpec([None, 2, 4, 5, 6], tf.float32, name="clip")])
    def serve(self, clip):
        return self.ops(clip, "NCDHW")

    def check(self, clip):
        last = self.ops(tf.transpose(clip, [0, 2, 3, 4, 1]), "NDHWC")
        for k, v in self.serve(clip).items():
            want = tf.transpose(last[k], [0, 4, 1, 2, 3])
            np.testing.assert_allclose(v.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


UNICODE_WORDS = ["\u039f\u0394\u039f\u03a3 \u03a3\u0391\u03a3", "\u03a3",
                 "\u1f48\u0394\u03a5\u03a3\u03a3\u0395\u038e\u03a3.",
                 "\u041f\u0440\u0438\u0432\u0435\u0442, \u041c\u0438\u0440 \u0401\u0436",
                 "Stra\u00dfe \ufb01ne", "\u0130stanbul \u01c5 \u01c6", "",
                 "\u00c0\u00c9\u00ce\u00d5\u00dc \u00e0\u00e9\u00ee\u00f5\u00fc \u00ff",
                 "na\u00efve caf\u00e9", "emoji \U0001f600 ok", "A\u03a3'\u0301 b",
                 "\u0561\u0587 \u10d0 \u13a0"]


class StringTail(tf.Module):
    """tf.strings.format of every dtype and rank (summarize, escapes),
    reduce_join over dense axes, unique of strings and bools, substr with
    pos / len broadcast against the input."""

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.string, name="text"),
                                  tf.TensorSpec([None, 3], tf.float32, name="x"),
                                  tf.TensorSpec([None, 3], tf.int32, name="n")])
    def serve(self, text, x, n):
        flat = tf.reshape(text, [-1])
        words, word_idx = tf.unique(flat)
        signs, sign_idx, sign_count = tf.unique_with_counts(tf.reshape(x > 0, [-1]),
                                                            out_idx=tf.int64)
        cube = tf.reshape(tf.tile(text, [1, 2]), [-1, 2, 3])
        return {
            "fmt": tf.strings.format("x={} n={} t={}", (x, n, text)),
            "fmt_short": tf.strings.format("{} / {}", (x, text), summarize=1),
            "fmt_all": tf.strings.format("{}", tf.reshape(n, [-1, 1, 3]), summarize=-1),
            "fmt_scalars": tf.strings.format(
                "a % b % c % d % e %", (x[0, 0], tf.cast(x[0, 1], tf.float64) / 3.0,
                                        n[0, 0] > 4, text[0, 0], tf.cast(n[0, 1], tf.uint8)),
                placeholder="%"),
            "fmt_cube": tf.strings.format("{}", tf.reshape(tf.range(60) * n[0, 0], [3, 4, 5]),
                                          summarize=2),
            "fmt_empty": tf.strings.format("<{}> <{}> <{}>",
                                           (x[:0], tf.zeros([2, 0]), tf.constant(7.0)),
                                           summarize=0),
            "fmt_special": tf.strings.format("{}", tf.constant(
                [1e10, 1e-7, 123456789.0, float("nan"), -float("inf"), 0.1, -0.0])),
            "join_all": tf.strings.reduce_join(text),
            "join_rows": tf.strings.reduce_join(text, axis=1, separator="|"),
            "join_cols": tf.strings.reduce_join(text, axis=0, keepdims=True, separator=","),
            "join_last": tf.strings.reduce_join(text, axis=-1, keepdims=True),
            "join_cube": tf.strings.reduce_join(cube, axis=[2, 0], separator="-"),
            "join_cube_t": tf.strings.reduce_join(cube, axis=[0, 2], separator="+"),
            "join_none": tf.raw_ops.ReduceJoin(inputs=text, reduction_indices=tf.constant([], tf.int32)),
            "words": words, "word_idx": word_idx,
            "signs": signs, "sign_idx": sign_idx, "sign_count": sign_count,
            "substr_bcast": tf.strings.substr(text, [0, 1, 2], [2, 1, 3], unit="UTF8_CHAR"),
            "substr_cols": tf.strings.substr(text[:, :1], [[0, 1, 3]], [[1, 2, -1]],
                                             unit="UTF8_CHAR"),
            "substr_rows": tf.strings.substr(tf.strings.regex_replace(text[:, 0], "[^a-z]", "_"),
                                             tf.zeros_like(n[:1, :1]),
                                             tf.ones_like(n[:1, :1]) * 3),
        }


class UnicodeText(tf.Module):
    """The Unicode ops a tf.strings preprocessing pipeline uses: full case
    mapping (Latin-1, Greek with its final sigma, Cyrillic, the
    SpecialCasing expansions), decoding to code points with byte offsets,
    encoding back, transcoding through UTF-16-BE / UTF-32-BE, and every
    error mode on ill-formed input (built in the graph: JSON carries only
    valid UTF-8)."""

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.string, name="text")])
    def serve(self, text):
        bad = tf.strings.join([text, tf.constant(b"\xe2\x82|\xff\xed\xa0\x80\x01\xc3")])
        chars = tf.strings.unicode_decode(text, "UTF-8")
        _, starts = tf.strings.unicode_decode_with_offsets(text, "UTF-8")
        flat = tf.reshape(text, [-1])
        codes = tf.strings.unicode_decode(flat, "UTF-8")
        invalid = tf.RaggedTensor.from_row_lengths(
            tf.constant([104, 0x110000, -1, 0xD800, 0xDFFF, 65, 0x10FFFF, 0xFDD0, 0x1FFFE, 0xDBFF,
                         0xDC00, 0xDC00, 0xD800, 233], tf.int32), [3, 0, 4, 7])
        utf16 = tf.strings.unicode_transcode(text, "UTF-8", "UTF-16-BE")
        utf32 = tf.strings.unicode_transcode(text, "UTF-8", "UTF-32-BE")
        bad16 = tf.strings.unicode_transcode(bad, "UTF-8", "UTF-16-BE", replacement_char=0x2A)
        return {
            "lower": tf.strings.lower(text, encoding="utf-8"),
            "upper": tf.strings.upper(text, encoding="utf-8"),
            "lower_bad": tf.strings.lower(bad, encoding="utf-8"),
            "upper_bad": tf.strings.upper(bad, encoding="utf-8"),
            "ascii_lower": tf.strings.lower(text),
            "upper_to_nul": tf.strings.upper(tf.strings.join([text, "\x00", text]),
                                             encoding="utf-8"),
            "chars": chars.to_tensor(-1),
            "starts": starts.to_tensor(-1),
            "bad_replace": tf.strings.unicode_decode(
                bad, "UTF-8", replacement_char=63, replace_control_characters=True).to_tensor(-1),
            "bad_ignore": tf.strings.unicode_decode(bad, "UTF-8", errors="ignore").to_tensor(-1),
            "bad_starts": tf.strings.unicode_decode_with_offsets(bad, "UTF-8")[1].to_tensor(-1),
            "encoded": tf.strings.unicode_encode(codes, "UTF-8"),
            "encoded_invalid": tf.strings.unicode_encode(invalid, "UTF-8"),
            "encoded_ignore": tf.strings.unicode_encode(invalid, "UTF-8", errors="ignore"),
            "encoded_ignore16": tf.strings.unicode_decode(tf.strings.unicode_encode(
                invalid, "UTF-16-BE", errors="ignore"), "UTF-16-BE").to_tensor(-1),
            "utf16_bytes_len": tf.strings.length(utf16),
            "utf16_codes": tf.strings.unicode_decode(utf16, "UTF-16-BE").to_tensor(-1),
            "utf16_back": tf.strings.unicode_transcode(utf16, "UTF-16-BE", "UTF-8"),
            "utf32_codes": tf.strings.unicode_decode(utf32, "UTF-32-BE").to_tensor(-1),
            "utf32_back": tf.strings.unicode_transcode(utf32, "UTF-32-BE", "UTF-8"),
            "utf16_of_bad": tf.strings.unicode_decode(bad16, "UTF-16-BE").to_tensor(-1),
            "utf16_broken": tf.strings.unicode_transcode(
                tf.strings.substr(utf16, 0, 5), "UTF-16-BE", "UTF-8", errors="replace"),
            "utf32_broken": tf.strings.unicode_transcode(
                tf.strings.substr(utf32, 0, 6), "UTF-32-BE", "UTF-8", replacement_char=0x3F),
        }

class ImageOps(tf.Module):
    """An image preprocessing pipeline in a tf.function: every resize method
    tf.image offers beyond bilinear / nearest, crops by boxes and the colour
    adjustments (Keras's RandomContrast and friends are identities when
    serving, so the ops are called directly)."""

    @tf.function(input_signature=[tf.TensorSpec([None, 6, 7, 3], tf.float32, name="image")])
    def serve(self, image):
        pic = tf.nn.sigmoid(image * 3.0)
        n = tf.shape(pic)[0]
        boxes = tf.tile(tf.constant([[0.1, 0.0, 0.9, 0.8], [-0.1, 0.2, 0.5, 1.1]]), [n, 1])
        box_ind = tf.repeat(tf.range(n), 2)
        hsv = tf.image.rgb_to_hsv(pic)
        return {
            "bicubic": tf.image.resize(pic, [9, 5], method="bicubic"),
            "bicubic_legacy": tf.compat.v1.image.resize_bicubic(pic, [4, 10], align_corners=True),
            "area": tf.image.resize(pic, [4, 3], method="area"),
            "crop_bilinear": tf.image.crop_and_resize(pic, boxes, box_ind, [3, 4]),
            "crop_nearest": tf.image.crop_and_resize(pic, boxes, box_ind, [5, 2],
                                                     method="nearest", extrapolation_value=-1.0),
            "hsv": hsv,
            "rgb": tf.image.hsv_to_rgb(hsv * [1.0, 0.5, 1.0]),
            "contrast": tf.image.adjust_contrast(pic, 1.8),
            "saturation": tf.image.adjust_saturation(pic, 0.4),
            "hue": tf.image.adjust_hue(pic, 0.3),
        }


class ScatterSegments(tf.Module):
    """Scatters, segment reductions and embedding combiners in a tf.function,
    guarded by an assertion and a numerics check that pass on good input
    (a bad id answers INVALID_ARGUMENT with the assertion's message)."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(17)
        self.table = tf.Variable(rng.normal(0, 0.5, (23, 4)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.float32, name="x"),
                                  tf.TensorSpec([None, 5], tf.int64, name="ids")])
    def serve(self, x, ids):
        x = tf.debugging.check_numerics(x, "x")
        check = tf.debugging.assert_less(ids, tf.constant(23, tf.int64),
                                         message="ids must be below 23")
        with tf.control_dependencies([check]):
            ids = tf.identity(ids)
        n = tf.shape(x, out_type=tf.int64)[0]
        flat = tf.reshape(ids, [-1])
        rows = tf.repeat(tf.range(n), 5)
        cols = tf.constant([0, 0, 1, 1, 1, 3], tf.int64)
        xt = tf.transpose(x)
        picked = tf.gather(self.table, ids)
        where = tf.stack([tf.range(n), ids[:, 0] % 6], axis=1)
        uniq, uniq_idx = tf.unique(flat % 7)
        uc, uc_idx, uc_count = tf.unique_with_counts(flat % 5, out_idx=tf.int64)
        return {
            "scatter": tf.scatter_nd(where, x[:, 0] + 1.0, tf.stack([n, 6])),
            "update": tf.tensor_scatter_nd_update(x, where, x[:, 1] * 10.0),
            "add": tf.tensor_scatter_nd_add(x, where, x[:, 2]),
            "sub": tf.tensor_scatter_nd_sub(ids, where[:, :1], ids * 2),
            "max": tf.tensor_scatter_nd_max(x, where, tf.zeros_like(x[:, 0])),
            "min": tf.tensor_scatter_nd_min(x, where, tf.zeros_like(x[:, 0])),
            "seg_sum": tf.math.segment_sum(xt, cols),
            "seg_mean": tf.math.segment_mean(xt, cols),
            "seg_max": tf.math.segment_max(xt, cols),
            "seg_min": tf.math.segment_min(xt, cols),
            "seg_prod": tf.math.segment_prod(xt, cols),
            "unsorted_sum": tf.math.unsorted_segment_sum(picked, ids % 4, 4),
            "unsorted_max": tf.math.unsorted_segment_max(picked, ids % 4, 5),
            "unsorted_min": tf.math.unsorted_segment_min(picked, ids % 4, 4),
            "unsorted_prod": tf.math.unsorted_segment_prod(ids, ids % 3, 3),
            "emb_sum": tf.sparse.segment_sum(self.table, flat, rows),
            "emb_mean": tf.sparse.segment_mean(self.table, flat, rows, num_segments=n + 1),
            "emb_sqrtn": tf.sparse.segment_sqrt_n(self.table, flat, rows),
            "unique": uniq, "unique_idx": uniq_idx,
            "uc": uc, "uc_idx": uc_idx, "uc_count": uc_count,
        }


def export_tf1_while(path):
    """A TF1 graph with tf.while_loop in control flow v1 (Enter, Merge,
    Switch, LoopCond, NextIteration, Exit in frames): a loop reading a ref
    variable and an invariant, a loop whose trip count comes from the
    input, and a loop nested in another."""
    v1 = tf.compat.v1
    v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
            w = v1.Variable([0.5, -1.0, 2.0, 0.25], dtype=tf.float32, name="w", use_resource=False)
            x = v1.placeholder(tf.float32, [None, 4], name="x")
            bias = tf.reduce_mean(x, axis=0)
            _, y = tf.while_loop(lambda i, a: i < 3,
                                 lambda i, a: (i + 1, tf.tanh(a * w + bias * tf.cast(i, tf.float32))),
                                 [tf.constant(0), x], name="steps")
            limit = tf.cast(tf.reduce_sum(tf.abs(x)) * 2.0, tf.int32) % 5 + 1
            k, total = tf.while_loop(lambda k, t: k < limit, lambda k, t: (k + 1, t * 0.5 + 1.0),
                                     [tf.constant(0), tf.reduce_sum(x, axis=1)], name="counted")

            def outer(j, acc):
                _, inner = tf.while_loop(lambda q, b: q < j + 1, lambda q, b: (q + 1, b + x * 0.1),
                                         [tf.constant(0), acc], name="inner")
                return j + 1, inner
            _, nested = tf.while_loop(lambda j, acc: j < 3, outer, [tf.constant(0), x], name="outer")
            sess.run(v1.global_variables_initializer())
            u = v1.saved_model.signature_def_utils
            builder = v1.saved_model.Builder(path)
            builder.add_meta_graph_and_variables(
                sess, [v1.saved_model.tag_constants.SERVING],
                signature_def_map={"serving_default": u.predict_signature_def(
                    inputs={"x": x},
                    outputs={"y": tf.identity(y, name="y"), "trips": tf.identity(k, name="trips"),
                             "total": tf.identity(total, name="total"),
                             "nested": tf.identity(nested, name="nested")})})
            builder.save()
            ops = {n.op for n in g.as_graph_def().node}
            assert {"Enter", "Exit", "LoopCond", "NextIteration"} <= ops, sorted(ops)
    finally:
        v1.enable_control_flow_v2()


def export_tf1_dropout(path):
    """A TF1 graph whose dropout sits in the untaken branch of a tf.cond on
    a learning-phase placeholder_with_default(False): RandomUniform is in
    the graph, never run when serving."""
    v1 = tf.compat.v1
    v1.disable_control_flow_v2()
    try:
        with tf.Graph().as_default() as g, v1.Session(graph=g) as sess:
            x = v1.placeholder(tf.float32, [None, 4], name="x")
            training = v1.placeholder_with_default(False, [], name="keras_learning_phase")
            h = tf.cond(training, lambda: tf.nn.dropout(x, rate=0.5), lambda: tf.identity(x))
            noisy = tf.cond(training, lambda: h + tf.random.normal(tf.shape(h)), lambda: h)
            u = v1.saved_model.signature_def_utils
            builder = v1.saved_model.Builder(path)
            builder.add_meta_graph_and_variables(
                sess, [v1.saved_model.tag_constants.SERVING],
                signature_def_map={"serving_default": u.predict_signature_def(
                    inputs={"x": x}, outputs={"y": tf.identity(noisy * 2.0 + 1.0, name="y")})})
            builder.save()
            ops = {n.op for n in g.as_graph_def().node}
            assert {"RandomUniform", "RandomStandardNormal", "Switch"} <= ops, sorted(ops)
    finally:
        v1.enable_control_flow_v2()


def export_ops_models(only=None):
    """Every op model, or (only: names) just those, the others' files and
    entries left as they are."""
    out = {}
    if only:
        with open(p(OPS_JSON)) as f:
            out = json.load(f)["models"]
    elif os.path.isdir(p(OPS_ROOT)):
        shutil.rmtree(p(OPS_ROOT))
    for name, (model, how, spec) in ops_models().items():
        if only and name not in only:
            continue
        rel = os.path.join(OPS_ROOT, name, "1")
        if only and os.path.isdir(p(os.path.dirname(rel))):
            shutil.rmtree(p(os.path.dirname(rel)))
        if how == "tf.function":
            if hasattr(model, "check"):  # references that need a second route
                for b in ZOO_BATCHES:
                    model.check(*[tf.constant(zoo_input(sp, b)) for sp in spec.values()])
            sigs = {"serving_default": model.serve}
            if hasattr(model, "extra_signatures"):
                sigs.update(model.extra_signatures())
            tf.saved_model.save(model, p(rel), signatures=sigs)
        elif how == "tf1":
            model(p(rel))
        else:
            model.export(p(rel), verbose=False)
        fn = tf.saved_model.load(p(rel)).signatures["serving_default"]
        entry = {"dir": rel, "export": how, "signature": "serving_default", "inputs": spec,
                 "outputs": {}}
        for b in ZOO_BATCHES:
            feeds = {a: tf.constant(zoo_input(sp, b)) for a, sp in spec.items()}
            for alias, t in sorted(fn(**feeds).items()):
                o = entry["outputs"].setdefault(alias, {"dtype": t.dtype.name})
                vals = ([v.decode() for v in np.array(t.numpy(), dtype=object).reshape(-1)]
                        if t.dtype == tf.string
                        else [int(v) for v in t.numpy().reshape(-1)] if not t.dtype.is_floating
                        else floats(t.numpy()))
                o["batch%d" % b] = {"shape": list(t.shape), "values": vals}
        out[name] = entry
    with open(p(OPS_JSON), "w") as f:
        json.dump({"models": out}, f, indent=1, sort_keys=True)
        f.write("\n")
    # A complex reduction TensorFlow serves and tensord's Sum kernel does
    # not take: the load fails naming the node (tests/e2e/test_complex.py).
    rel = os.path.join(REFUSED_ROOT, "complex_sum", "1")
    if os.path.isdir(p(os.path.dirname(rel))):
        shutil.rmtree(p(os.path.dirname(rel)))
    m = ComplexSum()
    tf.saved_model.save(m, p(rel), signatures={"serving_default": m.serve})


class ComplexSum(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def serve(self, x):
        total = tf.reduce_sum(tf.signal.fft(tf.cast(x, tf.complex64)), axis=1)
        return {"y": tf.math.real(total)}


def main():
    check_version()
    seed_everything()
    if sys.argv[1:] == ["--lowp"]:
        # Only the float16 / bfloat16 models: python3 scripts/make_fixtures.py --lowp
        export_lowp()
        return
    if sys.argv[1:] == ["--control"]:
        # Only the control-flow models: python3 scripts/make_fixtures.py --control
        export_control()
        return
    if sys.argv[1:2] == ["--large"] and len(sys.argv) == 3:
        # Real-size benchmark models: python3 scripts/make_fixtures.py --large DIR
        export_large(sys.argv[2])
        return
    if sys.argv[1:2] == ["--applications"] and len(sys.argv) >= 3:
        # One member of every keras.applications family, never committed:
        # python3 scripts/make_fixtures.py --applications DIR [NAME...]
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from fixtures_applications import export_applications
        export_applications(sys.argv[2], sys.argv[3:])
        return
    if sys.argv[1:] == ["--coverage"]:
        # Only the long-tail models: python3 scripts/make_fixtures.py --coverage
        export_coverage()
        return
    if sys.argv[1:2] == ["--coverage-ops"]:
        # Some of them: python3 scripts/make_fixtures.py --coverage-ops NAME...
        export_ops_models(sys.argv[2:])
        return
    if sys.argv[1:2] == ["--coverage"]:
        # Some of them: python3 scripts/make_fixtures.py --coverage NAME...
        export_coverage(sys.argv[2:])
        return
    if sys.argv[1:] == ["--pbtxt"]:
        # Only the text-format copies: python3 scripts/make_fixtures.py --pbtxt
        export_pbtxt()
        return
    if sys.argv[1:] == ["--zoo"]:
        # Only the model zoo (slow to rebuild, large): python3 scripts/make_fixtures.py --zoo
        if os.path.isdir(p(ZOO_ROOT)):
            shutil.rmtree(p(ZOO_ROOT))
        export_zoo()
        return
    if sys.argv[1:]:
        # Anything else (--help, a typo) would otherwise fall through to the
        # full rewrite below, which deletes and regenerates the fixtures.
        sys.exit(__doc__ + f"\nunknown arguments: {' '.join(sys.argv[1:])}")
    for rel in WIPE + [REF_JSON]:
        if os.path.isdir(p(rel)):
            shutil.rmtree(p(rel))
        elif os.path.exists(p(rel)):
            os.remove(p(rel))
    os.makedirs(p("tests/fixtures/models"), exist_ok=True)
    export_tf2(TF2_DIR, 0.5, 2.0)
    for rel, b in THREE_DIRS.items():
        export_tf2(rel, 0.5, b)
    export_tf1(TF1_DIR)
    export_missing_var(MISSING_DIR)
    write_reference()
    summarize()


if __name__ == "__main__":
    main()
