/* TF1 while frames -> While nodes (see eng_frames.h). Frames are lowered
 * longest name first: tf.while_loop names an inner loop's frame after the
 * outer one, so an inner loop is already a While node when the outer
 * loop's body is cut out around it. */
#include "eng_frames.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct frame {
  const char *name;
  int n_enter;
  int *enter;
} frame;

/* The first node consuming (node, index) through a data input whose op is
 * `op`, or -1. */
static int consumer(const eng_graph *g, int node, int index, const char *op) {
  for (int i = 0, n = eng_graph_node_count(g); i < n; i++) {
    const eng_node *nd = eng_graph_node(g, i);
    if (strcmp(nd->op, op)) continue;
    for (int k = 0; k < nd->n_in; k++)
      if (nd->in[k].node == node && nd->in[k].index == index) return i;
  }
  return -1;
}

/* "node:index" (malloc'd). */
static char *edge_name(const eng_graph *g, eng_edge e) {
  const char *nm = eng_graph_node(g, e.node)->name;
  size_t len = strlen(nm) + 24;
  char *s = malloc(len);
  if (s) snprintf(s, len, "%s:%d", nm, e.index);
  return s;
}

#define BAD(...) td_err_set(err, TD_INVALID_ARGUMENT, __VA_ARGS__)

static td_code lower(eng_graph *g, const frame *f, td_err *err) {
  int ne = f->n_enter, nv = 0, nc = 0;
  /* per Enter: merge, next, switch, exit (variables only) */
  int *m = calloc((size_t)ne * 4 + 1, sizeof *m), *nx = m + ne, *sw = nx + ne, *ex = sw + ne;
  char **names = calloc((size_t)ne * 4 + 2, sizeof *names);
  bool *pivot = calloc((size_t)eng_graph_node_count(g) + 2, sizeof *pivot);
  td_code rc = TD_OK;
  int lc = -1, w = -1;
  if (!m || !names || !pivot) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  for (int i = 0; i < ne && !rc; i++) {
    int e = f->enter[i];
    const eng_node *en = eng_graph_node(g, e);
    pivot[e] = true;
    if (en->n_in < 1) {
      rc = BAD("frame '%s': Enter '%s' has no input", f->name, en->name);
      break;
    }
    if (eng_node_attr_bool(en, "is_constant", false)) {
      nc++;
      continue;
    }
    nv++;
    m[i] = consumer(g, e, 0, "Merge");
    const eng_node *mn = m[i] >= 0 ? eng_graph_node(g, m[i]) : NULL;
    if (!mn || mn->n_in != 2) {
      rc = BAD("frame '%s': Enter '%s' feeds no two-input Merge", f->name, en->name);
      break;
    }
    nx[i] = mn->in[0].node == e ? mn->in[1].node : mn->in[0].node;
    sw[i] = consumer(g, m[i], 0, "Switch");
    if (strcmp(eng_graph_node(g, nx[i])->op, "NextIteration") || sw[i] < 0) {
      rc = BAD("frame '%s': Merge '%s' is not a loop variable's", f->name, mn->name);
      break;
    }
    const eng_node *sn = eng_graph_node(g, sw[i]);
    int cond = sn->n_in == 2 ? sn->in[1].node : -1;
    if (cond < 0 || strcmp(eng_graph_node(g, cond)->op, "LoopCond") || (lc >= 0 && cond != lc)) {
      rc = BAD("frame '%s': Switch '%s' is not on the loop's LoopCond", f->name, sn->name);
      break;
    }
    lc = cond;
    ex[i] = consumer(g, sw[i], 0, "Exit");
    if (eng_graph_node(g, nx[i])->n_in != 1) {
      rc = BAD("frame '%s': NextIteration without an input", f->name);
      break;
    }
    pivot[m[i]] = pivot[nx[i]] = pivot[sw[i]] = true;
  }
  if (!rc && (lc < 0 || eng_graph_node(g, lc)->n_in != 1))
    rc = BAD("frame '%s': no loop variable on a LoopCond", f->name);
  if (rc) goto done;
  pivot[lc] = true;

  /* The While node: variables, then invariants. */
  size_t wl = strlen(eng_graph_node(g, lc)->name) + 16;
  char *wname = malloc(wl);
  if (!wname) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  snprintf(wname, wl, "%s/_td_while", eng_graph_node(g, lc)->name);
  w = eng_graph_add_node(g, wname, "While", err);
  free(wname);
  if (w < 0) {
    rc = err ? err->code : TD_INTERNAL;
    goto done;
  }
  eng_graph_node(g, w)->n_out = nv + nc;
  for (int pass = 0; pass < 2 && !rc; pass++)
    for (int i = 0; i < ne && !rc; i++) {
      const eng_node *en = eng_graph_node(g, f->enter[i]);
      if (eng_node_attr_bool(en, "is_constant", false) == (pass == 1))
        rc = eng_graph_add_input(g, w, en->in[0], err);
    }
  /* cond: fed at the Merges (and invariants), fetching the predicate. */
  for (int role = 0; role < 2 && !rc; role++) {
    int k = 0;
    for (int pass = 0; pass < 2; pass++)
      for (int i = 0; i < ne; i++) {
        const eng_node *en = eng_graph_node(g, f->enter[i]);
        bool inv = eng_node_attr_bool(en, "is_constant", false);
        if (inv != (pass == 1)) continue;
        names[k++] = inv ? edge_name(g, (eng_edge){f->enter[i], 0})
                         : edge_name(g, (eng_edge){role ? sw[i] : m[i], role ? 1 : 0});
      }
    for (int i = 0; i < k; i++)
      if (!names[i]) rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    if (!rc) rc = eng_graph_add_names(g, w, role ? "_td_body_args" : "_td_cond_args", names, k, err);
    int kr = 0;
    if (!role) {
      names[k + kr++] = edge_name(g, eng_graph_node(g, lc)->in[0]);
    } else {
      for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < ne; i++) {
          const eng_node *en = eng_graph_node(g, f->enter[i]);
          bool inv = eng_node_attr_bool(en, "is_constant", false);
          if (inv != (pass == 1)) continue;
          names[k + kr++] = inv ? edge_name(g, (eng_edge){f->enter[i], 0})
                                : edge_name(g, eng_graph_node(g, nx[i])->in[0]);
        }
    }
    for (int i = 0; i < kr && !rc; i++)
      if (!names[k + i]) rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    if (!rc) rc = eng_graph_add_names(g, w, role ? "_td_body_rets" : "_td_cond_rets", names + k, kr, err);
    for (int i = 0; i < k + kr; i++) {
      free(names[i]);
      names[i] = NULL;
    }
  }
  if (rc) goto done;
  /* Exits read the While; control edges onto the frame's pivots go. */
  for (int i = 0, v = 0; i < ne; i++) {
    if (eng_node_attr_bool(eng_graph_node(g, f->enter[i]), "is_constant", false)) continue;
    if (ex[i] >= 0) {
      eng_node *xn = eng_graph_node(g, ex[i]);
      char *op = strdup("Identity");
      if (!op) {
        rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
        goto done;
      }
      free(xn->op);
      xn->op = op;
      xn->in[0] = (eng_edge){w, v};
      xn->n_in = 1;
    }
    v++;
  }
  for (int i = 0, n = eng_graph_node_count(g); i < n; i++) {
    eng_node *nd = eng_graph_node(g, i);
    int k = 0;
    for (int c = 0; c < nd->n_ctrl; c++)
      if (nd->ctrl[c] >= n || !pivot[nd->ctrl[c]]) nd->ctrl[k++] = nd->ctrl[c];
    nd->n_ctrl = k;
  }
