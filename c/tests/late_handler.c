/* late_handler.c: no GC handler runs after its runtime's close has returned (docs/C.md), so the
 * `user` pointer may be freed then — even on a client, whose reclaims arrive on a thread of its
 * own while another session keeps reclaiming.
 *
 *   late_handler <endpoint>      (make -C c test-handlers starts a node for it)
 *
 * Session A creates a channel and registers a slow handler (20 ms) on it; session B, on a thread,
 * puts and reclaims items there without pause, so reclaims queue up. After 2 s A frees its runtime;
 * then for 2 s the handler must not run again. Exit 0, or 1 saying how many calls came late.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "stampede.h"

enum { CONNECT_TIMEOUT_MS = 10000, HANDLER_US = 20000 };

struct counts {
    atomic_int freed; /* set once stp_runtime_free returned */
    atomic_int calls;
    atomic_int late;
};

static const char *endpoint;
static atomic_int stopping;

static void handler(void *user, int64_t ts) {
    struct counts *counts = user;
    (void)ts;
    atomic_fetch_add(&counts->calls, 1);
    if (atomic_load(&counts->freed)) atomic_fetch_add(&counts->late, 1);
    usleep(HANDLER_US);
}

/* Session B: puts into the channel and lets each item go at once, until told to stop. */
static void *reclaimer(void *arg) {
    (void)arg;
    stp_runtime *rt = NULL;
    stp_channel *ch = NULL;
    stp_task *producer = NULL, *reader = NULL;
    stp_channel_output *out = NULL;
    stp_channel_input *in = NULL;
    if (stp_connect(endpoint, CONNECT_TIMEOUT_MS, &rt) != STP_OK || stp_runtime_channel(rt, "late/c", &ch) != STP_OK ||
        stp_runtime_task(rt, stp_runtime_ts_min(rt), &producer) != STP_OK ||
        stp_runtime_task(rt, STP_INFINITY, &reader) != STP_OK || stp_task_attach_output(producer, ch, &out) != STP_OK ||
        stp_task_attach_input(reader, ch, &in) != STP_OK) {
        fprintf(stderr, "late_handler: session B: %s\n", stp_last_error_message());
        exit(2);
    }
    for (int64_t ts = stp_task_virtual_time(producer); !atomic_load(&stopping); ts++) {
        if (stp_channel_output_put(out, ts, NULL, (const uint8_t *)"x", 1, -1, STP_FOREVER) != STP_OK ||
            stp_task_set_virtual_time(producer, ts + 1) != STP_OK || stp_channel_input_consume_until(in, ts) != STP_OK) {
            break;
        }
    }
    stp_channel_input_free(in);
    stp_channel_output_free(out);
    stp_task_free(reader);
    stp_task_free(producer);
    stp_channel_free(ch);
    stp_runtime_free(rt);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: late_handler <endpoint>\n");
        return 2;
    }
    endpoint = argv[1];
    struct counts *counts = calloc(1, sizeof *counts);
    stp_runtime *rt = NULL;
    stp_channel *ch = NULL;
    if (stp_connect(endpoint, CONNECT_TIMEOUT_MS, &rt) != STP_OK ||
        stp_runtime_create_channel(rt, "late/c", STP_UNBOUNDED, STP_UNBOUNDED, &ch) != STP_OK ||
        stp_channel_on_reclaim(ch, handler, counts) != STP_OK) {
        fprintf(stderr, "late_handler: session A: %s\n", stp_last_error_message());
        return 2;
    }
    pthread_t thread;
    pthread_create(&thread, NULL, reclaimer, NULL);
    sleep(2);
    stp_channel_free(ch);
    stp_runtime_free(rt);
    atomic_store(&counts->freed, 1);
    int before = atomic_load(&counts->calls);
    sleep(2);
    atomic_store(&stopping, 1);
    pthread_join(thread, NULL);
    int late = atomic_load(&counts->late);
    printf("late_handler: %d handler calls before the runtime was freed, %d after\n", before, late);
    free(counts);
    return before > 0 && late == 0 ? 0 : 1;
}
