/* hello.c: the README's example in C (docs/C.md shows it) — a camera task puts ten frames, a
 * tracker at INFINITY gets the freshest one, skipping the rest, and consumes everything up to
 * it; ts_min passes the frames and they are reclaimed at once. Error handling is one macro.
 *
 *   make -C c && c/build/release/hello        # prints: 9 frame 9 / ts_min 10, live 0
 */
#include <stdio.h>
#include <stdlib.h>

#include "stampede.h"

#define TRY(call)                                                                                  \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != STP_OK) {                                                                       \
            fprintf(stderr, "%s: %s\n", stp_error_name(rc_), stp_last_error_message());            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

int main(void) {
    stp_runtime *rt;
    stp_channel *frames;
    stp_task *camera, *tracker;
    stp_channel_output *out;
    stp_channel_input *in;
    TRY(stp_runtime_new(&rt));
    TRY(stp_runtime_create_channel(rt, "camera/frames", STP_UNBOUNDED, STP_UNBOUNDED, &frames));
    TRY(stp_runtime_task(rt, 0, &camera));              /* virtual time = frame number */
    TRY(stp_runtime_task(rt, STP_INFINITY, &tracker));  /* inherits timestamps from what it gets */
    TRY(stp_task_attach_output(camera, frames, &out));
    TRY(stp_task_attach_input(tracker, frames, &in));
    for (int64_t ts = 0; ts < 10; ts++) {
        char text[16];
        int len = snprintf(text, sizeof text, "frame %d", (int)ts);
        TRY(stp_channel_output_put(out, ts, "utf8", (const uint8_t *)text, (size_t)len, -1, STP_FOREVER));
        TRY(stp_task_set_virtual_time(camera, ts + 1));
    }
    stp_item *item;
    TRY(stp_channel_input_get(in, STP_NEWEST_UNSEEN, 0, STP_FOREVER, &item)); /* the freshest frame */
    printf("%lld %.*s\n", (long long)stp_item_ts(item), (int)stp_item_len(item), (const char *)stp_item_data(item));
    TRY(stp_channel_input_consume_until(in, stp_item_ts(item)));                /* 0..9: garbage to it */
    stp_item_release(item);
    stp_stats stats;
    TRY(stp_channel_stats(frames, &stats));
    printf("ts_min %lld, live %llu\n", (long long)stp_runtime_ts_min(rt), (unsigned long long)stats.live_items);
    stp_channel_input_free(in);
    stp_channel_output_free(out);
    stp_task_free(tracker);
    stp_task_free(camera);
    stp_channel_free(frames);
    stp_runtime_free(rt);
    return 0;
}
