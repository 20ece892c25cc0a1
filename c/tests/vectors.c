/* vectors.c: the C runner of the shared test vectors (tests/vectors/README.md has the format).
 *
 * Each `case` runs on a fresh runtime through the public C API only (stampede.h); an operation
 * whose outcome differs from its `-> expected` fails the run, naming the file, line, case and
 * both outcomes (and the error's message). Exit status 0 when every case passes, 1 on the first
 * mismatch, 2 on a usage or I/O problem.
 *
 *   vectors <file.vectors>...                          embedded runtime per case
 *   vectors --serve <stampede binary> <file>...        a fresh `stampede serve` node per case
 *                                                      (on a Unix socket), a client session on it
 *   vectors --connect <endpoint> <file>...             a session on a running node per case,
 *                                                      container names under vectors/<run>/
 *
 * --connect shares one node between cases; ts_min is global and monotone on a node, so once a
 * case has advanced it, later cases that start root tasks at low virtual times fail
 * BelowVisibility there. --serve (what `make -C c test-serve` runs) is the conformance
 * configuration: one node per case, as the Rust and Python runners do.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stampede.h"

/* Named bounds (a vectors file beyond them is refused, never overflowed). */
enum {
    LINE_BYTES_MAX = 4096,     /* one line of a vectors file */
    TOKENS_MAX = 16,           /* tokens on one line */
    VARS_MAX = 64,             /* tasks and connections in one case */
    VAR_NAME_BYTES_MAX = 64,   /* a variable's name */
    PAYLOAD_BYTES_MAX = 2048,  /* a decoded payload */
    RENDERED_BYTES_MAX = 3 * PAYLOAD_BYTES_MAX + 8,            /* a payload rendered as text */
    OUTCOME_BYTES_MAX = 2 * RENDERED_BYTES_MAX + LINE_BYTES_MAX, /* an outcome rendered as text */
    NAME_BYTES_MAX = 512,      /* a container name with its prefix */
    NPY_NDIM_MAX = 32,         /* dimensions of an npy shape */
    NODE_START_MS = 30000,     /* wait for a `stampede serve` to listen, and to connect */
};

enum var_kind { TASK, CHANNEL_IN, CHANNEL_OUT, QUEUE_IN, QUEUE_OUT };

struct var {
    char name[VAR_NAME_BYTES_MAX];
    enum var_kind kind;
    void *handle;
};

/* How each case gets its runtime. */
struct mode {
    const char *connect;  /* endpoint of a running node, or NULL */
    const char *serve;    /* stampede binary to start a node per case, or NULL */
    char prefix[128];     /* container-name prefix ("" when embedded or on a fresh node) */
};

/* A node started for one case. */
struct node {
    pid_t pid;
    int stdout_fd;
    char dir[64];
    char endpoint[160];
};

