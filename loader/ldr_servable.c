/* The load sequence mirrors TF Serving's SavedModel bundle loader: read,
 * select MetaGraph, import, restore, init, then compile serving plans. The
 * SavedModel proto is freed at the end: nothing protobuf outlives the load. */
#include "ldr_servable.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "eng_device.h"
#include "eng_model.h"
#include "ldr_bundle.h"
#include "ldr_import.h"
#include "ldr_objgraph.h"
#include "ldr_proto.h"
#include "td_clock.h"
#include "td_file.h"
#include "td_log.h"
#include "ldr_savedmodel.h"
#include "td_pbdepth.h"
#include "tensorflow/core/protobuf/saved_model.pb-c.h"

#define DEFAULT_SIGNATURE "serving_default"
#define INIT_OP_SIGNATURE "__saved_model_init_op"

struct ldr_servable {
  atomic_int refs;
  int64_t version;
  char *path;
  eng_model *model;
  int n_sigs;
  ldr_signature *sigs;
  uint64_t variable_bytes; /* restored from the checkpoint */
};

static char *join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", a, b);
  return p;
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static td_code read_saved_model(const char *dir, Tensorflow__SavedModel **out, td_err *err) {
  return ldr_savedmodel_read(dir, out, NULL, NULL, err);
}

/* The MetaGraph whose tag set equals the requested set. */
static const Tensorflow__MetaGraphDef *pick_meta_graph(const Tensorflow__SavedModel *sm,
                                                       const char *tags, td_err *err) {
  char want[32][64];
  int n_want = 0;
  const char *p = tags;
  while (*p) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    bool dup = false;
    for (int w = 0; w < n_want && !dup; w++)
      dup = strlen(want[w]) == len && !memcmp(want[w], p, len);
    /* A tag we cannot hold matches nothing; never drop it silently. */
    if (len >= 64 || (len && !dup && n_want == 32)) break;
    if (len && !dup) {
      memcpy(want[n_want], p, len);
      want[n_want++][len] = '\0';
    }
    p += len + (comma ? 1 : 0);
  }
  for (size_t m = 0; m < sm->n_meta_graphs && !*p; m++) {
    const Tensorflow__MetaGraphDef *mg = sm->meta_graphs[m];
    const Tensorflow__MetaGraphDef__MetaInfoDef *mi = mg->meta_info_def;
    size_t nt = mi ? mi->n_tags : 0;
    bool all = true;
    for (int w = 0; w < n_want && all; w++) {
      bool hit = false;
      for (size_t t = 0; t < nt; t++) hit |= !strcmp(mi->tags[t], want[w]);
      all = hit;
    }
    for (size_t t = 0; t < nt && all; t++) {
      bool hit = false;
      for (int w = 0; w < n_want; w++) hit |= !strcmp(mi->tags[t], want[w]);
      all = hit;
    }
    if (all) return mg;
  }
  td_err_set(err, TD_NOT_FOUND, "no MetaGraph in the SavedModel has exactly the tags { %s }", tags);
  return NULL;
}

static int cmp_info(const void *a, const void *b) {
  return strcmp(((const ldr_tensor_info *)a)->alias, ((const ldr_tensor_info *)b)->alias);
}

static int cmp_sig(const void *a, const void *b) {
  return strcmp(((const ldr_signature *)a)->key, ((const ldr_signature *)b)->key);
}

/* Keeps dim names only when some dim has one (rare: the metadata API prints
 * them back). */
static td_code dim_names(const Tensorflow__TensorShapeProto *p, ldr_tensor_info *t, td_err *err) {
  if (t->shape.rank <= 0) return TD_OK;
  bool any = false;
  for (int d = 0; d < t->shape.rank; d++) any |= p->dim[d]->name && *p->dim[d]->name;
  if (!any) return TD_OK;
  t->dim_names = calloc((size_t)t->shape.rank, sizeof *t->dim_names);
  if (!t->dim_names) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int d = 0; d < t->shape.rank; d++) {
    t->dim_names[d] = strdup(p->dim[d]->name ? p->dim[d]->name : "");
    if (!t->dim_names[d]) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  return TD_OK;
}

