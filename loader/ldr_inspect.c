/* The census walks the raw GraphDef and FunctionDefs (before inlining), so
 * it counts what the exporter wrote; the load report then says what the
 * engine made of it. */
#include "ldr_inspect.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "eng_device.h"
#include "eng_frames.h"
#include "eng_model.h"
#include "eng_op.h"
#include "ldr_proto.h"
#include "ldr_servable.h"
#include "ldr_savedmodel.h"
#include "tensorflow/core/protobuf/saved_model.pb-c.h"


typedef struct op_count {
  const char *op;
  int count;
  const char *example; /* a node using it */
} op_count;

typedef struct census {
  int n;
  op_count e[1024];
} census;

static void count(census *c, const char *op, const char *node) {
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->e[i].op, op)) {
      c->e[i].count++;
      return;
    }
  if (c->n < 1024) c->e[c->n++] = (op_count){op, 1, node};
}

static int by_op(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool is_function(const Tensorflow__GraphDef *g, const char *op) {
  const Tensorflow__FunctionDefLibrary *lib = g->library;
  for (size_t i = 0; lib && i < lib->n_function; i++)
    if (lib->function[i]->signature && !strcmp(lib->function[i]->signature->name, op)) return true;
  return false;
}

static void print_info(FILE *out, const char *kind, const Tensorflow__TensorInfo *ti) {
  char sb[160];
  eng_shape s = eng_shape_unknown();
  if (ti->tensor_shape && ldr_proto_shape(ti->tensor_shape, &s, NULL)) s = eng_shape_unknown();
  fprintf(out, "        dtype: %s\n", eng_dtype_enum_name(eng_dtype_from_tf(ti->dtype, NULL)));
  if (s.rank < 0) {
    fprintf(out, "        shape: unknown_rank\n");
  } else {
    int off = snprintf(sb, sizeof sb, "(");
    for (int d = 0; d < s.rank && off < (int)sizeof sb; d++)
      off += snprintf(sb + off, sizeof sb - (size_t)off, "%s%lld", d ? ", " : "",
                      (long long)s.dim[d]);
    if (off < (int)sizeof sb) snprintf(sb + off, sizeof sb - (size_t)off, s.rank == 1 ? ",)" : ")");
    fprintf(out, "        shape: %s\n", sb);
  }
  (void)kind;
  if (ti->encoding_case == TENSORFLOW__TENSOR_INFO__ENCODING_NAME)
    fprintf(out, "        name: %s\n", ti->name);
  else
    fprintf(out, "        (sparse or composite encoding)\n");
}

static int by_key(const void *a, const void *b) {
  return strcmp((*(Tensorflow__MetaGraphDef__SignatureDefEntry *const *)a)->key,
                (*(Tensorflow__MetaGraphDef__SignatureDefEntry *const *)b)->key);
}

static void print_meta_graph(FILE *out, const Tensorflow__MetaGraphDef *mg) {
  const Tensorflow__MetaGraphDef__MetaInfoDef *mi = mg->meta_info_def;
  fprintf(out, "MetaGraphDef with tag-set: '");
  for (size_t t = 0; mi && t < mi->n_tags; t++) fprintf(out, "%s%s", t ? ", " : "", mi->tags[t]);
  fprintf(out, "' contains the following SignatureDefs:\n");
  Tensorflow__MetaGraphDef__SignatureDefEntry **sigs =
      malloc(sizeof *sigs * (mg->n_signature_def + 1));
  if (!sigs) return;
  memcpy(sigs, mg->signature_def, sizeof *sigs * mg->n_signature_def);
  qsort(sigs, mg->n_signature_def, sizeof *sigs, by_key);
  for (size_t i = 0; i < mg->n_signature_def; i++) {
    const Tensorflow__SignatureDef *sd = sigs[i]->value;
    fprintf(out, "\nsignature_def['%s']:\n", sigs[i]->key);
    if (!sd) continue;
    fprintf(out, "  The given SavedModel SignatureDef contains the following input(s):\n");
    for (size_t k = 0; k < sd->n_inputs; k++) {
      fprintf(out, "    inputs['%s'] tensor_info:\n", sd->inputs[k]->key);
      if (sd->inputs[k]->value) print_info(out, "input", sd->inputs[k]->value);
    }
    fprintf(out, "  The given SavedModel SignatureDef contains the following output(s):\n");
    for (size_t k = 0; k < sd->n_outputs; k++) {
      fprintf(out, "    outputs['%s'] tensor_info:\n", sd->outputs[k]->key);
      if (sd->outputs[k]->value) print_info(out, "output", sd->outputs[k]->value);
    }
    fprintf(out, "  Method name is: %s\n", sd->method_name ? sd->method_name : "");
  }
  free(sigs);

  static census c; /* large; inspect is single-threaded, one model per process */
  c.n = 0;
  const Tensorflow__GraphDef *g = mg->graph_def;
  int total = 0;
  for (size_t i = 0; g && i < g->n_node; i++, total++) count(&c, g->node[i]->op, g->node[i]->name);
  for (size_t f = 0; g && g->library && f < g->library->n_function; f++) {
    const Tensorflow__FunctionDef *fd = g->library->function[f];
    for (size_t i = 0; i < fd->n_node_def; i++, total++)
      count(&c, fd->node_def[i]->op, fd->node_def[i]->name);
  }
  qsort(c.e, (size_t)c.n, sizeof c.e[0], by_op);
  fprintf(out, "\nOp census (graph and %zu functions): %d nodes, %d distinct ops\n",
          g && g->library ? g->library->n_function : 0, total, c.n);
  int lacking = 0;
  for (int i = 0; i < c.n; i++) {
    bool call = is_function(g, c.e[i].op);
    bool loop = eng_frames_is_loop_op(c.e[i].op);
    bool have = call || loop || eng_op_find(c.e[i].op) ||
                !strcmp(c.e[i].op, "StatefulPartitionedCall") ||
                !strcmp(c.e[i].op, "PartitionedCall");
    lacking += !have;
    fprintf(out, "  %-28s %5d%s\n", c.e[i].op, c.e[i].count,
            call   ? "  (function call, inlined)"
            : loop ? "  (TF1 loop, lowered to While)"
            : have ? ""
                   : "  (not supported by the engine)");
  }
  fprintf(out, "\nOps the engine lacks: ");
  if (!lacking) fprintf(out, "none\n");
  for (int i = 0, k = 0; i < c.n; i++) {
    if (is_function(g, c.e[i].op) || eng_op_find(c.e[i].op) ||
        eng_frames_is_loop_op(c.e[i].op) ||
        !strcmp(c.e[i].op, "StatefulPartitionedCall") || !strcmp(c.e[i].op, "PartitionedCall"))
      continue;
    fprintf(out, "%s%s (e.g. node '%s')", k++ ? ", " : "", c.e[i].op, c.e[i].example);
  }
  if (lacking)
    fprintf(out, "\n  (ops that only the save function or unused branches hold never run: the "
                 "load below says whether serving needs any)\n");
}

td_code ldr_inspect_print(const char *dir, const char *tags, FILE *out, td_err *err) {
  Tensorflow__SavedModel *sm = NULL;
  size_t len = 0;
  bool text = false;
  td_code rc = ldr_savedmodel_read(dir, &sm, &len, &text, err);
  if (rc) return rc;
  fprintf(out, "SavedModel %s (%s, %zu bytes, %zu MetaGraph%s)\n\n", dir,
          text ? "saved_model.pbtxt" : "saved_model.pb", len, sm->n_meta_graphs,
          sm->n_meta_graphs == 1 ? "" : "s");
  for (size_t m = 0; m < sm->n_meta_graphs; m++) {
    if (m) fprintf(out, "\n");
    print_meta_graph(out, sm->meta_graphs[m]);
  }
  ldr_savedmodel_free(sm);

  fprintf(out, "\nLoading with tags '%s': ", tags);
  ldr_servable *sv = NULL;
  td_err e;
  td_err_clear(&e);
  if (ldr_servable_load(dir, 0, tags, &sv, &e)) {
    fprintf(out, "FAILS: %s\n", e.msg);
    return TD_OK;
  }
  fprintf(out, "OK\n");
  for (int i = 0; i < ldr_servable_signature_count(sv); i++) {
    const ldr_signature *s = ldr_servable_signature_at(sv, i);
    if (!s->plan) {
      fprintf(out, "  %-24s not servable: %s\n", s->key, s->plan_error ? s->plan_error : "");
      continue;
    }
    eng_plan_info info = eng_plan_get_info(s->plan);
    fprintf(out, "  %-24s %d steps per request, %d values folded at load, %d ops fused\n", s->key,
            info.steps, info.consts, info.fused_ops);
    char ops[2048];
    eng_plan_op_list(s->plan, ops, sizeof ops);
    fprintf(out, "  %-24s ops run: %s\n", "", ops);
    char cpu_ops[512];
    int on = eng_device_plan_report(s->plan, cpu_ops, sizeof cpu_ops);
    fprintf(out, "  %-24s GPU backend: %d of %d steps have a GPU kernel%s%s\n", "", on, info.steps,
            *cpu_ops ? "; on the CPU: " : "", cpu_ops);
  }
  ldr_servable_unref(sv);
  return TD_OK;
}
