/* access.c: a C client on a node with an access policy (docs/SECURITY.md) says who it is with
 * stp_connect_with; without a user, or with a wrong password, the node refuses it
 * (STP_PERMISSION_DENIED); a user alone, without its password, is STP_INVALID_ARGUMENT; and the
 * rights of the user it is admitted as hold.
 *
 *   access <endpoint> <user> <password>   (make -C c test-access starts a node with a policy
 *                                          where <user> may create, write and read under "camera")
 *
 * Exit 0, or 1 saying which check failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stampede.h"

enum { CONNECT_TIMEOUT_MS = 10000 };

#define CHECK_RC(call, code)                                                                         \
    do {                                                                                             \
        int rc_ = (call);                                                                            \
        if (rc_ != (code)) {                                                                         \
            fprintf(stderr, "access: FAIL (%s:%d): %s returned %s, expected %s\n  message: %s\n",    \
                    __FILE__, __LINE__, #call, stp_error_name(rc_), stp_error_name(code),            \
                    rc_ == STP_OK ? "" : stp_last_error_message());                                  \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: access <endpoint> <user> <password>\n");
        return 2;
    }
    const char *endpoint = argv[1];
    stp_runtime *rt = NULL;

    /* Nobody: the node asks who. */
    CHECK_RC(stp_connect(endpoint, CONNECT_TIMEOUT_MS, &rt), STP_PERMISSION_DENIED);
    CHECK_RC(stp_connect_with(endpoint, NULL, &rt), STP_PERMISSION_DENIED);
    struct stp_connect_options options = {.timeout_ms = CONNECT_TIMEOUT_MS, .user = argv[2]};
    CHECK_RC(stp_connect_with(endpoint, &options, &rt), STP_INVALID_ARGUMENT);
    if (strstr(stp_last_error_message(), "a user and a password go together") == NULL) {
        fprintf(stderr, "access: FAIL: the message says %s\n", stp_last_error_message());
        return 1;
    }
    options.password = "not the password";
    CHECK_RC(stp_connect_with(endpoint, &options, &rt), STP_PERMISSION_DENIED);
    if (rt != NULL) {
        fprintf(stderr, "access: FAIL: a refused connect left a runtime\n");
        return 1;
    }

    /* The user with its password: admitted, with its rights and no others. */
    options.password = argv[3];
    CHECK_RC(stp_connect_with(endpoint, &options, &rt), STP_OK);
    stp_channel *ch = NULL;
    CHECK_RC(stp_runtime_create_channel(rt, "elsewhere/frames", STP_UNBOUNDED, STP_UNBOUNDED, &ch),
             STP_PERMISSION_DENIED);
    CHECK_RC(stp_runtime_create_channel(rt, "camera/frames", STP_UNBOUNDED, STP_UNBOUNDED, &ch), STP_OK);
    stp_task *task = NULL;
    stp_channel_output *out = NULL;
    CHECK_RC(stp_runtime_task(rt, 0, &task), STP_OK);
    CHECK_RC(stp_task_attach_output(task, ch, &out), STP_OK);
    CHECK_RC(stp_channel_output_put(out, 0, "utf8", (const uint8_t *)"frame", 5, -1, STP_FOREVER), STP_OK);
    stp_channel_output_free(out);
    stp_task_free(task);
    stp_channel_free(ch);
    stp_runtime_free(rt);
    printf("access: refused without a user, with a wrong password; admitted with its rights\n");
    return 0;
}