/* The state of the case being run. */
struct case_state {
    const char *file;
    char name[LINE_BYTES_MAX];
    stp_runtime *rt;
    struct node node;
    struct var vars[VARS_MAX];
    size_t nvars;
};

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("vectors: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

/* ---- Nodes (--serve) ------------------------------------------------------------------------ */

static void node_start(struct node *node, const char *binary) {
    snprintf(node->dir, sizeof node->dir, "/tmp/stp-vectors-XXXXXX");
    if (!mkdtemp(node->dir)) die("mkdtemp: %s", strerror(errno));
    snprintf(node->endpoint, sizeof node->endpoint, "unixsock-stream/%s/node.sock", node->dir);
    int fds[2];
    if (pipe(fds) != 0) die("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execl(binary, binary, "serve", "--listen", node->endpoint, (char *)NULL);
        fprintf(stderr, "vectors: cannot run %s: %s\n", binary, strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    node->pid = pid;
    node->stdout_fd = fds[0];
    /* Wait for "listening on ..." (kept open afterwards: the node may still print). */
    char seen[1024] = {0};
    size_t used = 0;
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    while (!strstr(seen, "listening on")) {
        int ready = poll(&pfd, 1, NODE_START_MS);
        if (ready <= 0) die("%s serve did not print \"listening on\" within %d ms", binary, NODE_START_MS);
        ssize_t n = read(fds[0], seen + used, sizeof seen - 1 - used);
        if (n <= 0) die("%s serve exited before listening (output: %s)", binary, seen);
        used += (size_t)n;
        if (used == sizeof seen - 1) used = 0; /* keep looking in a fresh window */
        seen[used] = '\0';
    }
}

static void node_stop(struct node *node) {
    if (node->pid <= 0) return;
    kill(node->pid, SIGTERM);
    waitpid(node->pid, NULL, 0);
    close(node->stdout_fd);
    char path[128];
    snprintf(path, sizeof path, "%s/node.sock", node->dir);
    unlink(path);
    rmdir(node->dir);
    node->pid = 0;
}

/* ---- Tokens and values ---------------------------------------------------------------------- */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes a payload token (`-`, `text:...` with %XX escapes, `hex:...`) into buf; returns its
 * length, or -1 when malformed. */
static long payload(const char *token, uint8_t *buf, size_t cap) {
    size_t len = 0;
    if (strcmp(token, "-") == 0) return 0;
    if (strncmp(token, "hex:", 4) == 0) {
        const char *p = token + 4;
        if (strlen(p) % 2 != 0) return -1;
        for (; *p; p += 2) {
            int hi = hex_digit(p[0]), lo = hex_digit(p[1]);
            if (hi < 0 || lo < 0 || len == cap) return -1;
            buf[len++] = (uint8_t)(hi * 16 + lo);
        }
        return (long)len;
    }
    if (strncmp(token, "text:", 5) == 0) {
        for (const char *p = token + 5; *p; p++) {
            if (len == cap) return -1;
            if (*p == '%') {
                int hi = hex_digit(p[1]), lo = hi < 0 ? -1 : hex_digit(p[2]);
                if (hi < 0 || lo < 0) return -1;
                buf[len++] = (uint8_t)(hi * 16 + lo);
                p += 2;
            } else {
                buf[len++] = (uint8_t)*p;
            }
        }
        return (long)len;
    }
    return -1;
}

/* Renders bytes canonically, as the format writes them: `-` when empty; `text:` when they are
 * printable ASCII, spaces and UTF-8 (spaces, `%` and bytes >= 0x80 as %XX); else `hex:`. */
static void render_bytes(char *out, size_t cap, const uint8_t *data, size_t len) {
    if (len == 0) {
        snprintf(out, cap, "-");
        return;
    }
    bool text = true;
    for (size_t i = 0; i < len; i++) text = text && (data[i] >= 0x20 && data[i] != 0x7f);
    size_t used = (size_t)snprintf(out, cap, text ? "text:" : "hex:");
    for (size_t i = 0; i < len && used + 4 <= cap; i++) {
        bool plain = text && data[i] > 0x20 && data[i] < 0x7f && data[i] != '%';
        used += (size_t)snprintf(out + used, cap - used, plain ? "%c" : text ? "%%%02X" : "%02x", data[i]);
    }
}

/* An integer or `inf`; false when malformed. */
static bool timestamp(const char *token, int64_t *out) {
    if (strcmp(token, "inf") == 0) {
        *out = STP_INFINITY;
        return true;
    }
    char *end;
    errno = 0;
    long long v = strtoll(token, &end, 10);
    if (errno != 0 || *token == '\0' || *end != '\0') return false;
    *out = (int64_t)v;
    return true;
}

static void render_ts(char *out, size_t cap, int64_t ts) {
    if (ts == STP_INFINITY)
        snprintf(out, cap, "inf");
    else
        snprintf(out, cap, "%" PRId64, ts);
}

/* The expected outcome in canonical form: an `item` expectation's payload re-rendered as
 * `render_bytes` renders what was gotten; anything else joined by single spaces. */
static bool canonical_expected(char **tokens, size_t n, char *out, size_t cap) {
    if (n == 4 && strcmp(tokens[0], "item") == 0) {
        uint8_t bytes[PAYLOAD_BYTES_MAX];
        long len = payload(tokens[3], bytes, sizeof bytes);
        if (len < 0) return false;
        char rendered[RENDERED_BYTES_MAX];
        render_bytes(rendered, sizeof rendered, bytes, (size_t)len);
        snprintf(out, cap, "item %s %s %s", tokens[1], tokens[2], rendered);
        return true;
    }
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? " " : "", tokens[i]);
    return true;
}

/* ---- Variables and containers --------------------------------------------------------------- */

static struct var *var_find(struct case_state *c, const char *name) {
    for (size_t i = 0; i < c->nvars; i++)
        if (strcmp(c->vars[i].name, name) == 0) return &c->vars[i];
    return NULL;
}

static bool var_add(struct case_state *c, const char *name, enum var_kind kind, void *handle) {
    if (c->nvars == VARS_MAX || strlen(name) >= VAR_NAME_BYTES_MAX || var_find(c, name)) return false;
    struct var *v = &c->vars[c->nvars++];
    snprintf(v->name, sizeof v->name, "%s", name);
    v->kind = kind;
    v->handle = handle;
    return true;
}

static void var_free(struct var *v) {
    switch (v->kind) {
        case TASK: stp_task_free(v->handle); break;
        case CHANNEL_IN: stp_channel_input_free(v->handle); break;
        case CHANNEL_OUT: stp_channel_output_free(v->handle); break;
        case QUEUE_IN: stp_queue_input_free(v->handle); break;
        case QUEUE_OUT: stp_queue_output_free(v->handle); break;
    }
}

static void container_name(const struct mode *mode, const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s%s", mode->prefix, name);
}

/* Looks a container up: STP_OK with a channel or a queue handle (the other NULL), or a code. */
static int container(struct case_state *c, const struct mode *mode, const char *name, stp_channel **ch, stp_queue **q) {
    char full[NAME_BYTES_MAX];
    container_name(mode, name, full, sizeof full);
    *ch = NULL;
    *q = NULL;
    int kind = 0;
    int rc = stp_runtime_lookup(c->rt, full, &kind);
    if (rc != STP_OK) return rc;
    return kind == STP_KIND_CHANNEL ? stp_runtime_channel(c->rt, full, ch) : stp_runtime_queue(c->rt, full, q);
}

/* ---- Operations ----------------------------------------------------------------------------- */

/* Why an operation line could not be run (a broken vectors file or an unknown operation). */
static char runner_error[LINE_BYTES_MAX];

#define RUNNER_ERROR(...) (snprintf(runner_error, sizeof runner_error, __VA_ARGS__), false)

/* The status of the last call an operation made (for the mismatch report). */
static int op_rc;

/* The outcome of a call that returns nothing. */
static void status(char *got, size_t cap, int rc) {
    op_rc = rc;
    snprintf(got, cap, "%s", rc == STP_OK ? "ok" : stp_error_name(rc));
}

static bool item_outcome(char *got, size_t cap, int rc, stp_item *item) {
    if (rc != STP_OK) {
        status(got, cap, rc);
        return true;
    }
    char ts[32], bytes[RENDERED_BYTES_MAX];
    render_ts(ts, sizeof ts, stp_item_ts(item));
    render_bytes(bytes, sizeof bytes, stp_item_data(item), stp_item_len(item));
    snprintf(got, cap, "item %s %s %s", ts, stp_item_codec(item), bytes);
    stp_item_release(item);
    return true;
}

static bool op_npy(char **t, size_t n, char *got, size_t cap) {
    if (n != 2) return RUNNER_ERROR("npy takes 1 argument");
    uint8_t bytes[PAYLOAD_BYTES_MAX];
    long len = payload(t[1], bytes, sizeof bytes);
    if (len < 0) return RUNNER_ERROR("bad payload %s", t[1]);
    char descr[256];
    size_t shape[NPY_NDIM_MAX];
    stp_npy_layout layout;
    int rc = stp_npy_header(bytes, (size_t)len, descr, sizeof descr, shape, NPY_NDIM_MAX, &layout);
    if (rc != STP_OK) {
        status(got, cap, rc);
        return true;
    }
    char dims[256] = "scalar";
    size_t used = 0;
    for (size_t i = 0; i < layout.ndim; i++) used += (size_t)snprintf(dims + used, sizeof dims - used, "%s%zu", i ? "x" : "", shape[i]);
    snprintf(got, cap, "npy %s %s", descr, dims);
    return true;
}

/* Runs one operation line (tokens before `->`), writing its outcome to `got`. False when the
 * line cannot be run (runner_error says why). */
static bool run_op(struct case_state *c, const struct mode *mode, char **t, size_t n, char *got, size_t cap) {
    const char *op = t[0];
    int rc = STP_OK;
    int64_t a = 0, b = 0;
    char full[NAME_BYTES_MAX];
    if (strcmp(op, "npy") == 0) return op_npy(t, n, got, cap);
    if (strcmp(op, "ts_min") == 0) {
        if (n != 1) return RUNNER_ERROR("ts_min takes no argument");
        render_ts(got, cap, stp_runtime_ts_min(c->rt));
        return true;
    }
    if (strcmp(op, "channel") == 0 || strcmp(op, "queue") == 0) {
        if (n != 3) return RUNNER_ERROR("%s takes 2 arguments", op);
        int64_t capacity = STP_UNBOUNDED;
        if (strcmp(t[2], "-") != 0 && !timestamp(t[2], &capacity)) return RUNNER_ERROR("bad capacity %s", t[2]);
        container_name(mode, t[1], full, sizeof full);
        if (op[0] == 'c') {
            stp_channel *ch = NULL;
            rc = stp_runtime_create_channel(c->rt, full, capacity, STP_UNBOUNDED, &ch);
            stp_channel_free(ch);
        } else {
            stp_queue *q = NULL;
            rc = stp_runtime_create_queue(c->rt, full, capacity, STP_UNBOUNDED, &q);
            stp_queue_free(q);
        }
        status(got, cap, rc);
        return true;
    }
    if (strcmp(op, "lookup") == 0 || strcmp(op, "destroy") == 0 || strcmp(op, "live") == 0) {
        if (n != 2) return RUNNER_ERROR("%s takes 1 argument", op);
        stp_channel *ch;
        stp_queue *q;
        rc = container(c, mode, t[1], &ch, &q);
        stp_stats stats = {0};
        if (rc == STP_OK && op[0] == 'd') rc = ch ? stp_channel_destroy(ch) : stp_queue_destroy(q);
        if (rc == STP_OK && op[1] == 'i') rc = ch ? stp_channel_stats(ch, &stats) : stp_queue_stats(q, &stats);
        stp_channel_free(ch);
        stp_queue_free(q);
        if (rc == STP_OK && op[1] == 'i')
            snprintf(got, cap, "%" PRIu64, stats.live_items);
        else
            status(got, cap, rc);
        return true;
    }
    if (strcmp(op, "task") == 0) {
        if (n != 3 || !timestamp(t[2], &a)) return RUNNER_ERROR("task <task> <vt>");
        stp_task *task = NULL;
        rc = stp_runtime_task(c->rt, a, &task);
        if (rc == STP_OK && !var_add(c, t[1], TASK, task)) return RUNNER_ERROR("cannot define %s", t[1]);
        status(got, cap, rc);
        return true;
    }
    /* Every other operation names a variable first. */
    if (n < 2) return RUNNER_ERROR("%s needs a variable", op);
    struct var *v = var_find(c, t[1]);
    if (strcmp(op, "in") == 0 || strcmp(op, "out") == 0) {
        struct var *task = n == 4 ? var_find(c, t[2]) : NULL;
        if (!task || task->kind != TASK) return RUNNER_ERROR("%s <conn> <task> <container>", op);
        stp_channel *ch;
        stp_queue *q;
        stp_channel_input *ci = NULL;
        stp_channel_output *co = NULL;
        stp_queue_input *qi = NULL;
        stp_queue_output *qo = NULL;
        rc = container(c, mode, t[3], &ch, &q);
        if (rc == STP_OK && op[0] == 'i')
            rc = ch ? stp_task_attach_input(task->handle, ch, &ci) : stp_task_attach_queue_input(task->handle, q, &qi);
        else if (rc == STP_OK)
            rc = ch ? stp_task_attach_output(task->handle, ch, &co) : stp_task_attach_queue_output(task->handle, q, &qo);
        stp_channel_free(ch);
        stp_queue_free(q);
        bool defined = true;
        if (ci) defined = var_add(c, t[1], CHANNEL_IN, ci);
        if (co) defined = var_add(c, t[1], CHANNEL_OUT, co);
        if (qi) defined = var_add(c, t[1], QUEUE_IN, qi);
        if (qo) defined = var_add(c, t[1], QUEUE_OUT, qo);
        if (!defined) return RUNNER_ERROR("cannot define %s", t[1]);
        status(got, cap, rc);
        return true;
    }
    if (!v) return RUNNER_ERROR("unknown variable %s", t[1]);
    if (strcmp(op, "vt") == 0 || strcmp(op, "close") == 0) {
        if (v->kind != TASK) return RUNNER_ERROR("%s is not a task", t[1]);
        if (op[0] == 'v') {
            if (n != 3 || !timestamp(t[2], &a)) return RUNNER_ERROR("vt <task> <vt>");
            rc = stp_task_set_virtual_time(v->handle, a);
        } else {
            rc = stp_task_close(v->handle);
        }
        status(got, cap, rc);
        return true;
    }
    if (strcmp(op, "detach") == 0) {
        switch (v->kind) {
            case CHANNEL_IN: rc = stp_channel_input_detach(v->handle); break;
            case CHANNEL_OUT: rc = stp_channel_output_detach(v->handle); break;
            case QUEUE_IN: rc = stp_queue_input_detach(v->handle); break;
            case QUEUE_OUT: rc = stp_queue_output_detach(v->handle); break;
            case TASK: return RUNNER_ERROR("%s is a task", t[1]);
        }
        status(got, cap, rc);
        return true;
    }
    if (strcmp(op, "put") == 0 || strcmp(op, "tryput") == 0 || strcmp(op, "putref") == 0) {
        bool ref = op[3] == 'r';
        if (n != (ref ? 6u : 5u) || !timestamp(t[2], &a)) return RUNNER_ERROR("bad %s", op);
        uint8_t bytes[PAYLOAD_BYTES_MAX];
        long len = payload(t[4], bytes, sizeof bytes);
        if (len < 0) return RUNNER_ERROR("bad payload %s", t[4]);
        int64_t refcount = -1;
        if (ref && !timestamp(t[5], &refcount)) return RUNNER_ERROR("bad refcount %s", t[5]);
        int64_t timeout_ms = op[0] == 't' ? 0 : STP_FOREVER;
        if (v->kind == CHANNEL_OUT)
            rc = stp_channel_output_put(v->handle, a, t[3], bytes, (size_t)len, refcount, timeout_ms);
        else if (v->kind == QUEUE_OUT && !ref)
            rc = stp_queue_output_put(v->handle, a, t[3], bytes, (size_t)len, timeout_ms);
        else
            return RUNNER_ERROR("%s is not an output for %s", t[1], op);
        status(got, cap, rc);
        return true;
    }
    if (strcmp(op, "get") == 0) {
        if (v->kind != CHANNEL_IN || n != 4 || !timestamp(t[3], &b)) return RUNNER_ERROR("get <channel input> <selector> <timeout_ms>");
        int kind = STP_AT;
        a = 0;
        if (strcmp(t[2], "oldest") == 0) kind = STP_OLDEST;
        else if (strcmp(t[2], "newest") == 0) kind = STP_NEWEST;
        else if (strcmp(t[2], "oldest_unseen") == 0) kind = STP_OLDEST_UNSEEN;
        else if (strcmp(t[2], "newest_unseen") == 0) kind = STP_NEWEST_UNSEEN;
        else if (!timestamp(t[2], &a)) return RUNNER_ERROR("bad selector %s", t[2]);
        stp_item *item = NULL;
        rc = stp_channel_input_get(v->handle, kind, a, b, &item);
        return item_outcome(got, cap, rc, item);
    }
    if (strcmp(op, "qget") == 0) {
        if (v->kind != QUEUE_IN || n != 3 || !timestamp(t[2], &b)) return RUNNER_ERROR("qget <queue input> <timeout_ms>");
        stp_item *item = NULL;
        rc = stp_queue_input_get(v->handle, b, &item);
        return item_outcome(got, cap, rc, item);
    }
    if (strcmp(op, "consume") == 0 || strcmp(op, "until") == 0 || strcmp(op, "qconsume") == 0) {
        if (n != 3 || !timestamp(t[2], &a)) return RUNNER_ERROR("%s <conn> <ts>", op);
        if (op[0] == 'q' && v->kind == QUEUE_IN)
            rc = stp_queue_input_consume_ts(v->handle, a);
        else if (op[0] == 'c' && v->kind == CHANNEL_IN)
            rc = stp_channel_input_consume(v->handle, a);
        else if (op[0] == 'u' && v->kind == CHANNEL_IN)
            rc = stp_channel_input_consume_until(v->handle, a);
        else
            return RUNNER_ERROR("%s is not an input for %s", t[1], op);
        status(got, cap, rc);
        return true;
    }
    if (strcmp(op, "range") == 0) {
        if (v->kind != CHANNEL_IN || n != 4 || !timestamp(t[2], &a) || !timestamp(t[3], &b)) return RUNNER_ERROR("range <channel input> <t0> <t1>");
        stp_items *items = NULL;
        rc = stp_channel_input_get_range(v->handle, a, b, &items);
        if (rc != STP_OK) {
            status(got, cap, rc);
            return true;
        }
        size_t used = (size_t)snprintf(got, cap, "items ");
        size_t count = stp_items_len(items);
        if (count == 0) snprintf(got + used, cap - used, "-");
        for (size_t i = 0; i < count && used < cap; i++)
            used += (size_t)snprintf(got + used, cap - used, "%s%" PRId64, i ? "," : "", stp_item_ts(stp_items_at(items, i)));
        stp_items_release(items);
        return true;
    }
    return RUNNER_ERROR("unknown operation %s", op);
}

/* ---- Cases and files ------------------------------------------------------------------------ */

static void case_end(struct case_state *c) {
    /* Connections, then tasks, then the runtime (any order is allowed; this one reads well). */
    for (size_t i = c->nvars; i-- > 0;)
        if (c->vars[i].kind != TASK) var_free(&c->vars[i]);
    for (size_t i = c->nvars; i-- > 0;)
        if (c->vars[i].kind == TASK) var_free(&c->vars[i]);
    c->nvars = 0;
    stp_runtime_free(c->rt);
    c->rt = NULL;
    node_stop(&c->node);
}

static void case_begin(struct case_state *c, struct mode *mode, const char *name) {
    static unsigned run_cases = 0;
    snprintf(c->name, sizeof c->name, "%s", name);
    int rc;
    if (mode->serve) {
        node_start(&c->node, mode->serve);
        rc = stp_connect(c->node.endpoint, NODE_START_MS, &c->rt);
    } else if (mode->connect) {
        snprintf(mode->prefix, sizeof mode->prefix, "vectors/c-%ld-%u/", (long)getpid(), run_cases);
        rc = stp_connect(mode->connect, NODE_START_MS, &c->rt);
    } else {
        rc = stp_runtime_new(&c->rt);
    }
    run_cases++;
    if (rc != STP_OK) die("case %s: no runtime: %s: %s", name, stp_error_name(rc), stp_last_error_message());
}

/* Runs every case of `path`; returns the number of operations run, exits on a mismatch. */
static size_t run_file(const char *path, struct mode *mode, size_t *cases) {
    FILE *f = fopen(path, "r");
    if (!f) die("%s: %s", path, strerror(errno));
    struct case_state c = {.file = path};
    char line[LINE_BYTES_MAX], original[LINE_BYTES_MAX];
    size_t lineno = 0, ops = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') die("%s:%zu: line longer than %d bytes", path, lineno, LINE_BYTES_MAX);
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        line[strcspn(line, "\r\n")] = '\0';
        snprintf(original, sizeof original, "%s", line);
        char *tokens[TOKENS_MAX];
        size_t n = 0;
        for (char *tok = strtok(line, " \t"); tok; tok = strtok(NULL, " \t")) {
            if (n == TOKENS_MAX) die("%s:%zu: more than %d tokens", path, lineno, TOKENS_MAX);
            tokens[n++] = tok;
        }
        if (n == 0) continue;
        if (strcmp(tokens[0], "case") == 0) {
            if (n != 2) die("%s:%zu: case <name>", path, lineno);
            if (c.rt) case_end(&c);
            case_begin(&c, mode, tokens[1]);
            (*cases)++;
            continue;
        }
        if (!c.rt) die("%s:%zu: an operation before the first case", path, lineno);
        size_t arrow = 0;
        while (arrow < n && strcmp(tokens[arrow], "->") != 0) arrow++;
        if (arrow == 0 || arrow == n || arrow == n - 1) die("%s:%zu: `<operation> -> <expected>` wanted", path, lineno);
        char expected[OUTCOME_BYTES_MAX], got[OUTCOME_BYTES_MAX];
        if (!canonical_expected(tokens + arrow + 1, n - arrow - 1, expected, sizeof expected))
            die("%s:%zu: bad expected value", path, lineno);
        runner_error[0] = '\0';
        op_rc = STP_OK;
        if (!run_op(&c, mode, tokens, arrow, got, sizeof got)) {
            fprintf(stderr, "vectors: FAIL %s:%zu case %s: `%s`: the runner cannot run it: %s\n", path, lineno, c.name, original, runner_error);
            exit(1);
        }
        ops++;
        if (strcmp(got, expected) != 0) {
            fprintf(stderr, "vectors: FAIL %s:%zu case %s: `%s`\n  expected: %s\n  got:      %s\n", path, lineno, c.name, original, expected, got);
            if (op_rc != STP_OK) fprintf(stderr, "  last error: %s\n", stp_last_error_message());
            exit(1);
        }
    }
    if (ferror(f)) die("%s: read error", path);
    fclose(f);
    if (c.rt) case_end(&c);
    return ops;
}

int main(int argc, char **argv) {
    struct mode mode = {0};
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (i + 1 >= argc) die("%s needs a value", argv[i]);
        if (strcmp(argv[i], "--connect") == 0)
            mode.connect = argv[i + 1];
        else if (strcmp(argv[i], "--serve") == 0)
            mode.serve = argv[i + 1];
        else
            die("unknown option %s", argv[i]);
    }
    if (i == argc || (mode.connect && mode.serve))
        die("usage: vectors [--connect <endpoint> | --serve <stampede binary>] <file.vectors>...");
    signal(SIGPIPE, SIG_IGN);
    size_t ops = 0, cases = 0;
    for (; i < argc; i++) ops += run_file(argv[i], &mode, &cases);
    printf("vectors: %zu cases, %zu operations passed (%s)\n", cases, ops,
           mode.serve ? "a stampede serve node per case" : mode.connect ? mode.connect : "embedded");
    return 0;
}