static td_code convert_infos(Tensorflow__SignatureDef__InputsEntry **entries, size_t n,
                             ldr_tensor_info **out, int *n_out, td_err *err) {
  /* InputsEntry and OutputsEntry have the same layout (key, value). */
  ldr_tensor_info *t = calloc(n + 1, sizeof *t);
  if (!t) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  *out = t;
  *n_out = (int)n;
  for (size_t i = 0; i < n; i++) {
    const Tensorflow__TensorInfo *ti = entries[i]->value;
    t[i].alias = strdup(entries[i]->key);
    if (!t[i].alias) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    if (!ti || ti->encoding_case != TENSORFLOW__TENSOR_INFO__ENCODING_NAME)
      return td_err_set(err, TD_UNIMPLEMENTED, "'%s' uses a sparse or composite encoding",
                        entries[i]->key);
    t[i].name = strdup(ti->name);
    if (!t[i].name) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    t[i].dtype = eng_dtype_widened(eng_dtype_from_tf(ti->dtype, NULL)); /* tf_dtype keeps DT_HALF */
    t[i].tf_dtype = ti->dtype;
    const ProtobufCEnumValue *dv =
        protobuf_c_enum_descriptor_get_value(&tensorflow__data_type__descriptor, ti->dtype);
    t[i].dtype_name = dv ? dv->name : NULL;
    t[i].has_shape = ti->tensor_shape != NULL;
    if (ti->tensor_shape) {
      td_code rc = ldr_proto_shape(ti->tensor_shape, &t[i].shape, err);
      if (rc) return td_err_prefix(err, "'%s'", entries[i]->key);
      rc = dim_names(ti->tensor_shape, &t[i], err);
      if (rc) return rc;
    } else {
      t[i].shape = eng_shape_unknown();
    }
  }
  qsort(t, n, sizeof *t, cmp_info);
  return TD_OK;
}

static void free_infos(ldr_tensor_info *t, int n) {
  for (int i = 0; t && i < n; i++) {
    free(t[i].alias);
    free(t[i].name);
    for (int d = 0; t[i].dim_names && d < t[i].shape.rank; d++) free(t[i].dim_names[d]);
    free(t[i].dim_names);
  }
  free(t);
}

static void free_signatures(ldr_signature *s, int n) {
  for (int i = 0; s && i < n; i++) {
    free(s[i].key);
    free(s[i].method_name);
    free_infos(s[i].inputs, s[i].n_inputs);
    free_infos(s[i].outputs, s[i].n_outputs);
    if (!s[i].plan_shared) eng_plan_destroy(s[i].plan);
    free(s[i].plan_error);
  }
  free(s);
}

static td_code convert_signatures(const Tensorflow__MetaGraphDef *mg, ldr_servable *sv, td_err *err) {
  size_t n = mg->n_signature_def;
  sv->sigs = calloc(n + 1, sizeof *sv->sigs);
  if (!sv->sigs) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  sv->n_sigs = (int)n;
  for (size_t i = 0; i < n; i++) {
    const Tensorflow__MetaGraphDef__SignatureDefEntry *e = mg->signature_def[i];
    ldr_signature *s = &sv->sigs[i];
    s->key = strdup(e->key);
    s->method_name = strdup(e->value && e->value->method_name ? e->value->method_name : "");
    if (!s->key || !s->method_name) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    if (!e->value) continue;
    td_code rc = convert_infos(e->value->inputs, e->value->n_inputs, &s->inputs, &s->n_inputs, err);
    if (!rc)
      rc = convert_infos((Tensorflow__SignatureDef__InputsEntry **)e->value->outputs,
                         e->value->n_outputs, &s->outputs, &s->n_outputs, err);
    if (rc) return td_err_prefix(err, "signature '%s'", e->key);
  }
  qsort(sv->sigs, n, sizeof *sv->sigs, cmp_sig);
  return TD_OK;
}

/* --- restore and init -------------------------------------------------- */

typedef struct restore_ctx {
  const ldr_bundle *b;
  ldr_servable *sv;
  const char *dir; /* the version directory: assets are read only below it */
} restore_ctx;

/* Asset files for init ops (vocabularies), read at load. Only files inside
 * the version directory are read: a graph naming another path (or one
 * climbing out with "..") fails its load. */
