/* eng_graph: node table and name index (growth to thousands of nodes),
 * duplicate names, edge parsing, attributes (lookup and deep copy), the
 * function library, and comparing two feed -> fetch subgraphs
 * (eng_graph_same_values). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_graph.h"

static int add(eng_graph *g, const char *name, const char *op, int n_out) {
  td_err err;
  td_err_clear(&err);
  int id = eng_graph_add_node(g, name, op, &err);
  ck_assert_msg(id >= 0, "adding %s: %s", name, err.msg);
  eng_graph_node(g, id)->n_out = n_out;
  return id;
}

START_TEST(add_and_find) {
  eng_graph *g = eng_graph_create();
  ck_assert_ptr_nonnull(g);
  ck_assert_int_eq(eng_graph_node_count(g), 0);
  ck_assert_int_eq(eng_graph_find(g, "x", 1), -1); /* empty graph */
  int x = add(g, "x", "Placeholder", 1);
  int y = add(g, "scope/y", "Identity", 1);
  ck_assert_int_eq(x, 0);
  ck_assert_int_eq(y, 1);
  ck_assert_int_eq(eng_graph_node_count(g), 2);
  ck_assert_int_eq(eng_graph_find(g, "x", 1), x);
  ck_assert_int_eq(eng_graph_find(g, "scope/y", 7), y);
  /* len bounds the name: a prefix or a longer buffer slice. */
  ck_assert_int_eq(eng_graph_find(g, "scope/y:0", 7), y);
  ck_assert_int_eq(eng_graph_find(g, "scope", 5), -1);
  ck_assert_int_eq(eng_graph_find(g, "xx", 2), -1);
  ck_assert_int_eq(eng_graph_find(g, "xx", 1), x);
  ck_assert_str_eq(eng_graph_node(g, y)->name, "scope/y");
  ck_assert_str_eq(eng_graph_node(g, y)->op, "Identity");
  ck_assert_int_eq(eng_graph_node(g, y)->n_in, 0);
  ck_assert_int_eq(eng_graph_node(g, y)->n_ctrl, 0);
  ck_assert_int_eq(eng_graph_node(g, y)->n_attr, 0);
  eng_graph_destroy(g);
  eng_graph_destroy(NULL);
}
END_TEST

START_TEST(many_nodes_index_grows) {
  enum { N = 20000 };
  eng_graph *g = eng_graph_create();
  char name[64];
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "layer_%d/op", i);
    td_err err;
    int id = eng_graph_add_node(g, name, "NoOp", &err);
    ck_assert_int_eq(id, i);
  }
  ck_assert_int_eq(eng_graph_node_count(g), N);
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "layer_%d/op", i);
    ck_assert_int_eq(eng_graph_find(g, name, strlen(name)), i);
    ck_assert_str_eq(eng_graph_node(g, i)->name, name);
  }
  for (int i = 0; i < 1000; i++) {
    snprintf(name, sizeof name, "layer_%d/opx", i);
    ck_assert_int_eq(eng_graph_find(g, name, strlen(name)), -1);
  }
  /* Duplicates are still caught after many resizes. */
  td_err err;
  td_err_clear(&err);
  ck_assert_int_eq(eng_graph_add_node(g, "layer_12345/op", "NoOp", &err), -1);
  ck_assert_int_eq(err.code, TD_INVALID_ARGUMENT);
  ck_assert_int_eq(eng_graph_node_count(g), N);
  eng_graph_destroy(g);
}
END_TEST

START_TEST(duplicate_rejected) {
  eng_graph *g = eng_graph_create();
  add(g, "a", "Const", 1);
  td_err err;
  td_err_clear(&err);
  ck_assert_int_eq(eng_graph_add_node(g, "a", "NoOp", &err), -1);
  ck_assert_int_eq(err.code, TD_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.msg, "'a'"), "message: %s", err.msg);
  ck_assert_int_eq(eng_graph_node_count(g), 1);
  ck_assert_str_eq(eng_graph_node(g, 0)->op, "Const");
  /* NULL err is allowed. */
  ck_assert_int_eq(eng_graph_add_node(g, "a", "NoOp", NULL), -1);
  eng_graph_destroy(g);
}
END_TEST

