#include "eng_einsum.h"

#include <string.h>

static int label_at(const char *s, int n, char l) {
  for (int i = 0; i < n; i++)
    if (s[i] == l) return i;
  return -1;
}

/* Splits "x,y->z" into its three label strings (letters only). */
static bool split(const char *eq, char lab[3][ENG_MAX_RANK], int cnt[3]) {
  int part = 0;
  cnt[0] = cnt[1] = cnt[2] = 0;
  for (const char *p = eq; *p; p++) {
    if (*p == ' ') continue;
    if (*p == ',' && part == 0) {
      part = 1;
    } else if (*p == '-' && p[1] == '>' && part == 1) {
      part = 2;
      p++;
    } else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) {
      if (cnt[part] >= ENG_MAX_RANK || label_at(lab[part], cnt[part], *p) >= 0) return false;
      lab[part][cnt[part]++] = *p;
    } else {
      return false;
    }
  }
  return part == 2;
}

/* Rewrites eq with each "..." replaced by letters the equation does not
 * use: an operand's ellipsis stands for its dims beyond its letters
 * (ranks ra, rb; -1: one dim), aligned on the right as NumPy aligns them,
 * and the output's for the longer of the two. False when eq does not fit
 * out or runs out of letters. */
static bool expand_ellipsis(const char *eq, int ra, int rb, char *out, size_t cap) {
  int letters[3] = {0, 0, 0}, part = 0;
  bool has[3] = {false, false, false}, used[128] = {false};
  for (const char *p = eq; *p; p++) {
    if (*p == ',' && part == 0) {
      part = 1;
    } else if (*p == '-' && p[1] == '>') {
      part = 2;
      p++;
    } else if (!strncmp(p, "...", 3) && !has[part]) {
      has[part] = true;
      p += 2;
    } else if ((unsigned char)*p < 128 && *p != ' ') {
      letters[part]++;
      used[(int)*p] = true;
    }
  }
  int ell[2] = {ra < 0 ? 1 : ra - letters[0], rb < 0 ? 1 : rb - letters[1]};
  for (int k = 0; k < 2; k++)
    if (!has[k] || ell[k] < 0) ell[k] = 0;
  int nl = ell[0] > ell[1] ? ell[0] : ell[1];
  if (nl > ENG_MAX_RANK) return false;
  char fresh[ENG_MAX_RANK];
  int nf = 0;
  for (int c = 'a'; c <= 'z' + 26 && nf < nl; c++) {
    int l = c <= 'z' ? c : 'A' + (c - 'z' - 1);
    if (!used[l]) fresh[nf++] = (char)l;
  }
  if (nf < nl) return false;
  size_t o = 0;
  part = 0;
  for (const char *p = eq; *p; p++) {
    if (*p == ',' && part == 0) part = 1;
    else if (*p == '-' && p[1] == '>') part = 2;
    if (!strncmp(p, "...", 3)) {
      int len = part == 2 ? nl : ell[part];
      for (int i = nl - len; i < nl; i++) {
        if (o + 1 >= cap) return false;
        out[o++] = fresh[i];
      }
      p += 2;
      continue;
    }
    if (o + 1 >= cap) return false;
    out[o++] = *p;
  }
  out[o] = 0;
  return true;
}

td_code eng_einsum_check(const char *eq, td_err *err) {
  char ex[256];
  if (!expand_ellipsis(eq, -1, -1, ex, sizeof ex))
    return td_err_set(err, TD_UNIMPLEMENTED, "Einsum equation '%s' is not supported", eq);
  /* Every label of size 1: only the equation's form is checked. */
  eng_shape sa = {.rank = 0}, sb = {.rank = 0};
  int part = 0;
  for (const char *p = ex; *p && *p != '-'; p++) {
    if (*p == ',') {
      part = 1;
    } else if (*p != ' ') {
      eng_shape *s = part ? &sb : &sa;
      if (s->rank < ENG_MAX_RANK) s->dim[s->rank] = 1;
      s->rank++;
    }
  }
  if (sa.rank > ENG_MAX_RANK || sb.rank > ENG_MAX_RANK)
    return td_err_set(err, TD_UNIMPLEMENTED, "Einsum equation '%s' is not supported", eq);
  eng_einsum e;
  td_code rc = eng_einsum_plan(ex, &sa, &sb, &e, err);
  if (rc) td_err_set(err, rc, "Einsum equation '%s' is not supported", eq);
  return rc;
}