#define MAX_ASSET_BYTES ((size_t)1 << 30)
static td_code asset_read(void *ctx, const char *path, char **data, size_t *len, td_err *err) {
  restore_ctx *rx = ctx;
  size_t dl = strlen(rx->dir);
  while (dl > 1 && rx->dir[dl - 1] == '/') dl--;
  if (strncmp(path, rx->dir, dl) || path[dl] != '/' || strstr(path, "/../"))
    return td_err_set(err, TD_INVALID_ARGUMENT, "asset '%s' is outside the version directory %s",
                      path, rx->dir);
  return td_file_read(path, MAX_ASSET_BYTES, (uint8_t **)data, len, err);
}

static td_code bundle_restore(void *ctx, const char *prefix, const char *key, eng_dtype dtype,
                              eng_tensor *out, td_err *err) {
  restore_ctx *rx = ctx;
  if (!rx->b)
    return td_err_set(err, TD_NOT_FOUND, "no checkpoint to restore '%s' from (%s)", key, prefix);
  td_code rc = ldr_bundle_read(rx->b, key, dtype, out, err);
  /* Called from the pool's threads at once (eng_io). */
  if (!rc) __atomic_fetch_add(&rx->sv->variable_bytes, eng_tensor_nbytes(out), __ATOMIC_RELAXED);
  return rc;
}

static td_code bundle_verify(void *ctx, const char *prefix, const char *key, eng_dtype dtype,
                             eng_dtype *out_dtype, eng_shape *out_shape, td_err *err) {
  restore_ctx *rx = ctx;
  if (!rx->b)
    return td_err_set(err, TD_NOT_FOUND, "no checkpoint to check '%s' in (%s)", key, prefix);
  return ldr_bundle_verify(rx->b, key, dtype, out_dtype, out_shape, err);
}

static td_code string_scalar(const char *s, eng_tensor *t, td_err *err) {
  size_t len = strlen(s);
  eng_shape sc = eng_shape_scalar();
  td_code rc = eng_tensor_alloc_strings(t, &sc, &len, err);
  if (!rc) memcpy(eng_tensor_str_bytes(t, 0), s, len);
  return rc;
}

/* Asset placeholders fed with "<dir>/assets/<filename>". */
typedef struct feeds {
  int n;
  eng_feed f[64];
  char *names[64];
} feeds;

static void feeds_free(feeds *fs) {
  for (int i = 0; i < fs->n; i++) {
    eng_tensor_release(&fs->f[i].tensor);
    free(fs->names[i]);
  }
  fs->n = 0;
}

static td_code feeds_add(feeds *fs, const char *name, const char *value, td_err *err) {
  if (fs->n == 64) return td_err_set(err, TD_UNIMPLEMENTED, "more than 64 asset files");
  fs->names[fs->n] = strdup(name);
  if (!fs->names[fs->n]) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  fs->f[fs->n].name = fs->names[fs->n];
  td_code rc = string_scalar(value, &fs->f[fs->n].tensor, err);
  if (rc) {
    free(fs->names[fs->n]);
    return rc;
  }
  fs->n++;
  return TD_OK;
}

static td_code add_asset(feeds *fs, const char *dir, const Tensorflow__AssetFileDef *a, td_err *err) {
  if (!a || !a->tensor_info || a->tensor_info->encoding_case != TENSORFLOW__TENSOR_INFO__ENCODING_NAME)
    return TD_OK;
  char *assets = join(dir, "assets");
  char *path = assets ? join(assets, a->filename) : NULL;
  td_code rc = path ? feeds_add(fs, a->tensor_info->name, path, err)
                    : td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  free(assets);
  free(path);
  return rc;
}

static const Tensorflow__CollectionDef *collection(const Tensorflow__MetaGraphDef *mg,
                                                   const char *key) {
  for (size_t i = 0; i < mg->n_collection_def; i++)
    if (!strcmp(mg->collection_def[i]->key, key)) return mg->collection_def[i]->value;
  return NULL;
}

