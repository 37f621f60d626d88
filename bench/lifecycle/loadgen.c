/* Open-loop HTTP/1.1 load for the lifecycle benchmark.
 *
 * usage: loadgen HOST PORT PATH BODY_FILE RATE SECONDS THREADS OUT_CSV
 *
 * THREADS threads each keep one connection and send POST PATH with the body
 * on a fixed schedule (RATE/THREADS per second each). Latency is measured
 * from the scheduled send time, so a stall shows up in every request it
 * delays (no coordinated omission). Each request becomes one CSV line:
 * "sched_unix_seconds,latency_us,http_status" (status 0: connection error).
 * Built by bench/lifecycle/run.py with the system C compiler. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct rec {
  double sched;
  float lat_us;
  int status;
} rec;

static const char *host, *path;
static int port, threads;
static double rate, seconds, t_start;
static char *req;
static size_t req_len;

typedef struct worker {
  pthread_t t;
  int id;
  rec *recs;
  int n;
} worker;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int dial(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, host, &a.sin_addr);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Sends one request and reads one response; returns the HTTP status or 0. */
static int roundtrip(int fd) {
  size_t off = 0;
  while (off < req_len) {
    ssize_t w = write(fd, req + off, req_len - off);
    if (w <= 0) return 0;
    off += (size_t)w;
  }
  char buf[65536];
  size_t have = 0;
  long body = -1;
  size_t head_end = 0;
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
    if (r <= 0) return 0;
    have += (size_t)r;
    buf[have] = '\0';
    if (!head_end) {
      char *e = strstr(buf, "\r\n\r\n");
      if (!e) continue;
      head_end = (size_t)(e - buf) + 4;
      char *cl = strcasestr(buf, "content-length:");
      body = cl ? strtol(cl + 15, NULL, 10) : 0;
    }
    if (have >= head_end + (size_t)body) break;
    if (have >= sizeof buf - 1) return 0;
  }
  return atoi(buf + 9);
}

static void *run(void *arg) {
  worker *w = arg;
  double per = threads / rate;
  int max = (int)(seconds / per) + 2;
  w->recs = calloc((size_t)max, sizeof *w->recs);
  int fd = dial();
  for (int i = 0; i < max; i++) {
    double sched = t_start + w->id * (per / threads) + i * per;
    double t = now();
    if (sched > t_start + seconds || t > t_start + seconds) break;
    if (sched > t) usleep((useconds_t)((sched - t) * 1e6));
    if (fd < 0) fd = dial();
    int st = fd >= 0 ? roundtrip(fd) : 0;
    if (!st && fd >= 0) {
      close(fd);
      fd = -1;
    }
    w->recs[w->n++] = (rec){sched, (float)((now() - sched) * 1e6), st};
  }
  if (fd >= 0) close(fd);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 9) {
    fprintf(stderr, "usage: %s HOST PORT PATH BODY_FILE RATE SECONDS THREADS OUT_CSV\n", argv[0]);
    return 2;
  }
  host = argv[1];
  port = atoi(argv[2]);
  path = argv[3];
  rate = atof(argv[5]);
  seconds = atof(argv[6]);
  threads = atoi(argv[7]);
  FILE *bf = fopen(argv[4], "rb");
  if (!bf || rate <= 0 || threads < 1) return 2;
  char body[1 << 20];
  size_t blen = fread(body, 1, sizeof body, bf);
  fclose(bf);
  req = malloc(blen + 512);
  req_len = (size_t)sprintf(req,
                            "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\n\r\n",
                            path, host, blen);
  memcpy(req + req_len, body, blen);
  req_len += blen;
  worker *w = calloc((size_t)threads, sizeof *w);
  t_start = now() + 0.1;
  for (int i = 0; i < threads; i++) {
    w[i].id = i;
    pthread_create(&w[i].t, NULL, run, &w[i]);
  }
  FILE *out = fopen(argv[8], "w");
  for (int i = 0; i < threads; i++) {
    pthread_join(w[i].t, NULL);
    for (int k = 0; k < w[i].n; k++)
      fprintf(out, "%.6f,%.1f,%d\n", w[i].recs[k].sched, w[i].recs[k].lat_us, w[i].recs[k].status);
  }
  fclose(out);
  return 0;
}
