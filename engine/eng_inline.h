/* eng_inline: flattens function calls into the calling graph.
 *
 * A call is a node whose op is StatefulPartitionedCall or PartitionedCall
 * (callee in attr "f") or whose op names a library function directly. Each
 * call is replaced by a copy of the callee's body whose nodes are named
 * "<call>/<body node>", with the callee's _Arg i wired to the call's input i.
 * The call node itself stays, as an IdentityN over the callee's returns,
 * control-dependent on its control returns, so "call:i" keeps naming the
 * i-th result and running the call still runs the callee's side effects.
 * The call's own control inputs are kept on an entry NoOp
 * ("<call>/_entry") that every input-less body node depends on. Nested calls
 * are flattened in turn; a recursive or absurdly deep nesting fails with
 * INVALID_ARGUMENT rather than looping.
 *
 * Control flow (While / StatelessWhile: cond and body; If / StatelessIf:
 * then_branch and else_branch) is not flattened: each of the node's
 * functions is copied once into the graph as a detached subgraph named
 * "<node>/<cond|body|then|else>/...", its _Arg i a Placeholder, and the node
 * records the subgraph's argument and result names in the string-list
 * attributes "_td_<role>_args" and "_td_<role>_rets", from which the engine
 * builds a plan per role (eng_model_subplan). Nested calls and control flow
 * inside those subgraphs are handled in turn.
 *
 * Runs at load time, single-threaded, on a graph being prepared. */
#ifndef ENG_INLINE_H
#define ENG_INLINE_H

#include "eng_graph.h"

/* True for StatefulPartitionedCall / PartitionedCall or an op naming a
 * function of lib; *callee (optional) gets the function name. */
bool eng_inline_is_call(const eng_node *n, const eng_library *lib, const char **callee);

bool eng_inline_is_control_flow(const eng_node *n);

td_code eng_inline_calls(eng_graph *g, const eng_library *lib, td_err *err);

#endif
