/* srv_reqlog: records reach the file as TFRecords, and a full queue drops
 * and counts instead of blocking. The writer is held up by a FIFO that
 * nobody reads (opening it blocks) at the path the log file will have. */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srv_reqlog.h"
#include "td_metrics.h"

static char dir[] = "/tmp/td_reqlog_XXXXXX";

static void make_call(srv_call *c, ldr_signature *sig, ldr_tensor_info *in, ldr_tensor_info *out,
                      eng_tensor *ti, eng_tensor *to) {
  memset(c, 0, sizeof *c);
  in->alias = "x";
  out->alias = "y";
  *sig = (ldr_signature){
      .key = "serving_default", .n_inputs = 1, .inputs = in, .n_outputs = 1, .outputs = out};
  int64_t d = 2;
  eng_shape sh = eng_shape_make(1, &d);
  ck_assert_int_eq(eng_tensor_alloc(ti, ENG_DT_FLOAT, &sh, NULL), TD_OK);
  ck_assert_int_eq(eng_tensor_alloc(to, ENG_DT_FLOAT, &sh, NULL), TD_OK);
  float *x = eng_tensor_data(ti), *y = eng_tensor_data(to);
  x[0] = 1, x[1] = 2, y[0] = 2.5f, y[1] = 3;
  c->sig = sig;
  c->inputs = ti;
  c->outputs = to;
  c->version = 7;
  snprintf(c->metric_model, sizeof c->metric_model, "m");
}

typedef struct reader {
  int fd;
  int records;
  size_t total;
  bool ok;
} reader;

static bool read_full(int fd, unsigned char *p, size_t n) {
  for (size_t got = 0; got < n;) {
    ssize_t r = read(fd, p + got, n - got);
    if (r <= 0) return false;
    got += (size_t)r;
  }
  return true;
}

/* Reads TFRecords until EOF: length, its CRC, data, its CRC. */
static void *read_all(void *arg) {
  reader *rd = arg;
  unsigned char hdr[12];
  rd->ok = true;
  for (;;) {
    ssize_t n = read(rd->fd, hdr, 1);
    if (n <= 0) break;
    if (!read_full(rd->fd, hdr + 1, 11)) {
      rd->ok = false;
      break;
    }
    uint64_t len = 0;
    for (int i = 0; i < 8; i++) len |= (uint64_t)hdr[i] << (8 * i);
    unsigned char *body = malloc(len + 4);
    bool ok = body && read_full(rd->fd, body, len + 4);
    free(body);
    if (!ok) {
      rd->ok = false;
      break;
    }
    rd->total += 12 + len + 4;
    rd->records++;
  }
  return NULL;
}

static int64_t counter(const char *text, const char *line_start) {
  const char *p = strstr(text, line_start);
  return p ? atoll(p + strlen(line_start)) : -1;
}

START_TEST(full_queue_drops_and_counts) {
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char prefix[256], path[512];
  snprintf(prefix, sizeof prefix, "%s/log", dir);
  snprintf(path, sizeof path, "%s.%ld.0.tfrecord", prefix, (long)getpid());
  ck_assert_int_eq(mkfifo(path, 0600), 0);

  cfg_model m = {
      .name = "m", .base_path = "/x", .log_sampling_rate = 1, .log_filename_prefix = prefix};
  cfg_model_config cfg = {.n_models = 1, .models = &m};
  srv_reqlog_start();
  srv_reqlog_configure(NULL, &cfg);

  srv_call c;
  ldr_signature sig;
  ldr_tensor_info in = {0}, out = {0};
  eng_tensor ti, to;
  make_call(&c, &sig, &in, &out, &ti, &to);
  int sent = SRV_REQLOG_QUEUE + 50;
  for (int i = 0; i < sent; i++) srv_reqlog_predict(&c); /* never blocks */

  td_buf b;
  td_buf_init(&b);
  td_metrics_render(&b);
  int64_t dropped = counter(b.data, "tensord_request_log_dropped_total{model_name=\"m\"} ");
  td_buf_free(&b);
  /* The writer holds at most one record (blocked opening the FIFO). */
  ck_assert_int_ge(dropped, sent - SRV_REQLOG_QUEUE - 1);
  ck_assert_int_le(dropped, sent - SRV_REQLOG_QUEUE);

  /* A reader lets the writer go: every queued record arrives, framed. */
  int fd = open(path, O_RDONLY);
  ck_assert_int_ge(fd, 0);
  reader rd = {.fd = fd};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, read_all, &rd), 0);
  srv_reqlog_stop(); /* drains the queue, closes the file */
  pthread_join(th, NULL);
  close(fd);
  ck_assert(rd.ok);
  int records = rd.records;
  size_t total = rd.total;
  ck_assert_int_eq(records + dropped, sent);
  ck_assert_int_gt(total, 0);
  td_buf_init(&b);
  td_metrics_render(&b);
  ck_assert_int_eq(counter(b.data,
                           ":tensorflow:serving:request_log_count{model_name=\"m\","
                           "status=\"OK\"} "),
                   records);
  td_buf_free(&b);
  eng_tensor_release(&ti);
  eng_tensor_release(&to);
  unlink(path);
  rmdir(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("srv_reqlog");
  TCase *tc = tcase_create("reqlog");
  tcase_add_test(tc, full_queue_drops_and_counts);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
