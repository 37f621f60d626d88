"""The keras.applications zoo for scripts/make_fixtures.py --applications DIR [NAME...].

One member of every keras.applications family, at the smallest input the
family accepts, with random weights (weights=None, a fixed seed per model, and
random BatchNormalization statistics so folding them is observable), exported
the way users export them (model.export(); one also by
tf.saved_model.save(model, dir)). Beside each SavedModel, TensorFlow's own
outputs for a seeded random batch of 2, computed by the exported signature as
reloaded from disk:

  DIR/<name>/1/                      the SavedModel
  DIR/<name>/io.npz                  input (the batch) and output (TF's answer)
  DIR/applications.json              name -> family, export form, input alias,
                                     output alias, image size, parameter count

These networks cannot shrink their widths (ResNet50 alone is ~100 MB), so they
are never committed: scripts/test.d/55-applications.sh makes them at CI time
into a cache directory keyed by this file and the TensorFlow version.
"""
import json
import os
import shutil
import sys
import time

import numpy as np
import tensorflow as tf

# name -> (constructor, smallest input side, input range, extra kwargs).
# The range is what the network expects: [0, 255] where the model carries its
# own preprocessing layers (ConvNeXt, EfficientNet(V2), MobileNetV3), [-1, 1]
# for the rest (their preprocess_input outputs about that range).
# Widths are each family's smallest (alpha, B0, Tiny, 121, 50, 16, Mobile).
APPLICATIONS = {
    "convnext_tiny": ("ConvNeXtTiny", 32, (0, 255), {}),
    "densenet121": ("DenseNet121", 32, (-1, 1), {}),
    "efficientnet_b0": ("EfficientNetB0", 32, (0, 255), {}),
    "efficientnet_v2_b0": ("EfficientNetV2B0", 32, (0, 255), {}),
    "inception_resnet_v2": ("InceptionResNetV2", 75, (-1, 1), {}),
    "inception_v3": ("InceptionV3", 75, (-1, 1), {}),
    "mobilenet": ("MobileNet", 32, (-1, 1), {"alpha": 0.25}),
    "mobilenet_v2": ("MobileNetV2", 32, (-1, 1), {"alpha": 0.35}),
    "mobilenet_v3_small": ("MobileNetV3Small", 32, (0, 255), {"alpha": 0.75}),
    "mobilenet_v3_large": ("MobileNetV3Large", 32, (0, 255), {"alpha": 0.75}),
    "nasnet_mobile": ("NASNetMobile", 32, (-1, 1), {}),
    "resnet50": ("ResNet50", 32, (-1, 1), {}),
    "resnet50_v2": ("ResNet50V2", 32, (-1, 1), {}),
    "vgg16": ("VGG16", 32, (-1, 1), {}),
    "xception": ("Xception", 71, (-1, 1), {}),
}
# The same network saved with tf.saved_model.save(model, dir) instead of
# model.export(): its checkpoint keys follow Keras' object graph.
SAVED_DIRECTLY = {"mobilenet_v2_saved": "mobilenet_v2"}
BATCH = 2


def build(name):
    import keras
    ctor, side, _, kw = APPLICATIONS[name]
    seed = sorted(APPLICATIONS).index(name)
    keras.utils.set_random_seed(seed)
    # Logits (classifier_activation=None): a saturated softmax over 1000
    # classes would hide an error in the network below it.
    model = getattr(keras.applications, ctor)(weights=None, input_shape=(side, side, 3),
                                              classifier_activation=None, **kw)
    rng = np.random.default_rng(seed)
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.BatchNormalization):
            c = layer.moving_mean.shape[0]
            if layer.gamma is not None:  # scale=False (InceptionResNetV2) has none
                layer.gamma.assign(rng.uniform(0.5, 1.5, c).astype(np.float32))
            if layer.beta is not None:
                layer.beta.assign(rng.normal(0, 0.1, c).astype(np.float32))
            layer.moving_mean.assign(rng.normal(0, 0.1, c).astype(np.float32))
            layer.moving_variance.assign(rng.uniform(0.5, 1.5, c).astype(np.float32))
    return model, seed


def batch(name, seed):
    _, side, (lo, hi), _ = APPLICATIONS[name]
    rng = np.random.default_rng(1000 + seed)
    return rng.uniform(lo, hi, (BATCH, side, side, 3)).astype(np.float32)


def export_one(out_dir, name, base, how):
    model, seed = build(base)
    vdir = os.path.join(out_dir, name, "1")
    if how == "model.export":
        model.export(vdir, verbose=False)
    else:
        tf.saved_model.save(model, vdir)
    fn = tf.saved_model.load(vdir).signatures["serving_default"]
    (alias, spec), = fn.structured_input_signature[1].items()
    x = batch(base, seed)
    res = fn(**{alias: tf.constant(x)})
    (out_alias, y), = res.items()
    np.savez(os.path.join(out_dir, name, "io.npz"), input=x, output=y.numpy())
    ctor, side, _, kw = APPLICATIONS[base]
    return {"family": ctor, "export": how, "input": alias, "output": out_alias,
            "side": side, "kwargs": kw, "params": int(model.count_params())}


def keras_version():
    import keras
    return keras.__version__


def export_applications(out_dir, only=None):
    out_dir = os.path.abspath(out_dir)
    names = [(n, n, "model.export") for n in APPLICATIONS]
    names += [(n, b, "tf.saved_model.save") for n, b in SAVED_DIRECTLY.items()]
    if only:
        unknown = sorted(set(only) - {n for n, _, _ in names})
        if unknown:
            sys.exit("make_fixtures.py --applications: unknown model(s) %s; known: %s" %
                     (", ".join(unknown), ", ".join(n for n, _, _ in names)))
        names = [t for t in names if t[0] in only]
    os.makedirs(out_dir, exist_ok=True)
    manifest_path = os.path.join(out_dir, "applications.json")
    entries = {}
    if only and os.path.exists(manifest_path):
        with open(manifest_path) as f:
            entries = json.load(f)["models"]
    for name, base, how in names:
        if os.path.isdir(os.path.join(out_dir, name)):
            shutil.rmtree(os.path.join(out_dir, name))
        start = time.monotonic()
        entries[name] = export_one(out_dir, name, base, how)
        print("applications: %-20s %-20s %9d params  %5.1f s" % (
            name, how, entries[name]["params"], time.monotonic() - start), flush=True)
        # Rewritten after every model, so a run cut short keeps what it made.
        with open(manifest_path + ".tmp", "w") as f:
            json.dump({"tensorflow": tf.__version__, "keras": keras_version(), "batch": BATCH, "models": entries}, f,
                      indent=1, sort_keys=True)
            f.write("\n")
        os.replace(manifest_path + ".tmp", manifest_path)
