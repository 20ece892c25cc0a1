/* api.c: tests of the C API for what the shared vectors do not cover — bad arguments, item
 * views outliving their runtime, error messages equal to Rust's, GC handler callbacks, blocked
 * calls woken by detach, destroy and close, queues, ranges, npy headers, names, threads.
 *
 * Each test says what it proves. A failed check prints file:line, the expression and the last
 * error, and exits 1. A watchdog (alarm) turns a hang into a failure naming the test; no test
 * asserts how fast anything is. Run under valgrind by `make -C c valgrind`.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stampede.h"

/* Longest any one test may run before the watchdog declares it hung (valgrind is ~30x slower). */
enum { WATCHDOG_S = 120 };

static const char *current_test = "?";

#define CHECK(cond)                                                                                  \
    do {                                                                                             \
        if (!(cond)) {                                                                               \
            fprintf(stderr, "api: FAIL %s (%s:%d): %s\n  last error: %s %s\n", current_test,         \
                    __FILE__, __LINE__, #cond, stp_error_name(stp_last_error_code()),                \
                    stp_last_error_message());                                                       \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

/* `call` returns `code`. */
#define CHECK_RC(call, code)                                                                         \
    do {                                                                                             \
        int rc_ = (call);                                                                            \
        if (rc_ != (code)) {                                                                         \
            fprintf(stderr, "api: FAIL %s (%s:%d): %s returned %s, expected %s\n  message: %s\n",   \
                    current_test, __FILE__, __LINE__, #call, stp_error_name(rc_),                   \
                    stp_error_name(code), rc_ == STP_OK ? "" : stp_last_error_message());           \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

#define OK(call) CHECK_RC(call, STP_OK)

/* The last error's message is exactly `text`. */
#define CHECK_MESSAGE(text)                                                                          \
    do {                                                                                             \
        if (strcmp(stp_last_error_message(), (text)) != 0) {                                         \
            fprintf(stderr, "api: FAIL %s (%s:%d): message\n  got:      %s\n  expected: %s\n",      \
                    current_test, __FILE__, __LINE__, stp_last_error_message(), (text));            \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

static void on_alarm(int signal) {
    (void)signal;
    static const char prefix[] = "api: watchdog: a test did not finish: ";
    (void)!write(STDERR_FILENO, prefix, sizeof prefix - 1);
    (void)!write(STDERR_FILENO, current_test, strlen(current_test));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(1);
}

static void sleep_ms(long ms) {
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* A channel with a producer (virtual time vt0) and a reader (INFINITY) attached. */
struct pipe {
    stp_runtime *rt;
    stp_channel *ch;
    stp_task *producer, *reader;
    stp_channel_output *out;
    stp_channel_input *in;
};

static struct pipe pipe_open(const char *name, int64_t capacity, int64_t vt0) {
    struct pipe p = {0};
    OK(stp_runtime_new(&p.rt));
    OK(stp_runtime_create_channel(p.rt, name, capacity, STP_UNBOUNDED, &p.ch));
    OK(stp_runtime_task(p.rt, vt0, &p.producer));
    OK(stp_runtime_task(p.rt, STP_INFINITY, &p.reader));
    OK(stp_task_attach_output(p.producer, p.ch, &p.out));
    OK(stp_task_attach_input(p.reader, p.ch, &p.in));
    return p;
}

static void pipe_close(struct pipe *p) {
    stp_channel_input_free(p->in);
    stp_channel_output_free(p->out);
    stp_task_free(p->reader);
    stp_task_free(p->producer);
    stp_channel_free(p->ch);
    stp_runtime_free(p->rt);
}

static int put_text(stp_channel_output *out, int64_t ts, const char *text) {
    return stp_channel_output_put(out, ts, "utf8", (const uint8_t *)text, strlen(text), -1, STP_FOREVER);
}

/* ---- Bad arguments -------------------------------------------------------------------------- */

/* NULL handles and out-parameters, non-UTF-8 text, unknown selectors, bad timeouts, bounds and
 * refcounts are STP_INVALID_ARGUMENT with a message naming the function and the parameter; a
 * handle out-parameter is NULL after a failure; accessors return their sentinels; freeing NULL
 * does nothing. Nothing crashes. */
static void test_bad_arguments(void) {
    stp_runtime *rt = NULL;
    CHECK_RC(stp_runtime_new(NULL), STP_INVALID_ARGUMENT);
    CHECK_MESSAGE("stp_runtime_new on \"out\": a NULL out-parameter");
    OK(stp_runtime_new(&rt));
    stp_channel *ch = NULL;
    CHECK_RC(stp_runtime_create_channel(NULL, "a", STP_UNBOUNDED, STP_UNBOUNDED, &ch), STP_INVALID_ARGUMENT);
    CHECK_MESSAGE("stp_runtime_create_channel on \"rt\": a NULL handle");
    CHECK_RC(stp_runtime_create_channel(rt, NULL, STP_UNBOUNDED, STP_UNBOUNDED, &ch), STP_INVALID_ARGUMENT);
    CHECK_MESSAGE("stp_runtime_create_channel on \"name\": a NULL string");
    CHECK_RC(stp_runtime_create_channel(rt, "caf\xe9", STP_UNBOUNDED, STP_UNBOUNDED, &ch), STP_INVALID_ARGUMENT);
    CHECK(strstr(stp_last_error_message(), "on \"name\": not UTF-8 text") != NULL);
    CHECK_RC(stp_runtime_create_channel(rt, "a", -2, STP_UNBOUNDED, &ch), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_runtime_create_channel(rt, "a", STP_UNBOUNDED, 0, &ch), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_runtime_create_channel(rt, "a", STP_UNBOUNDED, STP_UNBOUNDED, NULL), STP_INVALID_ARGUMENT);
    CHECK(ch == NULL);
    stp_runtime *remote = (stp_runtime *)&remote; /* not NULL: a failed call must set it to NULL */
    CHECK_RC(stp_connect(NULL, 0, &remote), STP_INVALID_ARGUMENT);
    CHECK(remote == NULL);
    CHECK_RC(stp_connect("not an endpoint", 0, NULL), STP_INVALID_ARGUMENT);
    /* The client's prefetch default is read from the struct's last field: a word that is no
     * policy is refused before anything is reached. */
    struct stp_connect_options sometimes = {.timeout_ms = 0, .prefetch = "sometimes"};
    CHECK_RC(stp_connect_with("tcp/127.0.0.1:1", &sometimes, &remote), STP_INVALID_ARGUMENT);
    CHECK_MESSAGE("stp_connect_with on \"prefetch\": \"sometimes\" is no prefetch policy: off, newest or auto");
    CHECK(remote == NULL);

    OK(stp_runtime_create_channel(rt, "a", STP_UNBOUNDED, STP_UNBOUNDED, &ch));
    stp_task *task = NULL;
    OK(stp_runtime_task(rt, 0, &task));
    stp_channel_input *in = NULL;
    stp_channel_output *out = NULL;
    CHECK_RC(stp_task_attach_input(task, NULL, &in), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_task_attach_input(NULL, ch, &in), STP_INVALID_ARGUMENT);
    OK(stp_task_attach_input(task, ch, &in));
    OK(stp_task_attach_output(task, ch, &out));

    stp_item *item = (stp_item *)&item; /* not NULL: a failed get must set it to NULL */
    CHECK_RC(stp_channel_input_get(in, 99, 0, 0, &item), STP_INVALID_ARGUMENT);
    CHECK(item == NULL);
    CHECK(strstr(stp_last_error_message(), "99 is no selector") != NULL);
    CHECK_RC(stp_channel_input_get(in, STP_OLDEST, 0, -5, &item), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_channel_input_get(in, STP_OLDEST, 0, 0, NULL), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_channel_input_get(NULL, STP_OLDEST, 0, 0, &item), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_channel_output_put(out, 1, NULL, NULL, 5, -1, 0), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_channel_output_put(out, 1, NULL, (const uint8_t *)"x", (size_t)-1, -1, 0), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_channel_output_put(out, 1, "\xff", NULL, 0, -1, 0), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_channel_output_put(out, 1, NULL, NULL, 0, 0, 0), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_channel_output_put(out, 1, NULL, NULL, 0, -7, 0), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_channel_output_put(out, 1, NULL, NULL, 0, -1, -9), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_channel_output_put(NULL, 1, NULL, NULL, 0, -1, 0), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_channel_output_put(out, 1, "npy", (const uint8_t *)"nope", 4, -1, 0), STP_INVALID_ARGUMENT);
    CHECK(strstr(stp_last_error_message(), "not a valid .npy payload") != NULL);
    OK(stp_channel_output_put(out, 1, NULL, NULL, 0, -1, 0)); /* NULL codec: raw; NULL data, length 0 */
    OK(stp_channel_input_get(in, STP_AT, 1, 0, &item));
    CHECK(strcmp(stp_item_codec(item), "raw") == 0 && stp_item_len(item) == 0 && stp_item_data(item) != NULL);
    stp_item_release(item);

    CHECK_RC(stp_channel_input_consume(NULL, 1), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_channel_input_get_range(in, 0, 1, NULL), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_task_set_virtual_time(NULL, 1), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_task_set_name(task, "bad\nname"), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_channel_on_reclaim(ch, NULL, NULL), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_runtime_lookup(rt, "bad//name", NULL), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_queue_input_consume(NULL, NULL), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_npy_header(NULL, 3, NULL, 0, NULL, 0, NULL), STP_INVALID_ARGUMENT);

    /* Accessors: a sentinel for NULL, and the last error says which call and parameter. */
    CHECK(stp_item_ts(NULL) == -1);
    CHECK_MESSAGE("stp_item_ts on \"item\": a NULL handle");
    CHECK(stp_item_data(NULL) == NULL && stp_item_len(NULL) == 0 && stp_item_codec(NULL) == NULL);
    CHECK(stp_item_clone(NULL) == NULL);
    CHECK(stp_runtime_ts_min(NULL) == -1 && stp_task_virtual_time(NULL) == -1 && stp_task_visibility(NULL) == -1);
    CHECK(stp_channel_name(NULL) == NULL && stp_queue_name(NULL) == NULL && stp_runtime_node(NULL) == NULL);
    CHECK(stp_channel_output_demand(NULL) == -1);
    CHECK(stp_items_len(NULL) == 0 && stp_items_at(NULL, 0) == NULL);
    CHECK(stp_names_len(NULL) == 0 && stp_names_at(NULL, 0) == NULL);
    CHECK(stp_runtime_node(rt) == NULL); /* embedded: no node */
    CHECK(strcmp(stp_error_name(STP_NOT_AVAILABLE), "NotAvailable") == 0);
    CHECK(strcmp(stp_error_name(-1000), "Unknown") == 0);
    CHECK(strlen(stp_version()) > 0);

    /* Freeing NULL is a no-op, for every type. */
    stp_runtime_free(NULL);
    stp_channel_free(NULL);
    stp_queue_free(NULL);
    stp_task_free(NULL);
    stp_channel_input_free(NULL);
    stp_channel_output_free(NULL);
    stp_queue_input_free(NULL);
    stp_queue_output_free(NULL);
    stp_item_release(NULL);
    stp_items_release(NULL);
    stp_names_free(NULL);

    stp_channel_input_free(in);
    stp_channel_output_free(out);
    stp_task_free(task);
    stp_channel_free(ch);
    stp_runtime_free(rt);
}

/* ---- Item views ----------------------------------------------------------------------------- */

/* An item's zero-copy view stays valid and unchanged after the item is consumed and reclaimed,
 * its channel destroyed, and its runtime closed and freed with every other handle — until the
 * item is released (valgrind checks the reads). Every get of one item sees the same bytes at the
 * same address (no copy on the way out). */
static void test_items_outlive_their_runtime(void) {
    enum { FRAME_BYTES = 320 * 240 };
    static uint8_t frame[FRAME_BYTES];
    for (size_t i = 0; i < FRAME_BYTES; i++) frame[i] = (uint8_t)(i * 7);
    struct pipe p = pipe_open("views/frames", STP_UNBOUNDED, 0);
    OK(stp_channel_output_put(p.out, 5, "app/frame", frame, FRAME_BYTES, -1, STP_FOREVER));
    frame[0] ^= 0xff; /* copy-in: the stored item does not change with the caller's buffer */
    stp_item *a = NULL, *b = NULL;
    OK(stp_channel_input_get(p.in, STP_NEWEST_UNSEEN, 0, 0, &a));
    OK(stp_channel_input_get(p.in, STP_AT, 5, 0, &b));
    CHECK(stp_item_data(a) == stp_item_data(b));
    stp_item *c = stp_item_clone(a);
    CHECK(c != NULL && stp_item_data(c) == stp_item_data(a));
    stp_item_release(b);
    frame[0] ^= 0xff;

    OK(stp_channel_input_consume_until(p.in, 5));
    OK(stp_task_set_virtual_time(p.producer, 6));
    stp_stats stats;
    OK(stp_channel_stats(p.ch, &stats));
    CHECK(stats.live_items == 0 && stats.reclaimed == 1); /* reclaimed in the channel... */
    OK(stp_channel_destroy(p.ch));
    OK(stp_runtime_close(p.rt));
    CHECK_RC(stp_channel_input_get(p.in, STP_OLDEST, 0, 0, &b), STP_CLOSED);
    pipe_close(&p);
    /* ...and still readable here. */
    CHECK(stp_item_ts(a) == 5 && stp_item_len(a) == FRAME_BYTES);
    CHECK(strcmp(stp_item_codec(a), "app/frame") == 0);
    CHECK(memcmp(stp_item_data(a), frame, FRAME_BYTES) == 0);
    stp_item_release(a);
    CHECK(memcmp(stp_item_data(c), frame, FRAME_BYTES) == 0);
    stp_item_release(c);
}

/* get_range returns the present, unconsumed items in order; items borrowed from the list are
 * cloned to outlive it. */
static void test_ranges(void) {
    struct pipe p = pipe_open("ranges/c", STP_UNBOUNDED, 0);
    for (int64_t ts = 1; ts <= 5; ts++) OK(put_text(p.out, ts, "x"));
    OK(stp_channel_input_consume(p.in, 3));
    stp_items *items = NULL;
    OK(stp_channel_input_get_range(p.in, 2, 9, &items));
    CHECK(stp_items_len(items) == 3);
    CHECK(stp_item_ts(stp_items_at(items, 0)) == 2 && stp_item_ts(stp_items_at(items, 1)) == 4);
    CHECK(stp_items_at(items, 3) == NULL);
    CHECK_MESSAGE("stp_items_at on \"index\": 3 >= 3 items");
    stp_item *kept = stp_item_clone(stp_items_at(items, 2));
    stp_items_release(items);
    CHECK(stp_item_ts(kept) == 5 && stp_item_len(kept) == 1 && stp_item_data(kept)[0] == 'x');
    stp_item_release(kept);
    pipe_close(&p);
}

/* ---- Errors --------------------------------------------------------------------------------- */

/* Each error has its code and exactly the Rust Display text (the same as Python's message);
 * NotAvailable's neighbours are readable. */
static void test_error_messages_equal_rusts(void) {
    struct pipe p = pipe_open("errors/c", 1, 10);
    CHECK_RC(put_text(p.out, 9, "x"), STP_BELOW_VISIBILITY);
    CHECK_MESSAGE("put ts=9 on \"errors/c\" is below the task's visibility 10");
    CHECK_RC(put_text(p.out, -1, "x"), STP_INVALID_TIMESTAMP);
    CHECK_MESSAGE("put ts=-1 on \"errors/c\" is not a valid item timestamp (items live at 0 ..= i64::MAX-1; "
                  "INFINITY is only a virtual time)");
    OK(put_text(p.out, 10, "x"));
    CHECK_RC(put_text(p.out, 10, "x"), STP_DUPLICATE_TIMESTAMP);
    CHECK_MESSAGE("put ts=10 on \"errors/c\": the channel already holds or has reclaimed an item at this timestamp "
                  "(one item per timestamp)");
    CHECK_RC(stp_channel_output_put(p.out, 11, NULL, NULL, 0, -1, 0), STP_FULL);
    CHECK_MESSAGE("put ts=11 on \"errors/c\": full (holds capacity=1 items)");
    stp_item *item = NULL;
    CHECK_RC(stp_channel_input_get(p.in, STP_AT, 12, 0, &item), STP_NOT_AVAILABLE);
    CHECK_MESSAGE("get ts=12 on \"errors/c\": not available (previous=10, next=none); wait with a timeout or pick a "
                  "neighbour");
    int64_t previous = 0, next = 0;
    CHECK(stp_last_error_neighbours(&previous, &next) == 1 && previous == 10 && next == -1);
    OK(stp_channel_input_consume(p.in, 10));
    CHECK_RC(stp_channel_input_get(p.in, STP_AT, 10, 0, &item), STP_ALREADY_CONSUMED);
    CHECK(stp_last_error_neighbours(&previous, &next) == 0);
    CHECK_RC(stp_task_set_virtual_time(p.producer, 3), STP_BELOW_VISIBILITY);
    /* The task is named by its id, which the runtime chooses. */
    CHECK(strncmp(stp_last_error_message(), "set_virtual_time ts=3 on \"task ", 31) == 0);
    CHECK(strstr(stp_last_error_message(), "\" is below the task's visibility 10") != NULL);
    stp_channel *again = NULL;
    CHECK_RC(stp_runtime_create_channel(p.rt, "errors/c", STP_UNBOUNDED, STP_UNBOUNDED, &again), STP_ALREADY_EXISTS);
    CHECK_MESSAGE("a channel or queue named \"errors/c\" already exists; use rt.lookup(\"errors/c\")");
    CHECK_RC(stp_runtime_channel(p.rt, "errors/none", &again), STP_NOT_FOUND);
    CHECK_MESSAGE("no channel or queue is named \"errors/none\"; create it first or check rt.names()");
    stp_task *early = NULL;
    CHECK_RC(stp_runtime_task(p.rt, -4, &early), STP_INVALID_TIMESTAMP);
    CHECK_MESSAGE("rt.task(virtual_time=-4) is not a valid virtual time: virtual times are 0 ..= INFINITY");
    /* A successful call leaves the last error alone (as errno). */
    OK(stp_task_set_virtual_time(p.producer, 20));
    CHECK(stp_last_error_code() == STP_INVALID_TIMESTAMP);
    pipe_close(&p);
}

/* The last error is per thread: a failure on another thread does not touch this one's. */
static void *fail_elsewhere(void *arg) {
    (void)arg;
    stp_runtime_lookup(NULL, "x", NULL);
    return (void *)(intptr_t)stp_last_error_code();
}

static void test_last_error_is_per_thread(void) {
    stp_item_ts(NULL);
    pthread_t thread;
    void *code = NULL;
    CHECK(pthread_create(&thread, NULL, fail_elsewhere, NULL) == 0);
    CHECK(pthread_join(thread, &code) == 0);
    CHECK((intptr_t)code == STP_INVALID_ARGUMENT);
    CHECK_MESSAGE("stp_item_ts on \"item\": a NULL handle");
}

/* ---- GC handlers ---------------------------------------------------------------------------- */

enum { RECLAIMS_MAX = 64 };

struct reclaims {
    atomic_int count;
    int64_t ts[RECLAIMS_MAX];
    atomic_int runtime_count;
};

static void on_reclaim(void *user, int64_t ts) {
    struct reclaims *r = user;
    int k = atomic_fetch_add(&r->count, 1);
    if (k < RECLAIMS_MAX) r->ts[k] = ts;
}

static void on_runtime_reclaim(void *user, const char *name, int64_t ts) {
    struct reclaims *r = user;
    (void)ts;
    if (strcmp(name, "gc/c") == 0) atomic_fetch_add(&r->runtime_count, 1);
}

/* A channel's handler runs once per reclaimed item with its timestamp — by ts_min, by reference
 * count, and when the channel is destroyed — before the call that made the item garbage returns;
 * the runtime-wide handler sees the same items with the channel's name. */
static void test_gc_handlers(void) {
    static struct reclaims r;
    struct pipe p = pipe_open("gc/c", STP_UNBOUNDED, 0);
    OK(stp_channel_on_reclaim(p.ch, on_reclaim, &r));
    OK(stp_runtime_on_reclaim(p.rt, on_runtime_reclaim, &r));
    for (int64_t ts = 1; ts <= 3; ts++) OK(put_text(p.out, ts, "x"));
    OK(stp_task_set_virtual_time(p.producer, 4));
    OK(stp_channel_input_consume_until(p.in, 2)); /* ts_min passes 1 and 2 */
    CHECK(atomic_load(&r.count) == 2 && r.ts[0] == 1 && r.ts[1] == 2);
    OK(stp_channel_output_put(p.out, 7, NULL, (const uint8_t *)"y", 1, 1, STP_FOREVER)); /* refcount 1 */
    OK(stp_channel_input_consume(p.in, 7));
    CHECK(atomic_load(&r.count) == 3 && r.ts[2] == 7);
    OK(stp_channel_destroy(p.ch)); /* 3 is still held: destroying reclaims it */
    CHECK(atomic_load(&r.count) == 4 && r.ts[3] == 3);
    CHECK(atomic_load(&r.runtime_count) == 4);
    stp_stats stats;
    OK(stp_channel_stats(p.ch, &stats));
    CHECK(stats.reclaimed == 4 && stats.live_items == 0);
    pipe_close(&p);
    CHECK(atomic_load(&r.count) == 4);
}

/* ---- Blocking calls woken ------------------------------------------------------------------- */

struct blocked {
    stp_channel_input *in;
    stp_channel_output *out;
    int rc;
};

static void *get_forever(void *arg) {
    struct blocked *b = arg;
    stp_item *item = NULL;
    b->rc = stp_channel_input_get(b->in, STP_NEWEST_UNSEEN, 0, STP_FOREVER, &item);
    stp_item_release(item);
    return NULL;
}

static void *put_forever(void *arg) {
    struct blocked *b = arg;
    b->rc = stp_channel_output_put(b->out, 2, NULL, NULL, 0, -1, STP_FOREVER);
    return NULL;
}

enum wake { DETACH, DESTROY, CLOSE_TASK, CLOSE_RUNTIME };

/* A get (or, on a full channel, a put) waiting forever on another thread returns STP_CLOSED
 * when its connection is detached, its channel destroyed, its task closed or its runtime closed.
 * (The 50 ms pause only makes it likely that the call is already waiting; the outcome is the
 * same either way.) */
static void test_blocked_calls_wake(enum wake how, bool put) {
    struct pipe p = pipe_open("wake/c", 1, 0);
    if (put) OK(put_text(p.out, 1, "fills the channel"));
    struct blocked b = {.in = p.in, .out = p.out, .rc = 12345};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, put ? put_forever : get_forever, &b) == 0);
    sleep_ms(50);
    switch (how) {
        case DETACH: OK(put ? stp_channel_output_detach(p.out) : stp_channel_input_detach(p.in)); break;
        case DESTROY: OK(stp_channel_destroy(p.ch)); break;
        case CLOSE_TASK: OK(stp_task_close(put ? p.producer : p.reader)); break;
        case CLOSE_RUNTIME: OK(stp_runtime_close(p.rt)); break;
    }
    CHECK(pthread_join(thread, NULL) == 0);
    CHECK_RC(b.rc, STP_CLOSED);
    pipe_close(&p);
}

static void test_blocked_calls(void) {
    for (int how = DETACH; how <= CLOSE_RUNTIME; how++) {
        test_blocked_calls_wake(how, false);
        test_blocked_calls_wake(how, true);
    }
}

/* A get waiting forever is woken by a put from another thread (handles are shared by threads). */
static void *put_later(void *arg) {
    sleep_ms(20);
    CHECK_RC(put_text(arg, 3, "late"), STP_OK);
    return NULL;
}

static void test_get_woken_by_put(void) {
    struct pipe p = pipe_open("wake/put", STP_UNBOUNDED, 0);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, put_later, p.out) == 0);
    stp_item *item = NULL;
    OK(stp_channel_input_get(p.in, STP_OLDEST_UNSEEN, 0, STP_FOREVER, &item));
    CHECK(stp_item_ts(item) == 3 && memcmp(stp_item_data(item), "late", 4) == 0);
    stp_item_release(item);
    CHECK(pthread_join(thread, NULL) == 0);
    pipe_close(&p);
}

/* ---- Queues, names, tasks ------------------------------------------------------------------- */

/* A queue hands each item to one getter; consuming by the item handle reclaims it (handler
 * called); a channel's item is refused by a queue's consume. */
static void test_queues(void) {
    static struct reclaims r;
    stp_runtime *rt = NULL;
    OK(stp_runtime_new(&rt));
    stp_queue *q = NULL;
    OK(stp_runtime_create_queue(rt, "work/q", 4, STP_UNBOUNDED, &q));
    CHECK(strcmp(stp_queue_name(q), "work/q") == 0);
    OK(stp_queue_on_reclaim(q, on_reclaim, &r));
    stp_task *producer = NULL, *worker = NULL;
    OK(stp_runtime_task(rt, 0, &producer));
    OK(stp_runtime_task(rt, STP_INFINITY, &worker));
    stp_queue_output *out = NULL;
    stp_queue_input *in = NULL;
    OK(stp_task_attach_queue_output(producer, q, &out));
    OK(stp_task_attach_queue_input(worker, q, &in));
    OK(stp_queue_output_put(out, 1, "utf8", (const uint8_t *)"a", 1, STP_FOREVER));
    OK(stp_queue_output_put(out, 1, "utf8", (const uint8_t *)"b", 1, 0)); /* same ts: allowed */
    stp_item *first = NULL, *second = NULL, *none = NULL;
    OK(stp_queue_input_get(in, 0, &first));
    OK(stp_queue_input_get(in, 0, &second));
    CHECK_RC(stp_queue_input_get(in, 0, &none), STP_NOT_AVAILABLE);
    CHECK(stp_item_data(first)[0] == 'a' && stp_item_data(second)[0] == 'b');
    CHECK(stp_task_visibility(worker) == 1); /* open queue items hold the task's visibility */
    OK(stp_queue_input_consume(in, second));
    OK(stp_queue_input_consume_ts(in, 1));
    CHECK(atomic_load(&r.count) == 2);
    stp_stats stats;
    OK(stp_queue_stats(q, &stats));
    CHECK(stats.live_items == 0 && stats.puts == 2);
    /* A channel item is not a queue item. */
    struct pipe p = pipe_open("work/c", STP_UNBOUNDED, 0);
    OK(put_text(p.out, 1, "c"));
    stp_item *channel_item = NULL;
    OK(stp_channel_input_get(p.in, STP_AT, 1, 0, &channel_item));
    CHECK_RC(stp_queue_input_consume(in, channel_item), STP_INVALID_ARGUMENT);
    stp_item_release(channel_item);
    pipe_close(&p);
    stp_item_release(first);
    stp_item_release(second);
    stp_queue_input_free(in);
    stp_queue_output_free(out);
    stp_task_free(producer);
    stp_task_free(worker);
    OK(stp_queue_destroy(q));
    stp_queue_free(q);
    stp_runtime_free(rt);
}

/* names lists what a prefix selects, sorted; lookup tells channels from queues; the typed
 * lookups refuse the other kind. */
static void test_names_and_lookup(void) {
    stp_runtime *rt = NULL;
    OK(stp_runtime_new(&rt));
    const char *made[] = {"cam/right", "cam/left", "camera", "tracker/work"};
    for (size_t i = 0; i < 4; i++) {
        if (i < 3) {
            stp_channel *ch = NULL;
            OK(stp_runtime_create_channel(rt, made[i], STP_UNBOUNDED, STP_UNBOUNDED, &ch));
            stp_channel_free(ch);
        } else {
            stp_queue *q = NULL;
            OK(stp_runtime_create_queue(rt, made[i], STP_UNBOUNDED, STP_UNBOUNDED, &q));
            stp_queue_free(q);
        }
    }
    stp_names *names = NULL;
    OK(stp_runtime_names(rt, "cam/", &names));
    CHECK(stp_names_len(names) == 2);
    CHECK(strcmp(stp_names_at(names, 0), "cam/left") == 0 && strcmp(stp_names_at(names, 1), "cam/right") == 0);
    CHECK(stp_names_at(names, 2) == NULL);
    stp_names_free(names);
    OK(stp_runtime_names(rt, "", &names));
    CHECK(stp_names_len(names) == 4);
    stp_names_free(names);
    int kind = 0;
    OK(stp_runtime_lookup(rt, "tracker/work", &kind));
    CHECK(kind == STP_KIND_QUEUE);
    OK(stp_runtime_lookup(rt, "camera", &kind));
    CHECK(kind == STP_KIND_CHANNEL);
    stp_queue *q = NULL;
    CHECK_RC(stp_runtime_queue(rt, "camera", &q), STP_NOT_FOUND);
    stp_channel *ch = NULL;
    OK(stp_runtime_channel(rt, "camera", &ch));
    CHECK(strcmp(stp_channel_name(ch), "camera") == 0);
    stp_channel_free(ch);
    stp_runtime_free(rt);
}

/* A watch reports the names under its prefix that exist, then each creation and destruction
 * (kind, name, container kind, node), says STP_NOT_AVAILABLE when nothing came in time, and a
 * watch waiting forever on another thread returns STP_CLOSED when its runtime closes (after the
 * destruction of cam/left, which closing the runtime destroys). */
struct watching {
    stp_watch *watch;
    int rc;
};

/* Reads events, each waiting forever, until a call fails. */
static void *watch_forever(void *arg) {
    struct watching *w = arg;
    stp_watch_event ev;
    do {
        w->rc = stp_watch_next(w->watch, STP_FOREVER, &ev);
    } while (w->rc == STP_OK);
    return NULL;
}

static void test_watch(void) {
    stp_runtime *rt = NULL;
    OK(stp_runtime_new(&rt));
    stp_channel *left = NULL, *other = NULL;
    OK(stp_runtime_create_channel(rt, "cam/left", STP_UNBOUNDED, STP_UNBOUNDED, &left));
    OK(stp_runtime_create_channel(rt, "audio", STP_UNBOUNDED, STP_UNBOUNDED, &other));
    stp_watch *watch = NULL;
    OK(stp_runtime_watch(rt, "cam/", &watch));
    stp_watch_event ev;
    OK(stp_watch_next(watch, 1000, &ev));
    CHECK(strcmp(ev.kind, "created") == 0 && strcmp(ev.name, "cam/left") == 0);
    CHECK(ev.container_kind == STP_KIND_CHANNEL && ev.node == NULL && ev.missed == 0);
    stp_queue *right = NULL;
    OK(stp_runtime_create_queue(rt, "cam/right", STP_UNBOUNDED, STP_UNBOUNDED, &right));
    OK(stp_watch_next(watch, 1000, &ev));
    CHECK(strcmp(ev.kind, "created") == 0 && strcmp(ev.name, "cam/right") == 0);
    CHECK(ev.container_kind == STP_KIND_QUEUE);
    OK(stp_queue_destroy(right));
    OK(stp_watch_next(watch, 1000, &ev));
    CHECK(strcmp(ev.kind, "destroyed") == 0 && strcmp(ev.name, "cam/right") == 0);
    CHECK_RC(stp_watch_next(watch, 0, &ev), STP_NOT_AVAILABLE);
    CHECK_RC(stp_watch_next(watch, 0, NULL), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_watch_next(NULL, 0, &ev), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_watch_next(watch, -7, &ev), STP_INVALID_ARGUMENT);
    struct watching blocked = {.watch = watch, .rc = 12345};
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, watch_forever, &blocked) == 0);
    sleep_ms(50);
    OK(stp_runtime_close(rt));
    CHECK(pthread_join(thread, NULL) == 0);
    CHECK_RC(blocked.rc, STP_CLOSED);
    stp_watch_free(watch);
    stp_watch_free(NULL);
    stp_queue_free(right);
    stp_channel_free(left);
    stp_channel_free(other);
    stp_runtime_free(rt);
}

/* Spawned tasks start at or above their parent's visibility; closing a task releases its claim
 * on ts_min, which never runs ahead of 1 + the highest timestamp put. */
static void test_tasks_and_ts_min(void) {
    struct pipe p = pipe_open("tasks/c", STP_UNBOUNDED, 5);
    stp_task *child = NULL;
    CHECK_RC(stp_task_spawn(p.producer, 4, &child), STP_BELOW_VISIBILITY);
    OK(stp_task_spawn(p.producer, 6, &child));
    OK(stp_task_set_name(child, "child"));
    CHECK(stp_task_virtual_time(child) == 6);
    OK(put_text(p.out, 5, "x"));
    CHECK(stp_runtime_ts_min(p.rt) == 5);
    CHECK(stp_channel_output_demand(p.out) <= 5);
    OK(stp_task_close(p.producer));
    CHECK_RC(put_text(p.out, 6, "x"), STP_CLOSED);
    CHECK(stp_runtime_ts_min(p.rt) == 5); /* the reader has not consumed 5 */
    OK(stp_channel_input_consume(p.in, 5));
    CHECK(stp_runtime_ts_min(p.rt) == 6); /* the child at 6 */
    OK(stp_task_close(child));
    stp_task_free(child);
    CHECK(stp_runtime_ts_min(p.rt) == 6); /* only the reader at INFINITY: 1 + the highest put */
    size_t reclaimed = 99;
    OK(stp_runtime_collect(p.rt, &reclaimed));
    CHECK(reclaimed == 0);
    pipe_close(&p);
}

/* A reader with a bound on lag keeps only the newest unseen items: it cannot hold ts_min back
 * (docs/SEMANTICS.md, "Slow readers: max_lag"); STP_UNBOUNDED is no bound, 0 items is refused. */
static void test_a_bound_on_lag(void) {
    struct pipe p = pipe_open("lag/c", STP_UNBOUNDED, 0);
    stp_channel_input *bounded = NULL, *unbounded = NULL;
    CHECK_RC(stp_task_attach_input_bounded(p.reader, NULL, 2, STP_UNBOUNDED, &bounded), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_task_attach_input_bounded(p.reader, p.ch, 0, STP_UNBOUNDED, &bounded), STP_INVALID_ARGUMENT);
    CHECK_RC(stp_task_attach_input_bounded(p.reader, p.ch, 2, -7, &bounded), STP_INVALID_ARGUMENT);
    CHECK(bounded == NULL);
    OK(stp_task_attach_input_bounded(p.reader, p.ch, 2, STP_UNBOUNDED, &bounded));
    OK(stp_task_attach_input_bounded(p.reader, p.ch, STP_UNBOUNDED, STP_UNBOUNDED, &unbounded));
    for (int64_t ts = 0; ts < 10; ts++) {
        OK(put_text(p.out, ts, "f"));
    }
    stp_item *item = NULL;
    OK(stp_channel_input_get(bounded, STP_OLDEST_UNSEEN, 0, 0, &item));
    CHECK(stp_item_ts(item) == 8);
    stp_item_release(item);
    OK(stp_channel_input_get(unbounded, STP_OLDEST_UNSEEN, 0, 0, &item));
    CHECK(stp_item_ts(item) == 0);
    stp_item_release(item);
    stp_channel_input_free(unbounded);
    stp_channel_input_free(bounded);
    pipe_close(&p);
}

/* A channel input attached with a prefetch policy reads what any input reads (embedded there is
 * nothing to push: docs/PREFETCH.md); NULL is the runtime's default, a word that is no policy is
 * refused. */
static void test_a_prefetch_policy(void) {
    struct pipe p = pipe_open("prefetch/c", STP_UNBOUNDED, 0);
    stp_channel_input *newest = NULL, *fallback = NULL;
    CHECK_RC(stp_task_attach_input_prefetch(p.reader, p.ch, "sometimes", &newest), STP_INVALID_ARGUMENT);
    CHECK(newest == NULL);
    OK(stp_task_attach_input_prefetch(p.reader, p.ch, "newest", &newest));
    OK(stp_task_attach_input_prefetch(p.reader, p.ch, NULL, &fallback));
    for (int64_t ts = 0; ts < 3; ts++) {
        OK(put_text(p.out, ts, "f"));
    }
    stp_item *item = NULL;
    OK(stp_channel_input_get(newest, STP_NEWEST_UNSEEN, 0, 0, &item));
    CHECK(stp_item_ts(item) == 2);
    stp_item_release(item);
    OK(stp_channel_input_get(fallback, STP_OLDEST_UNSEEN, 0, 0, &item));
    CHECK(stp_item_ts(item) == 0);
    stp_item_release(item);
    stp_channel_input_free(fallback);
    stp_channel_input_free(newest);
    pipe_close(&p);
}

/* An output attached with a put window puts as any output (embedded a put lands before it returns,
 * so its error is its own, and flush returns at once: docs/NODES.md, "Pipelined puts"); a window
 * above STP_PUT_WINDOW_MAX is refused. */
static void test_a_put_window(void) {
    struct pipe p = pipe_open("window/c", 1, 0);
    stp_channel_output *windowed = NULL;
    CHECK_RC(stp_task_attach_output_window(p.producer, p.ch, STP_PUT_WINDOW_MAX + 1, &windowed), STP_INVALID_ARGUMENT);
    CHECK(windowed == NULL);
    OK(stp_task_attach_output_window(p.producer, p.ch, 4, &windowed));
    OK(stp_channel_output_put(windowed, 1, NULL, (const uint8_t *)"a", 1, -1, 0));
    CHECK_RC(stp_channel_output_put(windowed, 2, NULL, (const uint8_t *)"b", 1, -1, 0), STP_FULL);
    OK(stp_channel_output_flush(windowed));
    CHECK_RC(stp_channel_output_flush(NULL), STP_INVALID_ARGUMENT);
    stp_channel_output_free(windowed);
    pipe_close(&p);
}

/* ---- npy ------------------------------------------------------------------------------------ */

/* stp_npy_header decodes a valid header (descr without quotes, shape, offsets), reports the
 * sizes it needs when a destination is too small, and refuses a payload that is not .npy. */
static void test_npy_headers(void) {
    static const char header[] = "\x93NUMPY\x01\x00\x76\x00"
                                 "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    uint8_t payload[128 + 24] = {0};
    size_t header_len = sizeof header - 1;
    memcpy(payload, header, header_len);
    memset(payload + header_len, ' ', 128 - header_len - 1);
    payload[127] = '\n';
    char descr[16];
    size_t shape[4] = {0};
    stp_npy_layout layout;
    OK(stp_npy_header(payload, sizeof payload, descr, sizeof descr, shape, 4, &layout));
    CHECK(strcmp(descr, "<f4") == 0 && layout.ndim == 2 && shape[0] == 2 && shape[1] == 3);
    CHECK(layout.itemsize == 4 && layout.data_offset == 128 && layout.data_bytes == 24 && !layout.fortran_order);
    CHECK(layout.descr_bytes == 3);
    memset(&layout, 0, sizeof layout);
    CHECK_RC(stp_npy_header(payload, sizeof payload, descr, 3, shape, 4, &layout), STP_INVALID_ARGUMENT);
    CHECK(layout.descr_bytes == 3); /* written anyway: ask again with 4 bytes */
    CHECK_RC(stp_npy_header(payload, sizeof payload, NULL, 0, shape, 1, &layout), STP_INVALID_ARGUMENT);
    OK(stp_npy_header(payload, sizeof payload, NULL, 0, NULL, 0, &layout));
    CHECK_RC(stp_npy_header(payload, sizeof payload - 1, NULL, 0, NULL, 0, NULL), STP_INVALID_ARGUMENT);
    CHECK(strstr(stp_last_error_message(), "not a valid .npy payload") != NULL);
    CHECK_RC(stp_npy_header((const uint8_t *)"abc", 3, NULL, 0, NULL, 0, NULL), STP_INVALID_ARGUMENT);
}

int main(void) {
    signal(SIGALRM, on_alarm);
    struct {
        const char *name;
        void (*run)(void);
    } tests[] = {
        {"bad_arguments", test_bad_arguments},
        {"items_outlive_their_runtime", test_items_outlive_their_runtime},
        {"ranges", test_ranges},
        {"error_messages_equal_rusts", test_error_messages_equal_rusts},
        {"last_error_is_per_thread", test_last_error_is_per_thread},
        {"gc_handlers", test_gc_handlers},
        {"blocked_calls", test_blocked_calls},
        {"get_woken_by_put", test_get_woken_by_put},
        {"queues", test_queues},
        {"names_and_lookup", test_names_and_lookup},
        {"watch", test_watch},
        {"tasks_and_ts_min", test_tasks_and_ts_min},
        {"a_bound_on_lag", test_a_bound_on_lag},
        {"a_prefetch_policy", test_a_prefetch_policy},
        {"a_put_window", test_a_put_window},
        {"npy_headers", test_npy_headers},
    };
    size_t count = sizeof tests / sizeof tests[0];
    for (size_t i = 0; i < count; i++) {
        current_test = tests[i].name;
        alarm(WATCHDOG_S);
        tests[i].run();
        alarm(0);
        printf("api: ok %s\n", tests[i].name);
    }
    printf("api: %zu tests passed\n", count);
    return 0;
}
