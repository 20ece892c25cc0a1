/* xlang_producer.c: the C side of the cross-language test (python/tests/test_xlang.py): puts one
 * item of each standard codec into a channel on a node, for a Java and a Python consumer to read
 * and check byte for byte.
 *
 *   xlang_producer --connect <endpoint> <channel>
 *
 * The channel must exist (the test creates it and holds ts_min with its own reader). Items, at
 * ts_min + 1 .. ts_min + 4:
 *   raw   the bytes 0, 1, ..., 255
 *   utf8  "héllo from C ✓"
 *   json  {"from": "c", "values": [1, 2, 3]}
 *   npy   a 2x3 |u1 array holding 1 .. 6, as NumPy writes it (version 1.0, header of 128 bytes)
 * Prints "put 4 items from ts=<first>" and exits 0, or names the failing call and exits 1.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "stampede.h"

enum { CONNECT_TIMEOUT_MS = 10000, PUT_TIMEOUT_MS = 10000, NPY_HEADER_BYTES = 128 };

static int fail(const char *what, int rc) {
    fprintf(stderr, "xlang_producer: %s: %s: %s\n", what, stp_error_name(rc), stp_last_error_message());
    return 1;
}

/* A 2x3 |u1 array of 1 .. 6 as a .npy file; returns its length. */
static size_t npy_2x3(uint8_t *out) {
    const char *dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }";
    memset(out, ' ', NPY_HEADER_BYTES);
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (uint8_t)(NPY_HEADER_BYTES - 10);
    out[9] = 0;
    memcpy(out + 10, dict, strlen(dict));
    out[NPY_HEADER_BYTES - 1] = '\n';
    for (int i = 0; i < 6; i++) out[NPY_HEADER_BYTES + i] = (uint8_t)(i + 1);
    return NPY_HEADER_BYTES + 6;
}

int main(int argc, char **argv) {
    if (argc != 4 || strcmp(argv[1], "--connect") != 0) {
        fprintf(stderr, "usage: xlang_producer --connect <endpoint> <channel>\n");
        return 2;
    }
    uint8_t raw[256], npy[NPY_HEADER_BYTES + 6];
    for (int i = 0; i < 256; i++) raw[i] = (uint8_t)i;
    const char *text = "h\xc3\xa9llo from C \xe2\x9c\x93";
    const char *json = "{\"from\": \"c\", \"values\": [1, 2, 3]}";
    size_t npy_len = npy_2x3(npy);
    struct {
        const char *codec;
        const uint8_t *data;
        size_t len;
    } items[] = {
        {"raw", raw, sizeof raw},
        {"utf8", (const uint8_t *)text, strlen(text)},
        {"json", (const uint8_t *)json, strlen(json)},
        {"npy", npy, npy_len},
    };

    stp_runtime *rt = NULL;
    stp_channel *ch = NULL;
    stp_task *task = NULL;
    stp_channel_output *out = NULL;
    int rc = stp_connect(argv[2], CONNECT_TIMEOUT_MS, &rt);
    if (rc != STP_OK) return fail(argv[2], rc);
    int status = 1;
    int64_t first = stp_runtime_ts_min(rt) + 1;
    if ((rc = stp_runtime_channel(rt, argv[3], &ch)) != STP_OK) {
        fail(argv[3], rc);
        goto done;
    }
    if ((rc = stp_runtime_task(rt, first - 1, &task)) != STP_OK || (rc = stp_task_attach_output(task, ch, &out)) != STP_OK) {
        fail("the producer's task", rc);
        goto done;
    }
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        int64_t ts = first + (int64_t)i;
        if ((rc = stp_channel_output_put(out, ts, items[i].codec, items[i].data, items[i].len, -1, PUT_TIMEOUT_MS)) != STP_OK) {
            fail(items[i].codec, rc);
            goto done;
        }
    }
    printf("put 4 items from ts=%" PRId64 "\n", first);
    status = 0;
done:
    stp_channel_output_free(out);
    if (task) stp_task_close(task);
    stp_task_free(task);
    stp_channel_free(ch);
    stp_runtime_free(rt);
    return status;
}
