/* libcurl, used plainly: one easy handle per request (ldr_http_do) or per
 * part (ldr_http_fetch, driven by one multi handle). A part that fails is
 * taken out of the multi handle, waits its backoff (the others keep
 * running) and is added again from its first byte. */
#include "ldr_http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "td_clock.h"

#define CONNECT_MS 10000L
#define STALL_SECONDS 30L

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static uint64_t mono_us(void) { return td_now_ns() / 1000u; }

int64_t ldr_http_backoff_us(int attempt) {
  int64_t us = 100000;
  for (int i = 1; i < attempt && us < 5000000; i++) us *= 2;
  if (us > 5000000) us = 5000000;
  /* Up to a quarter more, so that replicas retrying together spread out. */
  return us + (int64_t)(((uint64_t)mono_us() * 2654435761u) % (uint64_t)(us / 4 + 1));
}

static bool retryable_status(long st) { return st == 429 || st >= 500; }

static struct curl_slist *make_headers(const ldr_http_req *r, const char *extra) {
  struct curl_slist *h = NULL;
  for (int i = 0; i < r->n_headers; i++) {
    struct curl_slist *n = curl_slist_append(h, r->headers[i]);
    if (!n) goto fail;
    h = n;
  }
  /* curl would otherwise add "Expect: 100-continue" to PUT/POST bodies. */
  struct curl_slist *n = curl_slist_append(h, "Expect:");
  if (!n) goto fail;
  h = n;
  if (extra) {
    n = curl_slist_append(h, extra);
    if (!n) goto fail;
    h = n;
  }
  return h;
fail:
  curl_slist_free_all(h);
  return NULL;
}

static void setup(CURL *c, const ldr_http_req *r, struct curl_slist *h) {
  curl_easy_setopt(c, CURLOPT_URL, r->url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_MS);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, STALL_SECONDS);
  if (r->timeout_ms > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, r->timeout_ms);
  if (r->insecure) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  const char *m = r->method ? r->method : "GET";
  if (!strcmp(m, "GET")) {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, m);
    if (r->body || !strcmp(m, "POST") || !strcmp(m, "PUT")) {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body ? r->body : "");
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    }
  }
}

static size_t on_body(char *p, size_t size, size_t n, void *arg) {
  td_buf *b = arg;
  td_buf_append(b, p, size * n);
  return b->oom ? 0 : size * n;
}

static td_code curl_error(td_err *err, CURLcode cc, const char *url) {
  td_code code = cc == CURLE_OPERATION_TIMEDOUT ? TD_DEADLINE_EXCEEDED : TD_UNAVAILABLE;
  return td_err_set(err, code, "%s: %s", url, curl_easy_strerror(cc));
}

