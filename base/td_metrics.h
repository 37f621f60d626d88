/* td_metrics: the process's metric registry (counters, gauges, histograms)
 * and its Prometheus text exposition.
 *
 * A metric is a family: a name (already in Prometheus form, e.g.
 * ":tensorflow:serving:request_count"), a kind, up to TD_METRIC_MAX_LABELS
 * label names and, for histograms, bucket upper bounds. Registering the same
 * name twice returns the first registration. A series is one label-value
 * set of a family; td_metric_series finds or creates it. Families and
 * series live until the process exits (Prometheus counters must never go
 * backwards, so a series is never dropped): pointers to them may be kept
 * and used from any thread.
 *
 * Cost. Updates are relaxed atomic adds on the series (no lock), so the
 * request path pays a few tens of nanoseconds. Series lookup hashes the
 * label values and probes an open-addressing table without a lock; only
 * creating a series takes the family's mutex. A family holds at most
 * TD_METRIC_MAX_SERIES series; past that td_metric_series returns NULL and
 * the update is dropped (every update function accepts NULL). Label values
 * longer than TD_METRIC_MAX_VALUE bytes are cut there.
 *
 * td_metrics_set_enabled(false) (the default until a monitoring config
 * turns it on) makes td_metrics_enabled() false; callers test it to skip
 * their updates entirely, which is the "metrics off" of the benchmarks.
 *
 * Collectors (td_metrics_add_collector) run at the start of each render to
 * refresh gauges whose value is read, not counted (RSS, model states).
 * td_metrics_render writes every family with at least one series, in
 * registration order: `# HELP`, `# TYPE`, then one line per series;
 * histograms as cumulative `_bucket{...,le="..."}` lines ending with
 * le="+Inf", then `_sum` and `_count`. Label values are escaped (\\, \",
 * \n). Thread-safe: render may run while updates go on (a scrape sees each
 * value as of some moment; a histogram's count may lead its buckets by the
 * updates in flight). */
#ifndef TD_METRICS_H
#define TD_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "td_buf.h"

#define TD_METRIC_MAX_LABELS 4
#define TD_METRIC_MAX_SERIES 1024
#define TD_METRIC_MAX_VALUE 128
#define TD_METRIC_MAX_BUCKETS 64

typedef enum { TD_METRIC_COUNTER, TD_METRIC_GAUGE, TD_METRIC_HISTOGRAM } td_metric_kind;

typedef struct td_metric td_metric;
typedef struct td_series td_series;

/* NULL only when out of memory or the arguments are invalid (too many
 * labels or buckets, bounds not increasing). Strings are copied. */
td_metric *td_metric_counter(const char *name, const char *help, int n_labels,
                             const char *const *labels);
td_metric *td_metric_gauge(const char *name, const char *help, int n_labels,
                           const char *const *labels);
td_metric *td_metric_histogram(const char *name, const char *help, int n_labels,
                               const char *const *labels, const double *bounds, int n_bounds);
/* n bounds start, start*factor, ... (TF's Buckets::Exponential). */
void td_metric_exponential_bounds(double start, double factor, int n, double *out);

/* values: one per label of the family (NULL counts as ""). */
td_series *td_metric_series(td_metric *m, const char *const *values);
/* Convenience for families of one and two labels. */
td_series *td_metric_series1(td_metric *m, const char *v0);
td_series *td_metric_series2(td_metric *m, const char *v0, const char *v1);

void td_series_add(td_series *s, int64_t delta);    /* counters and gauges */
void td_series_set(td_series *s, int64_t value);    /* gauges */
void td_series_observe(td_series *s, double value); /* histograms */
/* For tests and collectors: a counter's or gauge's value, a histogram's
 * count (0 for NULL). */
int64_t td_series_value(const td_series *s);
/* Sets every series of a gauge family to 0 (a collector that rewrites the
 * family's current series first zeroes those that no longer exist). */
void td_metric_zero(td_metric *m);
double td_series_sum(const td_series *s);

void td_metrics_set_enabled(bool on);
bool td_metrics_enabled(void);

typedef void (*td_metrics_collect_fn)(void *ctx);
/* At most 16 collectors; ctx must outlive the process's renders. */
void td_metrics_add_collector(td_metrics_collect_fn fn, void *ctx);
void td_metrics_render(td_buf *out);

#endif