static td_code asset_feeds(const Tensorflow__MetaGraphDef *mg, const char *dir, feeds *fs,
                           td_err *err) {
  td_code rc = TD_OK;
  if (mg->n_asset_file_def) {
    for (size_t i = 0; i < mg->n_asset_file_def && !rc; i++)
      rc = add_asset(fs, dir, mg->asset_file_def[i], err);
    return rc;
  }
  const Tensorflow__CollectionDef *c = collection(mg, "saved_model_assets");
  if (!c || c->kind_case != TENSORFLOW__COLLECTION_DEF__KIND_ANY_LIST) return TD_OK;
  for (size_t i = 0; i < c->any_list->n_value && !rc; i++) {
    const Google__Protobuf__Any *any = c->any_list->value[i];
    td_err why;
    Tensorflow__AssetFileDef *a = (Tensorflow__AssetFileDef *)td_pb_unpack(
        &tensorflow__asset_file_def__descriptor, NULL, any->value.len, any->value.data, &why);
    if (!a) return td_err_set(err, TD_DATA_LOSS, "saved_model_assets: %s", why.msg);
    rc = add_asset(fs, dir, a, err);
    tensorflow__asset_file_def__free_unpacked(a, NULL);
  }
  return rc;
}

/* The init op's node name, or NULL. */
static const char *init_op_name(const Tensorflow__MetaGraphDef *mg) {
  for (size_t i = 0; i < mg->n_signature_def; i++) {
    const Tensorflow__MetaGraphDef__SignatureDefEntry *e = mg->signature_def[i];
    if (strcmp(e->key, INIT_OP_SIGNATURE) || !e->value) continue;
    for (size_t k = 0; k < e->value->n_outputs; k++) {
      const Tensorflow__TensorInfo *ti = e->value->outputs[k]->value;
      if (ti && ti->encoding_case == TENSORFLOW__TENSOR_INFO__ENCODING_NAME) return ti->name;
    }
  }
  static const char *keys[] = {"saved_model_main_op", "legacy_init_op"};
  for (int k = 0; k < 2; k++) {
    const Tensorflow__CollectionDef *c = collection(mg, keys[k]);
    if (c && c->kind_case == TENSORFLOW__COLLECTION_DEF__KIND_NODE_LIST && c->node_list->n_value == 1)
      return c->node_list->value[0];
  }
  return NULL;
}

/* "name:0" -> "name" for target use. */
static char *node_of(const char *tensor) {
  char *s = strdup(tensor);
  if (!s) return NULL;
  char *colon = strrchr(s, ':');
  if (colon && s[0] != '^') *colon = '\0';
  return s[0] == '^' ? memmove(s, s + 1, strlen(s)) : s;
}

/* Tells the engine what serving and the init op touch, so that the restore
 * keeps only those variables (eng_model_note_reads). */
static void note_reads(ldr_servable *sv, const Tensorflow__MetaGraphDef *mg) {
  for (int i = 0; i < sv->n_sigs; i++) {
    const ldr_signature *s = &sv->sigs[i];
    if (!strcmp(s->key, INIT_OP_SIGNATURE) || s->n_inputs > 64 || s->n_outputs > 64) continue;
    const char *in[64], *out[64];
    for (int k = 0; k < s->n_inputs; k++) in[k] = s->inputs[k].name;
    for (int k = 0; k < s->n_outputs; k++) out[k] = s->outputs[k].name;
    eng_model_note_reads(sv->model, s->n_inputs, in, s->n_outputs, out, 0, NULL);
  }
  const char *init = init_op_name(mg);
  char *target = init ? node_of(init) : NULL;
  const char *targets[] = {target};
  if (target) eng_model_note_reads(sv->model, 0, NULL, 0, NULL, 1, targets);
  free(target);
}