START_TEST(inputs_and_ctrl) {
  eng_graph *g = eng_graph_create();
  int a = add(g, "a", "Const", 2), b = add(g, "b", "AddV2", 1), c = add(g, "c", "NoOp", 0);
  ck_assert_int_eq(eng_graph_add_input(g, b, (eng_edge){a, 1}, NULL), TD_OK);
  ck_assert_int_eq(eng_graph_add_input(g, b, (eng_edge){a, 0}, NULL), TD_OK);
  ck_assert_int_eq(eng_graph_add_ctrl(g, c, a, NULL), TD_OK);
  ck_assert_int_eq(eng_graph_add_ctrl(g, c, b, NULL), TD_OK);
  ck_assert_int_eq(eng_graph_add_ctrl(g, c, a, NULL), TD_OK); /* repeated: kept once */
  const eng_node *nb = eng_graph_node(g, b), *nc = eng_graph_node(g, c);
  ck_assert_int_eq(nb->n_in, 2);
  ck_assert_int_eq(nb->in[0].node, a);
  ck_assert_int_eq(nb->in[0].index, 1);
  ck_assert_int_eq(nb->in[1].index, 0);
  ck_assert_int_eq(nc->n_ctrl, 2);
  ck_assert_int_eq(nc->ctrl[0], a);
  ck_assert_int_eq(nc->ctrl[1], b);
  eng_graph_destroy(g);
}
END_TEST

START_TEST(parse_edge) {
  eng_graph *g = eng_graph_create();
  int n = add(g, "n", "Split", 3);
  int s = add(g, "scope/op", "Identity", 1);
  add(g, "sink", "NoOp", 0);
  eng_edge e;
  td_err err;

  ck_assert_int_eq(eng_graph_parse_edge(g, "n", &e, &err), TD_OK);
  ck_assert_int_eq(e.node, n);
  ck_assert_int_eq(e.index, 0);
  ck_assert_int_eq(eng_graph_parse_edge(g, "n:1", &e, &err), TD_OK);
  ck_assert_int_eq(e.node, n);
  ck_assert_int_eq(e.index, 1);
  ck_assert_int_eq(eng_graph_parse_edge(g, "n:2", &e, &err), TD_OK);
  ck_assert_int_eq(e.index, 2);
  ck_assert_int_eq(eng_graph_parse_edge(g, "scope/op:0", &e, &err), TD_OK);
  ck_assert_int_eq(e.node, s);

  const char *malformed[] = {
      "n:", "n:x", "n:-1", "n:1x", "n: 1", "n:+1", "n:99999999999999999999", "n:1000001"};
  for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
    e = (eng_edge){-7, -7};
    td_err_clear(&err);
    ck_assert_msg(eng_graph_parse_edge(g, malformed[i], &e, &err) == TD_INVALID_ARGUMENT, "%s",
                  malformed[i]);
    ck_assert_int_eq(err.code, TD_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err.msg, malformed[i]), "message for %s: %s", malformed[i], err.msg);
    ck_assert_int_eq(e.node, -7); /* out-param untouched on failure */
  }

  td_err_clear(&err);
  ck_assert_int_eq(eng_graph_parse_edge(g, "nope:0", &e, &err), TD_NOT_FOUND);
  ck_assert_msg(strstr(err.msg, "nope:0"), "message: %s", err.msg);
  ck_assert_int_eq(eng_graph_parse_edge(g, "nope", &e, &err), TD_NOT_FOUND);
  ck_assert_int_eq(eng_graph_parse_edge(g, "", &e, &err), TD_NOT_FOUND);

  td_err_clear(&err);
  ck_assert_int_eq(eng_graph_parse_edge(g, "n:3", &e, &err), TD_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.msg, "n:3") && strstr(err.msg, "3 outputs"), "message: %s", err.msg);
  ck_assert_int_eq(eng_graph_parse_edge(g, "sink", &e, &err), TD_INVALID_ARGUMENT);
  ck_assert_int_eq(eng_graph_parse_edge(g, "sink:0", &e, &err), TD_INVALID_ARGUMENT);

  td_err_clear(&err);
  ck_assert_int_eq(eng_graph_parse_edge(g, "^n", &e, &err), TD_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.msg, "control"), "message: %s", err.msg);
  eng_graph_destroy(g);
}
END_TEST

