#include "ldr_signature.h"

#include <string.h>

static int find_alias(const ldr_tensor_info *t, int n, const char *alias) {
  for (int i = 0; i < n; i++)
    if (!strcmp(t[i].alias, alias)) return i;
  return -1;
}

int ldr_signature_input(const ldr_signature *s, const char *alias) {
  return find_alias(s->inputs, s->n_inputs, alias);
}

int ldr_signature_output(const ldr_signature *s, const char *alias) {
  return find_alias(s->outputs, s->n_outputs, alias);
}
