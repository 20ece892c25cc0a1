/* latency.c: one-way hand-off latency from C, to set beside the Rust client's figures
 * (`cargo run --release -p stampede-bench --bin handoff` and `--bin remote`): the same
 * ping-pong, through the C ABI.
 *
 * A (virtual time i) puts ts=i into `ping`, advances its virtual time to i+1, blocks on an exact
 * get of i from `pong`, reads it and consumes it. B (virtual time INFINITY, on another thread)
 * blocks on NEWEST_UNSEEN of `ping`, reads it, puts its own payload at the same ts into `pong`
 * and consumes i. Both items are reclaimed inside the loop. One way = round trip / 2. Each
 * receiver reads the first and last byte; puts copy the payload once (copy-in), gets are
 * zero-copy.
 *
 * - embedded: both tasks on one runtime in this process (Rust: `handoff`, impl "stampede").
 * - remote (with --connect): A and B are two client sessions of the node at <endpoint> (Rust:
 *   `remote`, impl "stampede remote (serve, tcp loopback)").
 *
 *   latency [--quick] [--connect <endpoint>]
 *
 * Prints one JSON object per line (docs/BENCHMARKS.md, "How every benchmark measures and reports";
 * fields as crates/stampede-bench/src/report.rs: bench, case, impl, p50_us, p99_us, mean_us,
 * round_trips).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stampede.h"

enum {
    SMALL_BYTES = 8,          /* one 64-bit word */
    IMAGE_BYTES = 230400,     /* one 320x240 RGB frame: the seeds' image size */
    CONNECT_TIMEOUT_MS = 20000,
};

static void die(const char *what, int rc) {
    fprintf(stderr, "latency: %s: %s: %s\n", what, stp_error_name(rc), stp_last_error_message());
    exit(1);
}