static td_code restore_and_init(ldr_servable *sv, const Tensorflow__MetaGraphDef *mg,
                                const char *dir, ldr_bundle *bundle, const char *prefix,
                                td_err *err) {
  feeds fs = {0};
  td_code rc = asset_feeds(mg, dir, &fs, err);
  const Tensorflow__SaverDef *sd = mg->saver_def;
  if (!rc && bundle && sd && sd->restore_op_name && *sd->restore_op_name) {
    rc = feeds_add(&fs, sd->filename_tensor_name, prefix, err);
    if (!rc) {
      char *target = node_of(sd->restore_op_name);
      const char *targets[] = {target};
      rc = target ? eng_model_run(sv->model, fs.n, fs.f, 0, NULL, NULL, 1, targets, err)
                  : td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
      free(target);
      if (rc) td_err_prefix(err, "restoring variables from %s", prefix);
      /* The prefix feed is only for the restore op. */
      fs.n--;
      eng_tensor_release(&fs.f[fs.n].tensor);
      free(fs.names[fs.n]);
    }
  } else if (!rc && bundle) {
    td_log_warn("%s: has variables but no saver_def; only those the object graph names are set",
                dir);
  }
  /* Handles the restore op left unset (tf.saved_model.save of a Keras 3
   * model) are bound as Python's loader binds them (ldr_objgraph.h). */
  int bound = 0;
  if (!rc && bundle) rc = ldr_objgraph_bind(sv->model, bundle, &bound, err);
  if (bound) td_log_info("%s: %d variables bound through the checkpoint's object graph", dir, bound);
  const char *init = init_op_name(mg);
  if (!rc && init) {
    char *target = node_of(init);
    const char *targets[] = {target};
    rc = target ? eng_model_run(sv->model, fs.n, fs.f, 0, NULL, NULL, 1, targets, err)
                : td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    free(target);
    if (rc) td_err_prefix(err, "running the init op '%s'", init);
  }
  feeds_free(&fs);
  return rc;
}

/* Uploads the serving plans' weights to the selected device (a no-op on the
 * CPU). A version that does not fit fails to load, saying the sizes. */
static td_code attach_device(ldr_servable *sv, td_err *err) {
  if (!eng_device_active() || !sv->n_sigs) return TD_OK;
  eng_plan **plans = calloc((size_t)sv->n_sigs, sizeof *plans);
  if (!plans) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  int n = 0;
  for (int i = 0; i < sv->n_sigs; i++)
    if (!sv->sigs[i].plan_shared) plans[n++] = sv->sigs[i].plan;
  td_code rc = eng_device_attach(sv->model, n, plans, err);
  free(plans);
  if (rc) td_err_prefix(err, "placing %s on %s", sv->path, eng_device_name());
  return rc;
}

/* A signature already planned (the default one first) that computes what s
 * computes, position by position (eng_graph_same_values): a Keras export's
 * "serve" and "serving_default" call one function. */
static const ldr_signature *same_computation(const ldr_servable *sv, const ldr_signature *s,
                                             const char *const *in, const char *const *out) {
  const eng_graph *g = eng_model_graph(sv->model);
  for (int i = 0; g && i < sv->n_sigs; i++) {
    const ldr_signature *o = &sv->sigs[i];
    if (o == s || !o->plan || o->plan_shared || o->n_inputs != s->n_inputs ||
        o->n_outputs != s->n_outputs)
      continue;
    const char *oin[64], *oout[64];
    bool ok = true;
    for (int k = 0; ok && k < s->n_inputs; k++) {
      oin[k] = o->inputs[k].name;
      ok = o->inputs[k].dtype == s->inputs[k].dtype;
    }
    for (int k = 0; ok && k < s->n_outputs; k++) {
      oout[k] = o->outputs[k].name;
      ok = o->outputs[k].dtype == s->outputs[k].dtype;
    }
    if (ok && eng_graph_same_values(g, s->n_inputs, oin, in, s->n_outputs, oout, out)) return o;
  }
  return NULL;
}