/* --- attributes ----------------------------------------------------------- */

static char *xstrdup(const char *s) {
  char *p = strdup(s);
  ck_assert_ptr_nonnull(p);
  return p;
}

/* Fills node `id` of g with one attribute of every kind. */
static void fill_attrs(eng_graph *g, int id) {
  eng_attr *a = eng_graph_add_attr(g, id, "s");
  a->kind = ENG_ATTR_S;
  a->s.data = xstrdup("bytes\0x");
  a->s.len = 5;
  a = eng_graph_add_attr(g, id, "i");
  a->kind = ENG_ATTR_I;
  a->i = -123456789012LL;
  a = eng_graph_add_attr(g, id, "f");
  a->kind = ENG_ATTR_F;
  a->f = 0.25f;
  a = eng_graph_add_attr(g, id, "b");
  a->kind = ENG_ATTR_B;
  a->b = true;
  a = eng_graph_add_attr(g, id, "T");
  a->kind = ENG_ATTR_TYPE;
  a->type = ENG_DT_INT64;
  a = eng_graph_add_attr(g, id, "shape");
  a->kind = ENG_ATTR_SHAPE;
  a->shape = (eng_shape){.rank = 2, .dim = {-1, 7}};
  a = eng_graph_add_attr(g, id, "value");
  a->kind = ENG_ATTR_TENSOR;
  eng_shape s = {.rank = 1, .dim = {3}};
  ck_assert_int_eq(eng_tensor_alloc(&a->tensor, ENG_DT_FLOAT, &s, NULL), TD_OK);
  float *fv = eng_tensor_data(&a->tensor);
  fv[0] = 1, fv[1] = 2, fv[2] = 3;
  a = eng_graph_add_attr(g, id, "fn");
  a->kind = ENG_ATTR_FUNC;
  a->func = xstrdup("__inference_f_1");
  a = eng_graph_add_attr(g, id, "ls");
  a->kind = ENG_ATTR_LIST;
  a->list_kind = ENG_ATTR_S;
  a->n = 2;
  a->ls = calloc(2, sizeof *a->ls);
  a->ls[0] = (eng_bytes){xstrdup("one"), 3};
  a->ls[1] = (eng_bytes){xstrdup(""), 0};
  a = eng_graph_add_attr(g, id, "li");
  a->kind = ENG_ATTR_LIST;
  a->list_kind = ENG_ATTR_I;
  a->n = 3;
  a->li = malloc(3 * sizeof *a->li);
  a->li[0] = 1, a->li[1] = -2, a->li[2] = 3;
  a = eng_graph_add_attr(g, id, "ltype");
  a->kind = ENG_ATTR_LIST;
  a->list_kind = ENG_ATTR_TYPE;
  a->n = 2;
  a->ltype = malloc(2 * sizeof *a->ltype);
  a->ltype[0] = ENG_DT_FLOAT, a->ltype[1] = ENG_DT_STRING;
  a = eng_graph_add_attr(g, id, "lshape");
  a->kind = ENG_ATTR_LIST;
  a->list_kind = ENG_ATTR_SHAPE;
  a->n = 1;
  a->lshape = malloc(sizeof *a->lshape);
  a->lshape[0] = (eng_shape){.rank = 1, .dim = {4}};
  a = eng_graph_add_attr(g, id, "lfunc");
  a->kind = ENG_ATTR_LIST;
  a->list_kind = ENG_ATTR_FUNC;
  a->n = 2;
  a->lfunc = malloc(2 * sizeof *a->lfunc);
  a->lfunc[0] = xstrdup("g1");
  a->lfunc[1] = xstrdup("g2");
  a = eng_graph_add_attr(g, id, "lempty");
  a->kind = ENG_ATTR_LIST;
  a->list_kind = ENG_ATTR_NONE;
  a->n = 0;
  a = eng_graph_add_attr(g, id, "none");
  (void)a;
}

