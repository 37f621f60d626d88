/* JSON codec throughput for a 32 x 784 float batch (the MNIST-sized
 * :predict), calling srv_json directly: parse + decode
 * into a tensor, and encode a tensor of the same shape. Prints one line per
 * case with bytes per request, microseconds per request and MB/s.
 *
 * usage: json_bench [iterations]   (default 200) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "srv_json.h"

#define ROWS 32
#define COLS 784

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Request bodies as clients write them: "short" 4-decimal numbers, and
 * "repr" float32 values as Python's json.dumps prints them (17 digits). */
static void make_body(td_buf *b, bool repr) {
  unsigned s = 12345;
  td_buf_puts(b, "{\"instances\": [");
  for (int r = 0; r < ROWS; r++) {
    td_buf_puts(b, r ? ", [" : "[");
    for (int c = 0; c < COLS; c++) {
      s = s * 1103515245u + 12345u;
      float v = (float)((s >> 8) & 0xFFFF) / 65536.0f;
      if (repr)
        td_buf_printf(b, c ? ", %.17g" : "%.17g", (double)v);
      else
        td_buf_printf(b, c ? ", %.4f" : "%.4f", (double)v);
    }
    td_buf_putc(b, ']');
  }
  td_buf_puts(b, "]}");
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 200;
  if (iters < 1) iters = 1;
  ldr_tensor_info in = {.alias = "x", .name = "x:0", .dtype = ENG_DT_FLOAT,
                        .shape = eng_shape_make(2, (int64_t[]){-1, COLS})};
  ldr_tensor_info out = {.alias = "y", .name = "y:0", .dtype = ENG_DT_FLOAT,
                         .shape = eng_shape_make(2, (int64_t[]){-1, COLS})};
  ldr_signature sig = {.key = "serving_default", .method_name = "tensorflow/serving/predict",
                       .n_inputs = 1, .inputs = &in, .n_outputs = 1, .outputs = &out};
  for (int repr = 0; repr < 2; repr++) {
    td_buf body;
    td_buf_init(&body);
    make_body(&body, repr);
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
      srv_json_request jr;
      eng_tensor t = {0};
      srv_json_format fmt;
      td_err err;
      if (srv_json_parse_request(body.data, body.len, &jr, &err) ||
          srv_json_decode_predict(&jr, &sig, 0, &t, &fmt, &err)) {
        fprintf(stderr, "decode failed: %s\n", err.msg);
        return 1;
      }
      eng_tensor_release(&t);
      srv_json_request_free(&jr);
    }
    double us = (now_us() - t0) / iters;
    printf("decode %-5s %8zu bytes  %8.1f us/request  %7.1f MB/s\n", repr ? "repr" : "short",
           body.len, us, body.len / us);
    td_buf_free(&body);
  }
  /* Encode: a [32, 784] output of float32 values with short and full forms. */
  eng_tensor y = {0};
  eng_shape ys = eng_shape_make(2, (int64_t[]){ROWS, COLS});
  if (eng_tensor_alloc(&y, ENG_DT_FLOAT, &ys, NULL)) return 1;
  float *yv = eng_tensor_data(&y);
  unsigned s = 777;
  for (int i = 0; i < ROWS * COLS; i++) {
    s = s * 1103515245u + 12345u;
    yv[i] = (float)((s >> 8) & 0xFFFF) / 65536.0f; /* needs 5-9 digits */
  }
  size_t bytes = 0;
  double t0 = now_us();
  for (int i = 0; i < iters; i++) {
    td_buf b;
    td_buf_init(&b);
    td_err err;
    if (srv_json_encode_predict(&sig, &y, SRV_JSON_ROW, &b, &err)) {
      fprintf(stderr, "encode failed: %s\n", err.msg);
      return 1;
    }
    bytes = b.len;
    td_buf_free(&b);
  }
  double us = (now_us() - t0) / iters;
  printf("encode       %8zu bytes  %8.1f us/request  %7.1f MB/s\n", bytes, us, bytes / us);
  eng_tensor_release(&y);
  return 0;
}
