/* camera.c: a camera written in C — paced synthetic 320x240 grey frames, as NumPy `.npy` arrays
 * (codec "npy", dtype |u1), put into a channel on a Stampede node, where any client (Python,
 * Rust, Java, C, the dashboard) can read them.
 *
 * Frame `ts` is a vertical grey gradient (row y has value y) with a white bar 16 pixels wide
 * whose left edge is at x = (4 * ts) % 320, so a reader can check what it got.
 *
 * Usage (docs/C.md):
 *
 *   cargo run --release -p stampede-cli -- serve --listen tcp/127.0.0.1:7447   # a node
 *   make -C c && c/build/release/camera --connect tcp/127.0.0.1:7447 camera/c 300
 *   cargo run --release -p stampede-cli -- tail camera/c --connect tcp/127.0.0.1:7447
 *
 *   camera [--connect <endpoint>] [--fps <n>] [<channel> [<frames>]]
 *
 * Defaults: tcp/127.0.0.1:7447, 30 fps, channel camera/c, 300 frames. The channel (capacity 30)
 * is created by the camera, or looked up if it exists. The camera's timestamps start at the
 * node's ts_min, so a restarted camera carries on above everything put before. Ctrl-C stops it
 * between frames.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stampede.h"

enum {
    WIDTH = 320,
    HEIGHT = 240,
    BAR_WIDTH = 16,
    BAR_STEP = 4,                      /* pixels the bar moves per frame */
    HEADER_BYTES = 128,                /* the .npy header, padded (a multiple of 64) */
    FRAME_BYTES = HEADER_BYTES + WIDTH * HEIGHT,
    CAPACITY = 30,                     /* frames the channel holds at most */
    CONNECT_TIMEOUT_MS = 10000,
    PUT_TIMEOUT_MS = 5000,             /* a reader holding the channel full this long stops us */
    REPORT_EVERY = 30,                 /* frames between progress lines */
};

static volatile sig_atomic_t stopping = 0;

static void on_interrupt(int signal) {
    (void)signal;
    stopping = 1;
}

static int fail(const char *what, int rc) {
    fprintf(stderr, "camera: %s: %s: %s\n", what, stp_error_name(rc), stp_last_error_message());
    return 1;
}

/* The .npy header of a C-order |u1 array of HEIGHT x WIDTH, as NumPy writes it (version 1.0). */
static void npy_header(uint8_t *out) {
    char dict[HEADER_BYTES];
    int len = snprintf(dict, sizeof dict, "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d), }", HEIGHT, WIDTH);
    memset(out, ' ', HEADER_BYTES);
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (uint8_t)((HEADER_BYTES - 10) & 0xff); /* the dict's length, little-endian u16 */
    out[9] = (uint8_t)((HEADER_BYTES - 10) >> 8);
    memcpy(out + 10, dict, (size_t)len);
    out[HEADER_BYTES - 1] = '\n';
}

/* Draws frame `ts` after the header: the gradient, then the bar. */
static void draw(uint8_t *pixels, int64_t ts) {
    int bar = (int)((BAR_STEP * ts) % WIDTH);
    for (int y = 0; y < HEIGHT; y++) {
        uint8_t *row = pixels + (size_t)y * WIDTH;
        memset(row, y, WIDTH);
        for (int x = bar; x < bar + BAR_WIDTH && x < WIDTH; x++) row[x] = 255;
    }
}

static void sleep_until(const struct timespec *start, int64_t frame, double fps) {
    int64_t ns = (int64_t)((double)frame * 1e9 / fps);
    struct timespec at = {.tv_sec = start->tv_sec + ns / 1000000000, .tv_nsec = start->tv_nsec + ns % 1000000000};
    if (at.tv_nsec >= 1000000000) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR && !stopping) {
    }
}