static void check_attrs(const eng_node *n) {
  ck_assert_int_eq(n->n_attr, 15);
  const eng_attr *a = eng_node_attr(n, "s");
  ck_assert_int_eq(a->kind, ENG_ATTR_S);
  ck_assert_uint_eq(a->s.len, 5);
  ck_assert_mem_eq(a->s.data, "bytes", 5);
  ck_assert_int_eq(eng_node_attr_int(n, "i", 0), -123456789012LL);
  ck_assert_float_eq(eng_node_attr(n, "f")->f, 0.25f);
  ck_assert(eng_node_attr_bool(n, "b", false));
  ck_assert_int_eq(eng_node_attr_type(n, "T", ENG_DT_INVALID), ENG_DT_INT64);
  a = eng_node_attr(n, "shape");
  ck_assert_int_eq(a->shape.rank, 2);
  ck_assert_int_eq(a->shape.dim[0], -1);
  ck_assert_int_eq(a->shape.dim[1], 7);
  a = eng_node_attr(n, "value");
  ck_assert_int_eq(a->kind, ENG_ATTR_TENSOR);
  ck_assert_float_eq(((float *)eng_tensor_data(&a->tensor))[2], 3.0f);
  ck_assert_str_eq(eng_node_attr_func(n, "fn"), "__inference_f_1");
  a = eng_node_attr(n, "ls");
  ck_assert_int_eq(a->n, 2);
  ck_assert_str_eq(a->ls[0].data, "one");
  ck_assert_uint_eq(a->ls[1].len, 0);
  a = eng_node_attr(n, "li");
  ck_assert_int_eq(a->li[1], -2);
  a = eng_node_attr(n, "ltype");
  ck_assert_int_eq(a->ltype[1], ENG_DT_STRING);
  a = eng_node_attr(n, "lshape");
  ck_assert_int_eq(a->lshape[0].dim[0], 4);
  a = eng_node_attr(n, "lfunc");
  ck_assert_str_eq(a->lfunc[1], "g2");
  a = eng_node_attr(n, "lempty");
  ck_assert_int_eq(a->kind, ENG_ATTR_LIST);
  ck_assert_int_eq(a->n, 0);
  ck_assert_int_eq(eng_node_attr(n, "none")->kind, ENG_ATTR_NONE);
}

START_TEST(attr_lookup) {
  eng_graph *g = eng_graph_create();
  int id = add(g, "n", "Op", 1);
  fill_attrs(g, id);
  const eng_node *n = eng_graph_node(g, id);
  check_attrs(n);
  ck_assert_ptr_null(eng_node_attr(n, "absent"));
  ck_assert_int_eq(eng_node_attr_int(n, "absent", 77), 77);
  ck_assert_int_eq(eng_node_attr_int(n, "f", 77), 77); /* wrong kind → default */
  ck_assert(!eng_node_attr_bool(n, "i", false));
  ck_assert_int_eq(eng_node_attr_type(n, "s", ENG_DT_HALF), ENG_DT_HALF);
  ck_assert_ptr_null(eng_node_attr_func(n, "s"));
  eng_graph_destroy(g);
}
END_TEST