#define OK(call)                                  \
    do {                                          \
        int rc_ = (call);                         \
        if (rc_ != STP_OK) die(#call, rc_);       \
    } while (0)

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Reads the first and last byte, so that no receive can be optimised away. */
static uint8_t touch(const stp_item *item) {
    const volatile uint8_t *data = stp_item_data(item);
    size_t len = stp_item_len(item);
    return len ? (uint8_t)(data[0] ^ data[len - 1]) : 0;
}

static uint8_t *source(size_t bytes, uint8_t seed) {
    uint8_t *buf = malloc(bytes);
    if (!buf) exit(1);
    for (size_t i = 0; i < bytes; i++) buf[i] = (uint8_t)((uint8_t)i + seed);
    return buf;
}

/* B's side: its own runtime (remote) or A's (embedded). */
struct echo {
    const char *endpoint; /* NULL: embedded, use `rt` */
    stp_runtime *rt;
    const char *ping, *pong;
    size_t payload_bytes;
    long total;
    pthread_mutex_t lock;
    pthread_cond_t attached_cond;
    int attached;
};

static void *echo_main(void *arg) {
    struct echo *e = arg;
    stp_runtime *rt = e->rt;
    if (e->endpoint) OK(stp_connect(e->endpoint, CONNECT_TIMEOUT_MS, &rt));
    stp_channel *ping = NULL, *pong = NULL;
    stp_task *b = NULL;
    stp_channel_input *in = NULL;
    stp_channel_output *out = NULL;
    OK(stp_runtime_channel(rt, e->ping, &ping));
    OK(stp_runtime_channel(rt, e->pong, &pong));
    OK(stp_runtime_task(rt, STP_INFINITY, &b));
    OK(stp_task_attach_input(b, ping, &in));
    OK(stp_task_attach_output(b, pong, &out));
    /* B reads ping before A puts into it (else A's first items go unread and are reclaimed). */
    pthread_mutex_lock(&e->lock);
    e->attached = 1;
    pthread_cond_signal(&e->attached_cond);
    pthread_mutex_unlock(&e->lock);
    uint8_t *buf = source(e->payload_bytes, 0xb0);
    for (long i = 0; i < e->total; i++) {
        stp_item *item = NULL;
        OK(stp_channel_input_get(in, STP_NEWEST_UNSEEN, 0, STP_FOREVER, &item));
        touch(item);
        int64_t ts = stp_item_ts(item);
        stp_item_release(item);
        OK(stp_channel_output_put(out, ts, NULL, buf, e->payload_bytes, -1, STP_FOREVER));
        OK(stp_channel_input_consume(in, ts));
    }
    free(buf);
    stp_channel_input_free(in);
    stp_channel_output_free(out);
    stp_task_free(b);
    stp_channel_free(ping);
    stp_channel_free(pong);
    if (e->endpoint) stp_runtime_free(rt);
    return NULL;
}

/* Round-trip times in ns of `round_trips` ping-pongs after `warmup` untimed ones, appended to
 * `rtt_ns` (from index *n). `endpoint` NULL: embedded. */
static void ping_pong(const char *endpoint, const char *names_suffix, size_t payload_bytes, long warmup, long round_trips,
                      uint64_t *rtt_ns, size_t *n) {
    char ping_name[128], pong_name[128];
    snprintf(ping_name, sizeof ping_name, "bench/c-ping-%s", names_suffix);
    snprintf(pong_name, sizeof pong_name, "bench/c-pong-%s", names_suffix);
    stp_runtime *rt = NULL;
    if (endpoint)
        OK(stp_connect(endpoint, CONNECT_TIMEOUT_MS, &rt));
    else
        OK(stp_runtime_new(&rt));
    stp_channel *ping = NULL, *pong = NULL;
    OK(stp_runtime_create_channel(rt, ping_name, STP_UNBOUNDED, STP_UNBOUNDED, &ping));
    OK(stp_runtime_create_channel(rt, pong_name, STP_UNBOUNDED, STP_UNBOUNDED, &pong));
    /* Earlier rounds on a node moved ts_min: a new root task starts at or above it. */
    int64_t base = stp_runtime_ts_min(rt);
    if (base == STP_INFINITY) base = 0;
    stp_task *a = NULL;
    stp_channel_output *out = NULL;
    stp_channel_input *in = NULL;
    OK(stp_runtime_task(rt, base, &a));
    OK(stp_task_attach_output(a, ping, &out));
    OK(stp_task_attach_input(a, pong, &in));
    long total = warmup + round_trips;
    struct echo e = {.endpoint = endpoint, .rt = rt, .ping = ping_name, .pong = pong_name,
                     .payload_bytes = payload_bytes, .total = total};
    pthread_mutex_init(&e.lock, NULL);
    pthread_cond_init(&e.attached_cond, NULL);
    pthread_t echo;
    if (pthread_create(&echo, NULL, echo_main, &e) != 0) exit(1);
    pthread_mutex_lock(&e.lock);
    while (!e.attached) pthread_cond_wait(&e.attached_cond, &e.lock);
    pthread_mutex_unlock(&e.lock);

    uint8_t *buf = source(payload_bytes, 0xa0);
    for (long i = 0; i < total; i++) {
        int64_t ts = base + i;
        uint64_t start = now_ns();
        OK(stp_channel_output_put(out, ts, NULL, buf, payload_bytes, -1, STP_FOREVER));
        OK(stp_task_set_virtual_time(a, ts + 1));
        stp_item *item = NULL;
        OK(stp_channel_input_get(in, STP_AT, ts, STP_FOREVER, &item));
        touch(item);
        stp_item_release(item);
        OK(stp_channel_input_consume(in, ts));
        uint64_t ns = now_ns() - start;
        if (i >= warmup) rtt_ns[(*n)++] = ns;
    }
    pthread_join(echo, NULL);
    /* A's virtual time is past every ts and nothing is open: everything must be reclaimed. */
    stp_stats stats;
    OK(stp_channel_stats(ping, &stats));
    if (stats.live_items != 0) {
        fprintf(stderr, "latency: %" PRIu64 " items left in %s\n", stats.live_items, ping_name);
        exit(1);
    }
    free(buf);
    stp_channel_input_free(in);
    stp_channel_output_free(out);
    stp_task_free(a);
    if (endpoint) {
        stp_channel_destroy(ping);
        stp_channel_destroy(pong);
    }
    stp_channel_free(ping);
    stp_channel_free(pong);
    stp_runtime_free(rt);
    pthread_mutex_destroy(&e.lock);
    pthread_cond_destroy(&e.attached_cond);
}

static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The nearest-rank percentile of sorted samples (as stampede-bench's stats.rs). */
static double percentile(const uint64_t *sorted, size_t n, double p) {
    size_t rank = (size_t)((p / 100.0) * (double)n + 0.999999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return (double)sorted[rank - 1];
}

/* Prints one JSON line: one-way figures (round trips halved) in µs. */
static void report(const char *bench, size_t payload_bytes, const char *impl, const char *rust, uint64_t *rtt_ns, size_t n) {
    qsort(rtt_ns, n, sizeof *rtt_ns, by_value);
    double total = 0;
    for (size_t i = 0; i < n; i++) total += (double)rtt_ns[i];
    printf("{\"bench\":\"%s\",\"case\":\"%zuB\",\"impl\":\"%s\",\"p50_us\":%.3f,\"p99_us\":%.3f,\"mean_us\":%.3f,"
           "\"round_trips\":%zu,\"rust_figure\":\"%s\"}\n",
           bench, payload_bytes, impl, percentile(rtt_ns, n, 50) / 2e3, percentile(rtt_ns, n, 99) / 2e3,
           total / (double)n / 2e3, n, rust);
    fflush(stdout);
}

int main(int argc, char **argv) {
    const char *endpoint = NULL;
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--connect") == 0 && i + 1 < argc) endpoint = argv[++i];
        else {
            fprintf(stderr, "usage: latency [--quick] [--connect <endpoint>]\n");
            return 2;
        }
    }
    const size_t sizes[] = {SMALL_BYTES, IMAGE_BYTES};
    /* The Rust benchmarks' iteration counts: handoff 4 x 5000 (+500), remote 3 x 2000 (+200). */
    long rounds = quick ? 1 : 4, round_trips = quick ? 200 : 5000, warmup = quick ? 20 : 500;
    long remote_rounds = quick ? 1 : 3, remote_trips = quick ? 50 : 2000, remote_warmup = quick ? 10 : 200;
    uint64_t *rtt_ns = malloc(sizeof *rtt_ns * (size_t)(rounds * round_trips + remote_rounds * remote_trips));
    if (!rtt_ns) return 1;
    for (size_t s = 0; s < 2; s++) {
        char suffix[64];
        size_t n = 0;
        for (long r = 0; r < rounds; r++) {
            snprintf(suffix, sizeof suffix, "%zu-%ld", sizes[s], r);
            ping_pong(NULL, suffix, sizes[s], warmup, round_trips, rtt_ns, &n);
        }
        report("c_latency", sizes[s], "stampede C embedded", "handoff / stampede", rtt_ns, n);
        if (!endpoint) continue;
        n = 0;
        for (long r = 0; r < remote_rounds; r++) {
            snprintf(suffix, sizeof suffix, "%zu-%ld-%ld", sizes[s], r, (long)getpid());
            ping_pong(endpoint, suffix, sizes[s], remote_warmup, remote_trips, rtt_ns, &n);
        }
        report("c_latency", sizes[s], "stampede C remote (two sessions of one node)",
               "remote / stampede remote (serve, tcp loopback)", rtt_ns, n);
    }
    free(rtt_ns);
    return 0;
}
