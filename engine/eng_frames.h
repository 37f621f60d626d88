/* eng_frames: TF1 while loops (control flow v1) turned into While nodes.
 *
 * A TF1 tf.while_loop is a cycle in the graph, held together by a frame
 * name: per loop variable Enter -> Merge -> Switch (on the LoopCond) ->
 * Exit on the false side, Identity -> body -> NextIteration -> back into
 * the Merge on the true side; loop invariants come in through Enter nodes
 * with is_constant. The run loop takes one pass over acyclic plans, so each
 * frame is lowered, once at load, to the functional form the engine
 * already runs (eng_kernels_control.c): a node "<LoopCond>/_td_while" of
 * op While whose inputs are the Enters' inputs (variables, then
 * invariants), with the subgraph attributes of eng_inline.h naming its
 * cond (fed at the Merges, fetching the LoopCond's predicate) and its body
 * (fed at the Switches' true sides, fetching the NextIterations' inputs;
 * invariants pass through). Each Exit becomes an Identity of the While's
 * output, so signatures naming an Exit or anything after it still find
 * it. Control edges from the loop's nodes onto its Enter / Merge / Switch
 * / LoopCond / NextIteration nodes (TensorFlow's frame pivots) are dropped:
 * in the lowered form every cond or body node runs once per iteration
 * anyway. The frame's original nodes stay in the graph, no longer reached.
 *
 * Frames are lowered innermost first (by name: tf.while_loop names an
 * inner loop's frame after its outer one), so a nested loop is a While
 * node inside its outer loop's body. A frame whose structure is not the
 * one tf.while_loop builds is left as it is: a signature that reaches it
 * fails its load as a cycle, one that does not is unaffected.
 *
 * Runs at load time, single-threaded, on a graph being prepared (after
 * eng_inline_calls). Fails only when memory runs out. */
#ifndef ENG_FRAMES_H
#define ENG_FRAMES_H

#include "eng_graph.h"

td_code eng_frames_lower(eng_graph *g, td_err *err);

/* True for the frame ops a lowered loop leaves behind (Enter, Exit,
 * LoopCond, NextIteration): they never run themselves. */
bool eng_frames_is_loop_op(const char *op);

#endif