START_TEST(attr_copy_is_deep) {
  eng_graph *src = eng_graph_create(), *dst = eng_graph_create();
  int s = add(src, "n", "Op", 1);
  fill_attrs(src, s);
  int d = add(dst, "m", "Op", 1);
  const eng_node *sn = eng_graph_node(src, s);
  for (int i = 0; i < sn->n_attr; i++) {
    td_err err;
    ck_assert_int_eq(eng_graph_copy_attr(dst, d, &sn->attr[i], &err), TD_OK);
  }
  const eng_node *dn = eng_graph_node(dst, d);
  check_attrs(dn);
  /* Nothing is shared but the (immutable, refcounted) tensor buffer. */
  for (int i = 0; i < dn->n_attr; i++) {
    ck_assert_ptr_ne(dn->attr[i].name, sn->attr[i].name);
    ck_assert_str_eq(dn->attr[i].name, sn->attr[i].name);
  }
  ck_assert_ptr_ne(eng_node_attr(dn, "s")->s.data, eng_node_attr(sn, "s")->s.data);
  ck_assert_ptr_ne(eng_node_attr(dn, "fn")->func, eng_node_attr(sn, "fn")->func);
  ck_assert_ptr_ne(eng_node_attr(dn, "li")->li, eng_node_attr(sn, "li")->li);
  ck_assert_ptr_ne(eng_node_attr(dn, "ls")->ls[0].data, eng_node_attr(sn, "ls")->ls[0].data);
  ck_assert_ptr_ne(eng_node_attr(dn, "lfunc")->lfunc[0], eng_node_attr(sn, "lfunc")->lfunc[0]);
  /* The source may go away first: the copy stays valid (ASan checks). */
  eng_graph_destroy(src);
  check_attrs(eng_graph_node(dst, d));
  eng_graph_destroy(dst);
}
END_TEST

START_TEST(attr_free_resets) {
  eng_attr a = {0};
  a.name = strdup("x");
  a.kind = ENG_ATTR_FUNC;
  a.func = strdup("f");
  eng_attr_free(&a);
  ck_assert_ptr_null(a.name);
  ck_assert_int_eq(a.kind, ENG_ATTR_NONE);
  eng_attr_free(&a); /* idempotent on a freed attribute */
}
END_TEST

/* --- library ------------------------------------------------------------ */

START_TEST(library) {
  eng_library *lib = eng_library_create();
  ck_assert_int_eq(eng_library_count(lib), 0);
  ck_assert_ptr_null(eng_library_find(lib, "f"));
  ck_assert_ptr_null(eng_library_find(NULL, "f"));
  ck_assert_int_eq(eng_library_count(NULL), 0);
  char name[32];
  for (int i = 0; i < 40; i++) {
    snprintf(name, sizeof name, "fn_%d", i);
    td_err err;
    eng_function *f = eng_library_add(lib, name, &err);
    ck_assert_ptr_nonnull(f);
    ck_assert_str_eq(f->name, name);
    ck_assert_ptr_nonnull(f->body);
    ck_assert_int_eq(eng_graph_node_count(f->body), 0);
    add(f->body, "arg", "_Arg", 1);
  }
  ck_assert_int_eq(eng_library_count(lib), 40);
  for (int i = 0; i < 40; i++) {
    snprintf(name, sizeof name, "fn_%d", i);
    const eng_function *f = eng_library_find(lib, name);
    ck_assert_ptr_nonnull(f);
    ck_assert_str_eq(f->name, name);
  }
  td_err err;
  td_err_clear(&err);
  ck_assert_ptr_null(eng_library_add(lib, "fn_7", &err));
  ck_assert_int_eq(err.code, TD_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.msg, "fn_7"), "message: %s", err.msg);
  ck_assert_int_eq(eng_library_count(lib), 40);
  eng_library_destroy(lib);
  eng_library_destroy(NULL);
}
END_TEST

/* --- eng_graph_same_values ---------------------------------------------- */
static void set_type(eng_graph *g, int node, const char *name, eng_dtype t) {
  eng_attr *a = eng_graph_add_attr(g, node, name);
  ck_assert_ptr_nonnull(a);
  a->kind = ENG_ATTR_TYPE;
  a->type = t;
}

