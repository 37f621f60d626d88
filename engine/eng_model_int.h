/* eng_model_int (internal to engine/): the model's layout, shared by the
 * model and plan builder (eng_model.c) and its weight memory
 * (eng_weights.c: the packed-weight table, releasing originals, stats). */
#ifndef ENG_MODEL_INT_H
#define ENG_MODEL_INT_H

#include <stdatomic.h>
#include <threads.h>

#include "eng_gemm.h"
#include "eng_model.h"

typedef struct var_slot {
  char *key; /* container/shared_name */
  eng_tensor value;
  bool init;
  /* A node of a plan built without targets reads it. Atomic: shape
   * specialisations are built, and set it, on serving threads at once. */
  atomic_bool served;
  bool noted;  /* eng_model_note_reads: a noted plan reads or assigns it */
} var_slot;

struct eng_model {
  eng_graph *g;
  eng_library *lib; /* while eng_model_create inlines, then NULL */
  eng_io io;
  int64_t *node_slot; /* per node: variable slot or -1 */
  int n_slots;
  var_slot *slots;
  void *dev; /* the device's state for this model (eng_device_attach), or NULL */
  void (*dev_free)(void *);
  /* Plans of control-flow subgraphs (eng_model_subplan), built once. */
  mtx_t sub_lock;
  bool sub_lock_init;
  int n_sub;
  struct subplan {
    int node;
    char role[8];
    eng_plan *plan;
  } * sub;
  /* Weights packed for eng_gemm, shared by every plan of the model
   * (eng_model_pack), so a shape-specialised plan does not pack them again. */
  mtx_t pack_lock;
  bool pack_lock_init;
  int n_packed, cap_packed;
  struct packed_weight {
    eng_tensor w; /* a share of the original, or of its hollow stand-in once
                     released: the buffer's address names the weight */
    int64_t k, n;
    bool trans_b;
    bool wino;    /* eng_wino_pack's form (k, n: the filter's depth and count) */
    float *scale; /* copy of the folded per-channel scale, or NULL */
    int64_t nscale;
    eng_packed *packed;
  } * packed;
  size_t released; /* bytes of originals eng_model_release_packed_sources freed */
  /* eng_model_note_reads: 1 once plans are noted, -1 when one could not be. */
  int noting;
  int skip_node; /* the RestoreV2 node skip[] is for, or -1 */
  int n_skip;
  bool *skip; /* per output of skip_node: eng_model_restore_skips */
};

#endif