done:
  free(m);
  free(names);
  free(pivot);
  return rc;
}

static int by_name_length(const void *a, const void *b) {
  size_t x = strlen(((const frame *)a)->name), y = strlen(((const frame *)b)->name);
  return x < y ? 1 : x > y ? -1 : strcmp(((const frame *)a)->name, ((const frame *)b)->name);
}

td_code eng_frames_lower(eng_graph *g, td_err *err) {
  int n = eng_graph_node_count(g), nf = 0;
  frame *fr = NULL;
  td_code rc = TD_OK;
  for (int i = 0; i < n && !rc; i++) {
    const eng_node *nd = eng_graph_node(g, i);
    if (strcmp(nd->op, "Enter")) continue;
    const char *name = eng_attr_str(nd, "frame_name", "");
    int f = 0;
    while (f < nf && strcmp(fr[f].name, name)) f++;
    if (f == nf) {
      frame *grown = realloc(fr, sizeof *fr * (size_t)(nf + 1));
      if (!grown) {
        rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
        break;
      }
      fr = grown;
      fr[nf++] = (frame){.name = name};
    }
    int *e = realloc(fr[f].enter, sizeof *e * (size_t)(fr[f].n_enter + 1));
    if (!e) {
      rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
      break;
    }
    fr[f].enter = e;
    e[fr[f].n_enter++] = i;
  }
  if (!rc && nf) qsort(fr, (size_t)nf, sizeof *fr, by_name_length);
  for (int f = 0; f < nf && !rc; f++)
    if ((rc = lower(g, &fr[f], err)) == TD_INVALID_ARGUMENT) {
      /* Not tf.while_loop's shape: left alone (eng_frames.h). */
      td_err_clear(err);
      rc = TD_OK;
    }
  for (int f = 0; f < nf; f++) free(fr[f].enter);
  free(fr);
  return rc;
}

bool eng_frames_is_loop_op(const char *op) {
  return !strcmp(op, "Enter") || !strcmp(op, "Exit") || !strcmp(op, "LoopCond") ||
         !strcmp(op, "NextIteration");
}