static void set_scalar(eng_graph *g, int node, float v) {
  eng_attr *a = eng_graph_add_attr(g, node, "value");
  ck_assert_ptr_nonnull(a);
  a->kind = ENG_ATTR_TENSOR;
  eng_shape sh = eng_shape_scalar();
  ck_assert_int_eq(eng_tensor_alloc(&a->tensor, ENG_DT_FLOAT, &sh, NULL), TD_OK);
  *(float *)eng_tensor_data(&a->tensor) = v;
}

static void set_str(eng_graph *g, int node, const char *name, const char *v) {
  eng_attr *a = eng_graph_add_attr(g, node, name);
  ck_assert_ptr_nonnull(a);
  a->kind = ENG_ATTR_S;
  a->s.len = strlen(v);
  a->s.data = strdup(v);
}

static void in(eng_graph *g, int node, int from) {
  ck_assert_int_eq(eng_graph_add_input(g, node, (eng_edge){from, 0}, NULL), TD_OK);
}

/* One copy of out = x * c + read(v), as a Keras signature's inlined
 * function: its own placeholder, constant and read, the variable shared. */
static int keras_copy(eng_graph *g, const char *pfx, int var, float c, eng_dtype mul_t) {
  char n[64];
  snprintf(n, sizeof n, "%s_x", pfx);
  int x = add(g, n, "Placeholder", 1);
  set_type(g, x, "dtype", ENG_DT_FLOAT);
  snprintf(n, sizeof n, "%s/c", pfx);
  int k = add(g, n, "Const", 1);
  set_type(g, k, "dtype", ENG_DT_FLOAT);
  set_scalar(g, k, c);
  snprintf(n, sizeof n, "%s/read", pfx);
  int r = add(g, n, "ReadVariableOp", 1);
  set_type(g, r, "dtype", ENG_DT_FLOAT);
  in(g, r, var);
  snprintf(n, sizeof n, "%s/mul", pfx);
  int m = add(g, n, "Mul", 1);
  set_type(g, m, "T", mul_t);
  char cls[80];
  snprintf(cls, sizeof cls, "loc:@%s/c", pfx); /* names its own copy: ignored */
  set_str(g, m, "_class", cls);
  in(g, m, x);
  in(g, m, k);
  snprintf(n, sizeof n, "%s/out", pfx);
  int o = add(g, n, "AddV2", 1);
  set_type(g, o, "T", ENG_DT_FLOAT);
  in(g, o, m);
  in(g, o, r);
  return o;
}

static bool same1(const eng_graph *g, const char *xa, const char *xb, const char *oa,
                  const char *ob) {
  const char *ia[] = {xa}, *ib[] = {xb}, *fa[] = {oa}, *fb[] = {ob};
  return eng_graph_same_values(g, 1, ia, ib, 1, fa, fb);
}

