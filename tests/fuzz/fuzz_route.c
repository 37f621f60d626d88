/* REST request lines through the router: the first byte picks the method,
 * the rest is the path as libmicrohttpd hands it over (not unescaped). */
#include "fuzz_util.h"
#include "srv_route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const methods[] = {"GET", "POST", "PUT", "OPTIONS", "DELETE", "HEAD"};
  if (!size) return 0;
  char *path = malloc(size);
  if (!path) return 0;
  memcpy(path, data + 1, size - 1);
  path[size - 1] = '\0';
  srv_route r;
  td_err err;
  srv_route_parse(methods[data[0] % 6], path, &r, &err);
  free(path);
  return 0;
}