td_code ldr_http_do(const ldr_http_req *r, int retries, long *status, td_buf *body, td_err *err) {
  pthread_once(&once, global_init);
  struct curl_slist *h = make_headers(r, NULL);
  CURL *c = curl_easy_init();
  if (!h || !c) {
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  td_code rc = TD_OK;
  for (int attempt = 0;; attempt++) {
    if (attempt) usleep((useconds_t)ldr_http_backoff_us(attempt));
    size_t mark = body->len;
    setup(c, r, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    CURLcode cc = curl_easy_perform(c);
    if (cc == CURLE_OK) {
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
      if (!retryable_status(*status) || attempt >= retries) break;
    } else if (body->oom) {
      rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory reading %s", r->url);
      break;
    } else if (attempt >= retries) {
      rc = curl_error(err, cc, r->url);
      break;
    }
    body->len = mark; /* drop a partial or error answer before trying again */
    if (body->data) body->data[mark] = 0;
    curl_easy_reset(c);
  }
  curl_easy_cleanup(c);
  curl_slist_free_all(h);
  return rc;
}

/* --- parallel ranged downloads ------------------------------------------------ */

typedef struct part_run {
  ldr_http_part *p;
  CURL *c;
  struct curl_slist *h;
  int64_t written;
  int attempts;
  uint64_t not_before_us; /* waiting out a backoff */
  bool active, done, write_failed;
} part_run;

static size_t on_part(char *data, size_t size, size_t n, void *arg) {
  part_run *pr = arg;
  size_t len = size * n;
  if (pr->written + (int64_t)len > pr->p->len) return 0; /* more than asked: refuse */
  size_t off = 0;
  while (off < len) {
    ssize_t w = pwrite(pr->p->fd, data + off, len - off, pr->p->off + pr->written + (int64_t)off);
    if (w <= 0) {
      pr->write_failed = true;
      return 0;
    }
    off += (size_t)w;
  }
  pr->written += (int64_t)len;
  return len;
}

static bool start_part(CURLM *multi, part_run *pr) {
  char range[80];
  snprintf(range, sizeof range, "Range: bytes=%lld-%lld", (long long)pr->p->off,
           (long long)(pr->p->off + pr->p->len - 1));
  curl_slist_free_all(pr->h);
  pr->h = make_headers(&pr->p->req, range);
  if (!pr->c) pr->c = curl_easy_init();
  if (!pr->h || !pr->c) return false;
  curl_easy_reset(pr->c);
  setup(pr->c, &pr->p->req, pr->h);
  curl_easy_setopt(pr->c, CURLOPT_WRITEFUNCTION, on_part);
  curl_easy_setopt(pr->c, CURLOPT_WRITEDATA, pr);
  curl_easy_setopt(pr->c, CURLOPT_PRIVATE, pr);
  pr->written = 0;
  pr->write_failed = false;
  pr->active = curl_multi_add_handle(multi, pr->c) == CURLM_OK;
  return pr->active;
}

/* Judges a finished transfer; returns TD_OK when the part is complete,
 * sets *retry when another try may help. */
static td_code judge(part_run *pr, CURLcode cc, bool *retry, td_err *err) {
  const char *url = pr->p->req.url;
  *retry = false;
  if (pr->write_failed)
    return td_err_set(err, TD_INTERNAL, "%s: writing the cache file failed", url);
  if (cc != CURLE_OK) {
    *retry = true;
    return curl_error(err, cc, url);
  }
  long st = 0;
  curl_easy_getinfo(pr->c, CURLINFO_RESPONSE_CODE, &st);
  if (st != 206 && st != 200) {
    *retry = retryable_status(st);
    return td_err_set(err,
                      st == 404   ? TD_NOT_FOUND
                      : st == 403 ? TD_PERMISSION_DENIED
                      : st == 401 ? TD_UNAUTHENTICATED
                                  : TD_UNAVAILABLE,
                      "%s: HTTP %ld", url, st);
  }
  if (st == 200 && pr->p->off != 0)
    return td_err_set(err, TD_UNIMPLEMENTED, "%s: the server ignored the byte range", url);
  if (pr->written != pr->p->len) {
    *retry = true;
    return td_err_set(err, TD_DATA_LOSS, "%s: got %lld of %lld bytes", url, (long long)pr->written,
                      (long long)pr->p->len);
  }
  return TD_OK;
}

td_code ldr_http_fetch(ldr_http_part *parts, int n, int parallel, int retries, td_err *err) {
  pthread_once(&once, global_init);
  if (n <= 0) return TD_OK;
  if (parallel < 1) parallel = 1;
  part_run *runs = calloc((size_t)n, sizeof *runs);
  CURLM *multi = curl_multi_init();
  td_code rc = TD_OK;
  if (!runs || !multi) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto out;
  }
  for (int i = 0; i < n; i++) runs[i].p = &parts[i];
  int left = n;
  while (left > 0 && !rc) {
    int active = 0;
    uint64_t now = mono_us();
    for (int i = 0; i < n; i++) active += runs[i].active;
    for (int i = 0; i < n && active < parallel; i++) {
      part_run *pr = &runs[i];
      if (pr->active || pr->done) continue;
      if (pr->not_before_us > now) continue;
      if (!start_part(multi, pr)) {
        rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
        break;
      }
      active++;
    }
    if (rc) break;
    int running = 0;
    curl_multi_perform(multi, &running);
    CURLMsg *msg;
    int q;
    while ((msg = curl_multi_info_read(multi, &q))) {
      if (msg->msg != CURLMSG_DONE) continue;
      part_run *pr = NULL;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&pr);
      CURLcode cc = msg->data.result;
      curl_multi_remove_handle(multi, pr->c);
      pr->active = false;
      bool retry;
      td_err perr;
      if (judge(pr, cc, &retry, &perr) == TD_OK) {
        pr->done = true;
        left--;
      } else if (retry && pr->attempts < retries) {
        pr->attempts++;
        pr->not_before_us = mono_us() + (uint64_t)ldr_http_backoff_us(pr->attempts);
      } else {
        *err = perr;
        rc = perr.code;
        break;
      }
    }
    if (rc || left == 0) break;
    /* Wait for traffic, or for the earliest backoff to end. */
    uint64_t t = mono_us(), wake2 = 0;
    bool startable = false;
    for (int i = 0; i < n; i++) {
      if (runs[i].active || runs[i].done) continue;
      if (runs[i].not_before_us <= t)
        startable = true;
      else if (!wake2 || runs[i].not_before_us < wake2)
        wake2 = runs[i].not_before_us;
    }
    int wait_ms = 200;
    if (wake2 && (int)((wake2 - t) / 1000) + 1 < wait_ms) wait_ms = (int)((wake2 - t) / 1000) + 1;
    if (startable && running < parallel) wait_ms = 0;
    if (running)
      curl_multi_poll(multi, NULL, 0, wait_ms, NULL);
    else if (wait_ms > 0)
      usleep((useconds_t)wait_ms * 1000u);
  }
out:
  for (int i = 0; runs && i < n; i++) {
    if (runs[i].active) curl_multi_remove_handle(multi, runs[i].c);
    curl_easy_cleanup(runs[i].c);
    curl_slist_free_all(runs[i].h);
  }
  curl_multi_cleanup(multi);
  free(runs);
  return rc;
}