START_TEST(same_values) {
  eng_graph *g = eng_graph_create();
  int v = add(g, "v", "VarHandleOp", 1);
  set_str(g, v, "shared_name", "v");
  keras_copy(g, "a", v, 2.0f, ENG_DT_FLOAT);
  keras_copy(g, "b", v, 2.0f, ENG_DT_FLOAT);
  keras_copy(g, "c", v, 3.0f, ENG_DT_FLOAT); /* another constant */
  keras_copy(g, "d", v, 2.0f, ENG_DT_HALF);  /* another attribute */
  /* e: the inputs of the sum swapped. */
  int ex = add(g, "e_x", "Placeholder", 1);
  set_type(g, ex, "dtype", ENG_DT_FLOAT);
  int ek = add(g, "e/c", "Const", 1);
  set_type(g, ek, "dtype", ENG_DT_FLOAT);
  set_scalar(g, ek, 2.0f);
  int er = add(g, "e/read", "ReadVariableOp", 1);
  set_type(g, er, "dtype", ENG_DT_FLOAT);
  in(g, er, v);
  int em = add(g, "e/mul", "Mul", 1);
  set_type(g, em, "T", ENG_DT_FLOAT);
  in(g, em, ex);
  in(g, em, ek);
  int eo = add(g, "e/out", "AddV2", 1);
  set_type(g, eo, "T", ENG_DT_FLOAT);
  in(g, eo, er);
  in(g, eo, em);
  /* f: reads a's placeholder, which side f does not feed. */
  int fm = add(g, "f/mul", "Mul", 1);
  set_type(g, fm, "T", ENG_DT_FLOAT);
  in(g, fm, eng_graph_find(g, "a_x", 3));
  in(g, fm, eng_graph_find(g, "a/c", 3));
  int fo = add(g, "f/out", "AddV2", 1);
  set_type(g, fo, "T", ENG_DT_FLOAT);
  in(g, fo, fm);
  in(g, fo, eng_graph_find(g, "a/read", 6));
  /* l: a loop primitive on the way. */
  int lm = add(g, "l/merge", "Merge", 2);
  set_type(g, lm, "T", ENG_DT_FLOAT);
  in(g, lm, eng_graph_find(g, "a/out", 5));

  ck_assert(same1(g, "a_x", "b_x:0", "a/out", "b/out:0"));
  ck_assert(same1(g, "b_x", "a_x", "b/out", "a/out"));
  ck_assert(same1(g, "a_x", "a_x", "a/out", "a/out")); /* one subgraph */
  ck_assert(!same1(g, "a_x", "c_x", "a/out", "c/out"));
  ck_assert(!same1(g, "a_x", "d_x", "a/out", "d/out"));
  ck_assert(!same1(g, "a_x", "e_x", "a/out", "e/out"));
  ck_assert(!same1(g, "a_x", "b_x", "a/out", "f/out")); /* f reads a_x, unfed on its side */
  ck_assert(same1(g, "b_x", "a_x", "b/out", "f/out"));  /* f with a_x fed: the same */
  ck_assert(!same1(g, "a_x", "a_x", "l/merge", "l/merge"));
  ck_assert(!same1(g, "a_x", "b_x", "a/out", "b/out:1")); /* another output */
  ck_assert(!same1(g, "a_x", "b_x", "a/out", "nowhere")); /* not in g */
  ck_assert(!same1(g, "a_x", "b/c", "a/out", "b/out"));   /* fed nodes differ */
  ck_assert(!same1(g, "a_x", "a_x", "a/out", "b/out"));   /* b's placeholder is not fed */
  /* Two TF1 variables of equal attributes are two variables: y = x + v1
   * and y = x + v2 differ. */
  int v1 = add(g, "v1", "VariableV2", 1), v2 = add(g, "v2", "VariableV2", 1);
  set_str(g, v1, "shared_name", "");
  set_str(g, v2, "shared_name", "");
  int y1 = add(g, "y1", "AddV2", 1), y2 = add(g, "y2", "AddV2", 1);
  in(g, y1, eng_graph_find(g, "a_x", 3));
  in(g, y1, v1);
  in(g, y2, eng_graph_find(g, "a_x", 3));
  in(g, y2, v2);
  ck_assert(!same1(g, "a_x", "a_x", "y1", "y2"));
  ck_assert(same1(g, "a_x", "a_x", "y2", "y2"));
  /* The shared state alone, nothing fed. */
  const char *ra[] = {"a/read"}, *rb[] = {"b/read"};
  ck_assert(eng_graph_same_values(g, 0, NULL, NULL, 1, ra, rb));
  eng_graph_destroy(g);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("eng_graph");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, add_and_find);
  tcase_add_test(tc, many_nodes_index_grows);
  tcase_add_test(tc, duplicate_rejected);
  tcase_add_test(tc, inputs_and_ctrl);
  tcase_add_test(tc, parse_edge);
  tcase_add_test(tc, attr_lookup);
  tcase_add_test(tc, attr_copy_is_deep);
  tcase_add_test(tc, attr_free_resets);
  tcase_add_test(tc, library);
  tcase_add_test(tc, same_values);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