td_code eng_einsum_plan(const char *eq_in, const eng_shape *a, const eng_shape *b, eng_einsum *e,
                        td_err *err) {
  char ex[256];
  const char *eq = eq_in;
  if (strstr(eq_in, "...")) {
    if (!expand_ellipsis(eq_in, a->rank, b->rank, ex, sizeof ex))
      return td_err_set(err, TD_UNIMPLEMENTED, "Einsum equation '%s' is not supported", eq_in);
    eq = ex;
  }
  char lab[3][ENG_MAX_RANK];
  int cnt[3];
  const char *la = lab[0], *lb = lab[1], *lo = lab[2];
  bool ok = split(eq, lab, cnt);
  int na = cnt[0], nb = cnt[1], no = cnt[2];
  char batch[ENG_MAX_RANK], fa[ENG_MAX_RANK], fb[ENG_MAX_RANK], ct[ENG_MAX_RANK];
  int nbt = 0, nfa = 0, nfb = 0, nct = 0;
  for (int i = 0; ok && i < na; i++) {
    bool in_b = label_at(lb, nb, la[i]) >= 0, in_o = label_at(lo, no, la[i]) >= 0;
    if (in_b && in_o) batch[nbt++] = la[i];
    else if (in_b) ct[nct++] = la[i];
    else if (in_o) fa[nfa++] = la[i];
    else ok = false; /* summed away */
  }
  for (int i = 0; ok && i < nb; i++) {
    bool in_a = label_at(la, na, lb[i]) >= 0, in_o = label_at(lo, no, lb[i]) >= 0;
    if (!in_a && in_o) fb[nfb++] = lb[i];
    else if (!in_a) ok = false;
  }
  for (int i = 0; ok && i < no; i++) ok = label_at(la, na, lo[i]) >= 0 || label_at(lb, nb, lo[i]) >= 0;
  if (!ok || nbt + 2 > ENG_MAX_RANK)
    return td_err_set(err, TD_UNIMPLEMENTED, "Einsum equation '%s' is not supported", eq);
  if (a->rank != na || b->rank != nb)
    return td_err_set(err, TD_INVALID_ARGUMENT, "equation '%s' expects ranks %d and %d, got %d and %d",
                      eq, na, nb, a->rank, b->rank);
  int64_t size[128] = {0};
  for (int i = 0; i < na; i++) size[(int)la[i]] = a->dim[i];
  for (int i = 0; i < nb; i++) {
    int j = label_at(la, na, lb[i]);
    if (j >= 0 && a->dim[j] != b->dim[i])
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "label '%c' has size %lld in input 0 but %lld in input 1 (equation '%s')",
                        lb[i], (long long)a->dim[j], (long long)b->dim[i], eq);
    size[(int)lb[i]] = b->dim[i];
  }
  memset(e, 0, sizeof *e);
  memcpy(e->la, la, (size_t)na);
  memcpy(e->lb, lb, (size_t)nb);
  memcpy(e->lo, lo, (size_t)no);
  e->na = na;
  e->nb = nb;
  e->no = no;
  memcpy(e->lbatch, batch, (size_t)nbt);
  memcpy(e->lfa, fa, (size_t)nfa);
  memcpy(e->lfb, fb, (size_t)nfb);
  memcpy(e->lct, ct, (size_t)nct);
  e->nbt = nbt;
  e->nfa = nfa;
  e->nfb = nfb;
  e->nct = nct;
  e->n_batch = nbt;
  e->batch = e->m = e->n = e->k = 1;
  int k = 0;
  for (int i = 0; i < nbt; i++) {
    e->perm_a[k++] = label_at(la, na, batch[i]);
    e->batch_dim[i] = size[(int)batch[i]];
    e->batch *= e->batch_dim[i];
  }
  for (int i = 0; i < nfa; i++) {
    e->perm_a[k++] = label_at(la, na, fa[i]);
    e->m *= size[(int)fa[i]];
  }
  for (int i = 0; i < nct; i++) {
    e->perm_a[k++] = label_at(la, na, ct[i]);
    e->k *= size[(int)ct[i]];
  }
  k = 0;
  for (int i = 0; i < nbt; i++) e->perm_b[k++] = label_at(lb, nb, batch[i]);
  for (int i = 0; i < nct; i++) e->perm_b[k++] = label_at(lb, nb, ct[i]);
  for (int i = 0; i < nfb; i++) {
    e->perm_b[k++] = label_at(lb, nb, fb[i]);
    e->n *= size[(int)fb[i]];
  }
  char order[3 * ENG_MAX_RANK];
  int nord = 0;
  for (int i = 0; i < nbt; i++) order[nord++] = batch[i];
  for (int i = 0; i < nfa; i++) order[nord++] = fa[i];
  for (int i = 0; i < nfb; i++) order[nord++] = fb[i];
  if (nord > ENG_MAX_RANK)
    return td_err_set(err, TD_UNIMPLEMENTED, "Einsum equation '%s' is not supported", eq);
  e->prod.rank = nord;
  for (int i = 0; i < nord; i++) e->prod.dim[i] = size[(int)order[i]];
  e->out.rank = no;
  for (int i = 0; i < no; i++) {
    e->perm_out[i] = label_at(order, nord, lo[i]);
    e->out.dim[i] = e->prod.dim[e->perm_out[i]];
  }
  return TD_OK;
}

/* --- the in-place form ---------------------------------------------------- */

/* An operand or the output as its labels see it (row-major, contiguous). */
typedef struct view {
  const char *lab;
  int n;
  const int64_t *dim;
} view;