static td_code compile_signatures(ldr_servable *sv, td_err *err) {
  int ok = 0;
  const ldr_signature *dflt = NULL;
  /* The default signature first, so that it owns any plan it shares. */
  int first = -1;
  for (int i = 0; i < sv->n_sigs; i++)
    if (!strcmp(sv->sigs[i].key, DEFAULT_SIGNATURE)) first = i;
  for (int n = 0; n < sv->n_sigs; n++) {
    int i = first < 0 ? n : n == 0 ? first : n <= first ? n - 1 : n;
    ldr_signature *s = &sv->sigs[i];
    if (!strcmp(s->key, INIT_OP_SIGNATURE)) {
      s->plan_error = strdup("the init-op signature is not servable");
      continue;
    }
    const char *in[64], *out[64];
    td_err e;
    td_err_clear(&e);
    if (s->n_inputs > 64 || s->n_outputs > 64) {
      td_err_set(&e, TD_UNIMPLEMENTED, "more than 64 inputs or outputs");
    } else {
      for (int k = 0; k < s->n_inputs; k++) in[k] = s->inputs[k].name;
      for (int k = 0; k < s->n_outputs; k++) out[k] = s->outputs[k].name;
      const ldr_signature *same = same_computation(sv, s, in, out);
      if (same) {
        s->plan = same->plan;
        s->plan_shared = true;
        td_log_info("%s: signature '%s' computes what '%s' does: one plan serves both", sv->path,
                    s->key, same->key);
      } else {
        eng_plan_create(sv->model, s->n_inputs, in, s->n_outputs, out, 0, NULL, &s->plan, &e);
      }
    }
    if (s->plan) {
      ok++;
      continue;
    }
    s->plan_error = strdup(e.msg);
    if (!strcmp(s->key, DEFAULT_SIGNATURE)) {
      dflt = s;
      if (err) *err = e;
    }
    td_log_warn("%s: signature '%s' cannot be served: %s", sv->path, s->key, e.msg);
  }
  if (dflt) return td_err_prefix(err, "signature '%s'", dflt->key);
  if (!ok && sv->n_sigs)
    return td_err_set(err, TD_UNIMPLEMENTED, "no signature of %s can be served", sv->path);
  td_code rc = attach_device(sv, err);
  /* The first requests of a new version (batch 1 above all) should not
   * pay for its shape-specialised plan: built here, off the request path. */
  for (int i = 0; !rc && i < sv->n_sigs; i++)
    if (sv->sigs[i].plan && !sv->sigs[i].plan_shared) eng_plan_prepare(sv->sigs[i].plan, 1);
  return rc;
}

/* A weight packed for its kernel is then held once, packed (eng_model.h
 * says when an original has to stay). */
static void release_packed_sources(ldr_servable *sv) {
  eng_plan **plans = calloc((size_t)sv->n_sigs + 1, sizeof *plans);
  if (!plans) return;
  int n = 0;
  for (int i = 0; i < sv->n_sigs; i++)
    if (sv->sigs[i].plan && !sv->sigs[i].plan_shared) plans[n++] = sv->sigs[i].plan;
  size_t freed = eng_model_release_packed_sources(sv->model, n, plans);
  free(plans);
  if (freed)
    td_log_info("%s: %.1f MB of weights kept only in their packed layout", sv->path, freed / 1e6);
}

eng_weight_stats ldr_servable_weight_stats(const ldr_servable *s) {
  return eng_model_weight_stats(s->model);
}

void ldr_servable_ref(ldr_servable *s) { atomic_fetch_add(&s->refs, 1); }

int ldr_servable_refs(const ldr_servable *s) { return atomic_load(&s->refs); }

void ldr_servable_unref(ldr_servable *s) {
  if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
  free_signatures(s->sigs, s->n_sigs);
  eng_model_destroy(s->model);
  free(s->path);
  free(s);
}