/* The channel `name` on the node: created by the camera, or the one already there. */
static int frames_channel(stp_runtime *rt, const char *name, stp_channel **ch) {
    int rc = stp_runtime_create_channel(rt, name, CAPACITY, STP_UNBOUNDED, ch);
    return rc == STP_ALREADY_EXISTS ? stp_runtime_channel(rt, name, ch) : rc;
}

int main(int argc, char **argv) {
    const char *endpoint = "tcp/127.0.0.1:7447", *name = "camera/c";
    double fps = 30;
    long frames = 300;
    int arg = 1;
    for (; arg + 1 < argc && strncmp(argv[arg], "--", 2) == 0; arg += 2) {
        if (strcmp(argv[arg], "--connect") == 0) endpoint = argv[arg + 1];
        else if (strcmp(argv[arg], "--fps") == 0) fps = atof(argv[arg + 1]);
        else break;
    }
    if (arg < argc && strncmp(argv[arg], "--", 2) != 0) name = argv[arg++];
    if (arg < argc) frames = atol(argv[arg++]);
    if (arg != argc || fps <= 0 || frames <= 0) {
        fprintf(stderr, "usage: camera [--connect <endpoint>] [--fps <n>] [<channel> [<frames>]]\n");
        return 2;
    }
    signal(SIGINT, on_interrupt);

    static uint8_t frame[FRAME_BYTES];
    npy_header(frame);
    stp_npy_layout layout; /* the header is what every client will read: check it once */
    int rc = stp_npy_header(frame, FRAME_BYTES, NULL, 0, NULL, 0, &layout);
    if (rc != STP_OK) return fail("the frame's .npy header", rc);

    stp_runtime *rt = NULL;
    stp_channel *ch = NULL;
    stp_task *task = NULL;
    stp_channel_output *out = NULL;
    if ((rc = stp_connect(endpoint, CONNECT_TIMEOUT_MS, &rt)) != STP_OK) return fail(endpoint, rc);
    int status = 1;
    if ((rc = frames_channel(rt, name, &ch)) != STP_OK) {
        fail(name, rc);
        goto done;
    }
    /* A camera that restarts carries on above everything put so far. */
    int64_t start_ts = stp_runtime_ts_min(rt);
    if (start_ts == STP_INFINITY) start_ts = 0;
    if ((rc = stp_runtime_task(rt, start_ts, &task)) != STP_OK || (rc = stp_task_set_name(task, "c camera")) != STP_OK ||
        (rc = stp_task_attach_output(task, ch, &out)) != STP_OK) {
        fail("the camera's task", rc);
        goto done;
    }
    printf("camera: putting %ld frames of %dx%d at %.1f fps into %s on %s from ts=%" PRId64 "\n", frames, WIDTH, HEIGHT,
           fps, name, stp_runtime_node(rt) ? stp_runtime_node(rt) : endpoint, start_ts);
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long put = 0;
    for (; put < frames && !stopping; put++) {
        int64_t ts = start_ts + put;
        sleep_until(&start, put, fps);
        draw(frame + HEADER_BYTES, ts);
        if ((rc = stp_channel_output_put(out, ts, "npy", frame, FRAME_BYTES, -1, PUT_TIMEOUT_MS)) != STP_OK ||
            (rc = stp_task_set_virtual_time(task, ts + 1)) != STP_OK) {
            fail("put", rc);
            goto done;
        }
        if ((put + 1) % REPORT_EVERY == 0) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            double elapsed = (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9;
            stp_stats stats;
            stp_channel_stats(ch, &stats);
            printf("camera: frame %" PRId64 " (%.1f fps, %" PRIu64 " live in the channel, ts_min %" PRId64 ")\n", ts,
                   (double)(put + 1) / elapsed, stats.live_items, stp_runtime_ts_min(rt));
        }
    }
    printf("camera: put frames %" PRId64 "..%" PRId64 "%s\n", start_ts, start_ts + put - 1, stopping ? " (interrupted)" : "");
    status = 0;
done:
    stp_channel_output_free(out);
    stp_task_free(task);
    stp_channel_free(ch);
    stp_runtime_free(rt);
    return status;
}