/* Element stride of label l in v (-1 when absent). */
static int64_t label_stride(const view *v, char l) {
  int64_t st = 1;
  for (int i = v->n - 1; i >= 0; i--) {
    if (v->lab[i] == l) return st;
    st *= v->dim[i];
  }
  return -1;
}

/* Whether the labels g[0..n) of v, in that order, form one dimension of
 * memory (each stride the next one's times its size); *size and *stride
 * get the merged dimension. */
static bool merge_group(const view *v, const char *g, int n, int64_t *size, int64_t *stride) {
  if (n == 0) return false;
  *size = 1;
  for (int i = 0; i < n; i++) {
    int64_t st = label_stride(v, g[i]);
    if (st < 0) return false;
    if (i + 1 < n) {
      int64_t next = label_stride(v, g[i + 1]), d = 0;
      for (int j = 0; j < v->n; j++)
        if (v->lab[j] == g[i + 1]) d = v->dim[j];
      if (next < 0 || st != next * d) return false;
    }
    for (int j = 0; j < v->n; j++)
      if (v->lab[j] == g[i]) *size *= v->dim[j];
  }
  *stride = label_stride(v, g[n - 1]);
  return true;
}

bool eng_einsum_in_place(const eng_einsum *e, const eng_shape *a, const eng_shape *b,
                         eng_einsum_gemm *g) {
  view va = {e->la, e->na, a->dim}, vb = {e->lb, e->nb, b->dim}, vo = {e->lo, e->no, e->out.dim};
  int64_t m, n, k, sam, sak, sbk, sbn, som, son, x;
  if (!merge_group(&va, e->lfa, e->nfa, &m, &sam) || !merge_group(&va, e->lct, e->nct, &k, &sak) ||
      !merge_group(&vb, e->lct, e->nct, &x, &sbk) || !merge_group(&vb, e->lfb, e->nfb, &n, &sbn) ||
      !merge_group(&vo, e->lfa, e->nfa, &x, &som) || !merge_group(&vo, e->lfb, e->nfb, &x, &son))
    return false;
  if ((sak != 1 && sam != 1) || (sbn != 1 && sbk != 1) || son != 1) return false;
  if (!m || !n || !k) return false;
  memset(g, 0, sizeof *g);
  g->ta = sak != 1;
  g->tb = sbn != 1;
  g->m = m;
  g->n = n;
  g->k = k;
  g->lda = g->ta ? sak : sam;
  g->ldb = g->tb ? sbn : sbk;
  g->ldc = som;
  if (g->lda < (g->ta ? m : k) || g->ldb < (g->tb ? k : n) || g->ldc < n) return false;
  g->nb = e->nbt;
  g->total = 1;
  for (int i = 0; i < e->nbt; i++) {
    g->st[0][i] = label_stride(&va, e->lbatch[i]);
    g->st[1][i] = label_stride(&vb, e->lbatch[i]);
    g->st[2][i] = label_stride(&vo, e->lbatch[i]);
    g->bdim[i] = e->out.dim[label_at(e->lo, e->no, e->lbatch[i])];
    g->total *= g->bdim[i];
  }
  return true;
}

bool eng_einsum_const_b(const char *eq, const eng_shape *b, int64_t *k, int64_t *n, bool *trans_b) {
  char lab[3][ENG_MAX_RANK];
  int cnt[3];
  if (strstr(eq, "...") || !split(eq, lab, cnt) || cnt[1] != b->rank) return false;
  /* A of every size this B allows is checked as one: a label A shares with
   * B takes B's size, the others 2 (not 1, which would let dims merge that
   * do not in general). */
  eng_shape a = {.rank = cnt[0]};
  for (int i = 0; i < cnt[0]; i++) {
    int j = label_at(lab[1], cnt[1], lab[0][i]);
    a.dim[i] = j >= 0 ? b->dim[j] : 2;
  }
  for (int i = 0; i < b->rank; i++)
    if (b->dim[i] < 1) return false;
  eng_einsum e;
  eng_einsum_gemm g;
  if (eng_einsum_plan(eq, &a, b, &e, NULL) || !eng_einsum_in_place(&e, &a, b, &g) || g.nb || g.ta ||
      g.ldb != (g.tb ? g.k : g.n))
    return false;
  *k = g.k;
  *n = g.n;
  *trans_b = g.tb;
  return true;
}

bool eng_einsum_const_b_dims(const char *eq, const eng_shape *b, eng_shape *free) {
  int64_t k, n;
  bool tb;
  char lab[3][ENG_MAX_RANK];
  int cnt[3];
  if (!eng_einsum_const_b(eq, b, &k, &n, &tb) || !split(eq, lab, cnt)) return false;
  free->rank = 0;
  for (int i = 0; i < cnt[1]; i++)
    if (label_at(lab[0], cnt[0], lab[1][i]) < 0) free->dim[free->rank++] = b->dim[i];
  return true;
}