td_code ldr_servable_load(const char *dir, int64_t version, const char *tags, ldr_servable **out,
                          td_err *err) {
  ldr_servable *sv = calloc(1, sizeof *sv);
  if (!sv) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  atomic_init(&sv->refs, 1);
  sv->version = version;
  sv->path = strdup(dir);
  Tensorflow__SavedModel *sm = NULL;
  ldr_bundle *bundle = NULL;
  char *vars = join(dir, "variables");
  char *prefix = vars ? join(vars, "variables") : NULL;
  char *index = prefix ? malloc(strlen(prefix) + 8) : NULL;
  td_code rc = TD_OK;
  if (!sv->path || !index) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  sprintf(index, "%s.index", prefix);

  /* Per phase: CPU time of this thread (what the work cost, whatever else
   * the machine runs), logged with the wall time once loaded. */
  enum { T_START, T_PB, T_GRAPH, T_RESTORE, T_PLANS, T_END, T_N };
  uint64_t cpu[T_N] = {0}, wall0 = td_now_ns();
  cpu[T_START] = td_thread_cpu_ns();
  rc = read_saved_model(dir, &sm, err);
  cpu[T_PB] = td_thread_cpu_ns();
  if (rc) goto done;
  const Tensorflow__MetaGraphDef *mg = pick_meta_graph(sm, tags, err);
  if (!mg) {
    rc = err ? err->code : TD_NOT_FOUND;
    goto done;
  }
  if (!mg->graph_def) {
    rc = td_err_set(err, TD_INVALID_ARGUMENT, "%s: the MetaGraph has no graph", dir);
    goto done;
  }
  rc = convert_signatures(mg, sv, err);
  if (rc) goto done;
  eng_graph *g;
  eng_library *lib;
  rc = ldr_import_graph(mg->graph_def,
                        mg->meta_info_def ? mg->meta_info_def->stripped_op_list : NULL, &g, &lib,
                        err);
  if (rc) {
    td_err_prefix(err, "%s/saved_model.pb", dir);
    goto done;
  }
  if (file_exists(index)) {
    rc = ldr_bundle_open(prefix, &bundle, err);
    if (rc) {
      eng_graph_destroy(g);
      eng_library_destroy(lib);
      goto done;
    }
  }
  restore_ctx rx = {.b = bundle, .sv = sv, .dir = dir};
  eng_io io = {.restore = bundle_restore, .read_asset = asset_read, .verify = bundle_verify,
               .ctx = &rx};
  rc = eng_model_create(g, lib, &io, &sv->model, err);
  if (rc) goto done;
  note_reads(sv, mg);
  cpu[T_GRAPH] = td_thread_cpu_ns();
  rc = restore_and_init(sv, mg, dir, bundle, prefix, err);
  if (rc) goto done;
  cpu[T_RESTORE] = td_thread_cpu_ns();
  rc = compile_signatures(sv, err);
  cpu[T_PLANS] = td_thread_cpu_ns();
  /* Copies of variables that only the restore op assigned, and what the
   * restore freed: this thread keeps freed buffers for reuse, and glibc
   * keeps freed blocks of these sizes in its heap. */
  if (!rc) {
    release_packed_sources(sv);
    eng_model_release_unserved(sv->model);
    eng_tensor_cache_flush();
    malloc_trim(0);
    cpu[T_END] = td_thread_cpu_ns();
    double ms[T_N];
    for (int i = 1; i < T_N; i++) ms[i] = (double)(cpu[i] - cpu[i - 1]) / 1e6;
    eng_weight_stats ws = eng_model_weight_stats(sv->model);
    td_log_info("%s: loaded in %.0f ms, %.0f ms of CPU (saved_model.pb %.0f, graph %.0f, "
                "variables %.0f, plans and packing %.0f, freeing %.0f); weights %.1f MB, held "
                "as %.1f MB",
                dir, (double)(td_now_ns() - wall0) / 1e6, (double)(cpu[T_END] - cpu[T_START]) / 1e6,
                ms[T_PB], ms[T_GRAPH], ms[T_RESTORE], ms[T_PLANS], ms[T_END],
                (double)(ws.variable_bytes + ws.released_bytes) / 1e6,
                (double)(ws.variable_bytes + ws.packed_bytes) / 1e6);
  }
done:
  if (sv->model) eng_model_detach_io(sv->model);
  ldr_bundle_close(bundle);
  ldr_savedmodel_free(sm);
  free(vars);
  free(prefix);
  free(index);
  if (rc) {
    ldr_servable_unref(sv);
    return rc;
  }
  *out = sv;
  return TD_OK;
}

uint64_t ldr_servable_variable_bytes(const ldr_servable *s) { return s->variable_bytes; }

int64_t ldr_servable_version(const ldr_servable *s) { return s->version; }
const char *ldr_servable_path(const ldr_servable *s) { return s->path; }
int ldr_servable_signature_count(const ldr_servable *s) { return s->n_sigs; }
const ldr_signature *ldr_servable_signature_at(const ldr_servable *s, int i) { return &s->sigs[i]; }

const ldr_signature *ldr_servable_signature(const ldr_servable *s, const char *key) {
  int lo = 0, hi = s->n_sigs - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    int c = strcmp(key, s->sigs[mid].key);
    if (!c) return &s->sigs[mid];
    if (c < 0)
      hi = mid - 1;
    else
      lo = mid + 1;
  }
  return NULL;
}
