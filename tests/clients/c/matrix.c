/*
 * The C program of the client matrix (see ../README.md for the contract).
 *
 * Client: libnats (nats.c) 3.4 from Debian. Every feature runs in a child process of
 * its own (forked before this process touches the library), so that each one has its
 * own timeout: the parent waits for the child's RESULT line on a pipe and, past the
 * feature's deadline, kills the child and reports a timeout. The parent prints every
 * RESULT line; children write only CONTROL lines to stdout and log to stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>
#include <openssl/evp.h>

enum { ST_OK, ST_FAIL, ST_SKIP };

/* ---------------------------------------------------------------- small string builder */

typedef struct {
    char *b;
    size_t n, cap;
} sb;

static void sb_reserve(sb *s, size_t more)
{
    if (s->n + more + 1 <= s->cap)
        return;
    size_t cap = s->cap ? s->cap : 256;
    while (cap < s->n + more + 1)
        cap *= 2;
    char *nb = realloc(s->b, cap);
    if (nb == NULL) {
        fprintf(stderr, "out of memory\n");
        _exit(3);
    }
    s->b = nb;
    s->cap = cap;
}

static void sb_add(sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sb *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0)
        return;
    sb_reserve(s, (size_t)len);
    va_start(ap, fmt);
    vsnprintf(s->b + s->n, (size_t)len + 1, fmt, ap);
    va_end(ap);
    s->n += (size_t)len;
}

/* a JSON string of len bytes (non-ASCII bytes as \u00XX so the line stays one line) */
static void sb_strn(sb *s, const char *str, int len)
{
    sb_add(s, "\"");
    for (int i = 0; str != NULL && i < len; i++) {
        unsigned char c = (unsigned char)str[i];
        if (c == '"' || c == '\\')
            sb_add(s, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            sb_add(s, "\\u%04x", c);
        else
            sb_add(s, "%c", c);
    }
    sb_add(s, "\"");
}

static void sb_str(sb *s, const char *str)
{
    if (str == NULL)
        sb_add(s, "null");
    else
        sb_strn(s, str, (int)strlen(str));
}

static void sb_reset(sb *s) { s->n = 0; if (s->b) s->b[0] = 0; }

/* ---------------------------------------------------------------- status names */

static const char *status_name(natsStatus s)
{
    switch (s) {
    case NATS_OK: return "NATS_OK";
    case NATS_ERR: return "NATS_ERR";
    case NATS_PROTOCOL_ERROR: return "NATS_PROTOCOL_ERROR";
    case NATS_IO_ERROR: return "NATS_IO_ERROR";
    case NATS_CONNECTION_CLOSED: return "NATS_CONNECTION_CLOSED";
    case NATS_NO_SERVER: return "NATS_NO_SERVER";
    case NATS_STALE_CONNECTION: return "NATS_STALE_CONNECTION";
    case NATS_SECURE_CONNECTION_WANTED: return "NATS_SECURE_CONNECTION_WANTED";
    case NATS_SECURE_CONNECTION_REQUIRED: return "NATS_SECURE_CONNECTION_REQUIRED";
    case NATS_CONNECTION_DISCONNECTED: return "NATS_CONNECTION_DISCONNECTED";
    case NATS_CONNECTION_AUTH_FAILED: return "NATS_CONNECTION_AUTH_FAILED";
    case NATS_NOT_PERMITTED: return "NATS_NOT_PERMITTED";
    case NATS_NOT_FOUND: return "NATS_NOT_FOUND";
    case NATS_ADDRESS_MISSING: return "NATS_ADDRESS_MISSING";
    case NATS_INVALID_SUBJECT: return "NATS_INVALID_SUBJECT";
    case NATS_INVALID_ARG: return "NATS_INVALID_ARG";
    case NATS_INVALID_SUBSCRIPTION: return "NATS_INVALID_SUBSCRIPTION";
    case NATS_INVALID_TIMEOUT: return "NATS_INVALID_TIMEOUT";
    case NATS_ILLEGAL_STATE: return "NATS_ILLEGAL_STATE";
    case NATS_SLOW_CONSUMER: return "NATS_SLOW_CONSUMER";
    case NATS_MAX_PAYLOAD: return "NATS_MAX_PAYLOAD";
    case NATS_MAX_DELIVERED_MSGS: return "NATS_MAX_DELIVERED_MSGS";
    case NATS_INSUFFICIENT_BUFFER: return "NATS_INSUFFICIENT_BUFFER";
    case NATS_NO_MEMORY: return "NATS_NO_MEMORY";
    case NATS_SYS_ERROR: return "NATS_SYS_ERROR";
    case NATS_TIMEOUT: return "NATS_TIMEOUT";
    case NATS_FAILED_TO_INITIALIZE: return "NATS_FAILED_TO_INITIALIZE";
    case NATS_NOT_INITIALIZED: return "NATS_NOT_INITIALIZED";
    case NATS_SSL_ERROR: return "NATS_SSL_ERROR";
    case NATS_NO_SERVER_SUPPORT: return "NATS_NO_SERVER_SUPPORT";
    case NATS_NOT_YET_CONNECTED: return "NATS_NOT_YET_CONNECTED";
    case NATS_DRAINING: return "NATS_DRAINING";
    case NATS_INVALID_QUEUE_NAME: return "NATS_INVALID_QUEUE_NAME";
    case NATS_NO_RESPONDERS: return "NATS_NO_RESPONDERS";
    case NATS_MISMATCH: return "NATS_MISMATCH";
    case NATS_MISSED_HEARTBEAT: return "NATS_MISSED_HEARTBEAT";
    default: return natsStatus_GetText(s);
    }
}

/* The library's last error text without its "(file.c:line): " prefix. */
static const char *last_error_text(void)
{
    const char *p = nats_GetLastError(NULL);
    while (p != NULL && *p == '(') {
        const char *q = strstr(p, "): ");
        if (q == NULL)
            break;
        p = q + 3;
    }
    return p;
}

/* The failure observation: what failed, the status, the JetStream error code if any. */
static int fail_st(sb *obs, const char *what, natsStatus s, jsErrCode jerr)
{
    sb_reset(obs);
    sb_add(obs, "{\"error\":");
    sb_str(obs, what);
    sb_add(obs, ",\"status\":\"%s\"", status_name(s));
    if (jerr != 0)
        sb_add(obs, ",\"js_err_code\":%d", (int)jerr);
    sb_add(obs, "}");
    fprintf(stderr, "[c] %s: %s (%s)\n", what, status_name(s), nats_GetLastError(NULL));
    return ST_FAIL;
}

/* A failure that is not a library status: a wrong value. `detail` is JSON. */
static int fail_msg(sb *obs, const char *what, const char *detail_json)
{
    sb_reset(obs);
    sb_add(obs, "{\"error\":");
    sb_str(obs, what);
    if (detail_json != NULL)
        sb_add(obs, ",\"got\":%s", detail_json);
    sb_add(obs, "}");
    fprintf(stderr, "[c] %s: %s\n", what, detail_json ? detail_json : "");
    return ST_FAIL;
}

/* ---------------------------------------------------------------- environment */

/* MATRIX_C_TIMEOUT_SCALE multiplies the timeouts, for slow runs (valgrind) */
static int timeout_scale = 1;

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return (v != NULL && v[0] != 0) ? v : NULL;
}

#define NEED_ENV(var, name)                                        \
    const char *var = env(name);                                   \
    if (var == NULL)                                               \
        return fail_msg(obs, "missing environment " name, NULL)

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Options every connection of the program starts from: a URL, a 5 s connect timeout,
 * the user and password of the main server when `main_user` is set. */
static natsStatus base_opts(natsOptions **opts, const char *url, bool main_user)
{
    natsStatus s = natsOptions_Create(opts);
    if (s == NATS_OK)
        s = natsOptions_SetURL(*opts, url);
    if (s == NATS_OK)
        s = natsOptions_SetTimeout(*opts, 5000 * timeout_scale);
    if (s == NATS_OK && main_user)
        s = natsOptions_SetUserInfo(*opts, getenv("MATRIX_USER"), getenv("MATRIX_PASSWORD"));
    return s;
}

static natsStatus connect_main(natsConnection **nc)
{
    natsOptions *opts = NULL;
    natsStatus s = base_opts(&opts, getenv("MATRIX_URL"), true);
    if (s == NATS_OK)
        s = natsConnection_Connect(nc, opts);
    natsOptions_Destroy(opts);
    return s;
}

/* Subscribe, publish `payload`, read it back. On success `echo` gets the payload seen. */
static natsStatus roundtrip(natsConnection *nc, const char *subj, const char *payload, sb *echo)
{
    natsSubscription *sub = NULL;
    natsMsg *m = NULL;
    natsStatus s = natsConnection_SubscribeSync(&sub, nc, subj);
    if (s == NATS_OK)
        s = natsConnection_Flush(nc);
    if (s == NATS_OK)
        s = natsConnection_PublishString(nc, subj, payload);
    if (s == NATS_OK)
        s = natsSubscription_NextMsg(&m, sub, 3000);
    if (s == NATS_OK)
        sb_strn(echo, natsMsg_GetData(m), natsMsg_GetDataLength(m));
    natsMsg_Destroy(m);
    natsSubscription_Destroy(sub);
    return s;
}

/* ---------------------------------------------------------------- connect_* */

/* connect with options, round-trip one message; `echo` receives the JSON payload seen */
static int connect_and_roundtrip(sb *obs, natsOptions *opts, const char *subj, const char *payload,
                                 sb *echo)
{
    natsConnection *nc = NULL;
    natsStatus s = natsConnection_Connect(&nc, opts);
    if (s != NATS_OK)
        return fail_st(obs, "connect", s, 0);
    s = roundtrip(nc, subj, payload, echo);
    natsConnection_Destroy(nc);
    if (s != NATS_OK)
        return fail_st(obs, "roundtrip", s, 0);
    return ST_OK;
}

/* A connection that must be refused; the observation is the status and the error text. */
static void refused(sb *obs, natsOptions *opts, bool *was_refused)
{
    natsConnection *nc = NULL;
    natsStatus s = natsConnection_Connect(&nc, opts);
    *was_refused = (s != NATS_OK);
    sb_add(obs, "{\"status\":\"%s\",\"text\":", status_name(s));
    const char *text = (s != NATS_OK) ? last_error_text() : NULL;
    sb_str(obs, text);
    sb_add(obs, "}");
    natsConnection_Destroy(nc);
}

static int feat_connect_user(sb *obs)
{
    NEED_ENV(url, "MATRIX_URL");
    NEED_ENV(user, "MATRIX_USER");
    NEED_ENV(pw, "MATRIX_PASSWORD");
    natsOptions *opts = NULL;
    sb echo = {0};
    natsStatus s = base_opts(&opts, url, false);
    if (s == NATS_OK)
        s = natsOptions_SetUserInfo(opts, user, pw);
    if (s != NATS_OK)
        return fail_st(obs, "options", s, 0);
    int st = connect_and_roundtrip(obs, opts, "core.user", "hello-user", &echo);
    natsOptions_Destroy(opts);
    if (st != ST_OK) {
        free(echo.b);
        return st;
    }
    sb_add(obs, "{\"echo\":%s,\"wrong_password\":", echo.b);
    free(echo.b);
    bool was_refused = false;
    s = base_opts(&opts, url, false);
    if (s == NATS_OK)
        s = natsOptions_SetUserInfo(opts, user, "not-the-password");
    if (s != NATS_OK)
        return fail_st(obs, "options", s, 0);
    refused(obs, opts, &was_refused);
    natsOptions_Destroy(opts);
    sb_add(obs, "}");
    return was_refused ? ST_OK : ST_FAIL;
}

static int feat_connect_token(sb *obs)
{
    NEED_ENV(url, "MATRIX_TOKEN_URL");
    NEED_ENV(token, "MATRIX_TOKEN");
    natsOptions *opts = NULL;
    sb echo = {0};
    natsStatus s = base_opts(&opts, url, false);
    if (s == NATS_OK)
        s = natsOptions_SetToken(opts, token);
    if (s != NATS_OK)
        return fail_st(obs, "options", s, 0);
    int st = connect_and_roundtrip(obs, opts, "core.token", "hello-token", &echo);
    natsOptions_Destroy(opts);
    if (st != ST_OK) {
        free(echo.b);
        return st;
    }
    sb_add(obs, "{\"echo\":%s,\"wrong_token\":", echo.b);
    free(echo.b);
    bool was_refused = false;
    s = base_opts(&opts, url, false);
    if (s == NATS_OK)
        s = natsOptions_SetToken(opts, "not-the-token");
    if (s != NATS_OK)
        return fail_st(obs, "options", s, 0);
    refused(obs, opts, &was_refused);
    natsOptions_Destroy(opts);
    sb_add(obs, "}");
    return was_refused ? ST_OK : ST_FAIL;
}

/* nkeys: the library wants the public key next to the seed file, and has no call that
 * derives it, so derive it here: base32 seed -> 32-byte ed25519 seed -> public key ->
 * base32 with the seed's type prefix and a CRC16 (XMODEM) trailer. */
static const char B32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

static uint16_t crc16(const unsigned char *p, size_t n)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)p[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

static int b32_decode(const char *in, unsigned char *out, int max)
{
    int n = 0, bits = 0;
    unsigned int acc = 0;
    for (; *in; in++) {
        const char *p = strchr(B32, *in);
        if (p == NULL || *in == 0)
            return -1;
        acc = (acc << 5) | (unsigned int)(p - B32);
        bits += 5;
        if (bits >= 8) {
            if (n >= max)
                return -1;
            out[n++] = (unsigned char)(acc >> (bits - 8));
            bits -= 8;
        }
    }
    return n;
}

static void b32_encode(const unsigned char *in, int n, char *out)
{
    int bits = 0, o = 0;
    unsigned int acc = 0;
    for (int i = 0; i < n; i++) {
        acc = (acc << 8) | in[i];
        bits += 8;
        while (bits >= 5) {
            out[o++] = B32[(acc >> (bits - 5)) & 31];
            bits -= 5;
        }
    }
    if (bits > 0)
        out[o++] = B32[(acc << (5 - bits)) & 31];
    out[o] = 0;
}

/* pub must hold 57 bytes; returns 0 on success */
static int nkey_public_from_seed_file(const char *path, char *pub)
{
    char seed[128] = {0};
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t got = fread(seed, 1, sizeof(seed) - 1, f);
    fclose(f);
    while (got > 0 && (seed[got - 1] == '\n' || seed[got - 1] == '\r' || seed[got - 1] == ' '))
        seed[--got] = 0;
    unsigned char raw[64];
    int n = b32_decode(seed, raw, sizeof(raw));
    memset(seed, 0, sizeof(seed));
    if (n != 36 || crc16(raw, 34) != (uint16_t)(raw[34] | (raw[35] << 8)))
        return -1;
    if ((raw[0] & 248) != (18 << 3)) /* 'S' */
        return -1;
    unsigned char prefix = (unsigned char)(((raw[0] & 7) << 5) | ((raw[1] & 248) >> 3));
    EVP_PKEY *key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, raw + 2, 32);
    memset(raw, 0, sizeof(raw));
    if (key == NULL)
        return -1;
    unsigned char out[35];
    size_t plen = 32;
    out[0] = prefix;
    int ok = EVP_PKEY_get_raw_public_key(key, out + 1, &plen);
    EVP_PKEY_free(key);
    if (ok != 1 || plen != 32)
        return -1;
    uint16_t c = crc16(out, 33);
    out[33] = (unsigned char)(c & 0xff);
    out[34] = (unsigned char)(c >> 8);
    b32_encode(out, 35, pub);
    return 0;
}

static int feat_connect_nkey(sb *obs)
{
    NEED_ENV(url, "MATRIX_URL");
    NEED_ENV(seed_file, "MATRIX_NKEY_SEED_FILE");
    char pub[64];
    if (nkey_public_from_seed_file(seed_file, pub) != 0)
        return fail_msg(obs, "cannot read the nkey seed", NULL);
    natsOptions *opts = NULL;
    sb echo = {0};
    natsStatus s = base_opts(&opts, url, false);
    if (s == NATS_OK)
        s = natsOptions_SetNKeyFromSeed(opts, pub, seed_file);
    if (s != NATS_OK)
        return fail_st(obs, "options", s, 0);
    int st = connect_and_roundtrip(obs, opts, "core.nkey", "hello-nkey", &echo);
    natsOptions_Destroy(opts);
    if (st == ST_OK)
        sb_add(obs, "{\"echo\":%s,\"public_key_prefix\":\"%c\"}", echo.b, pub[0]);
    free(echo.b);
    return st;
}

static int feat_connect_creds(sb *obs)
{
    NEED_ENV(url, "MATRIX_CREDS_URL");
    NEED_ENV(creds, "MATRIX_CREDS_FILE");
    natsOptions *opts = NULL;
    sb echo = {0};
    natsStatus s = base_opts(&opts, url, false);
    if (s == NATS_OK)
        s = natsOptions_SetUserCredentialsFromFiles(opts, creds, NULL);
    if (s != NATS_OK)
        return fail_st(obs, "options", s, 0);
    int st = connect_and_roundtrip(obs, opts, "core.creds", "hello-creds", &echo);
    natsOptions_Destroy(opts);
    if (st != ST_OK) {
        free(echo.b);
        return st;
    }
    sb_add(obs, "{\"echo\":%s", echo.b);
    free(echo.b);
    /* the main server's nkey user is unknown to the operator-mode server */
    const char *seed_file = env("MATRIX_NKEY_SEED_FILE");
    char pub[64];
    if (seed_file != NULL && nkey_public_from_seed_file(seed_file, pub) == 0) {
        bool was_refused = false;
        s = base_opts(&opts, url, false);
        if (s == NATS_OK)
            s = natsOptions_SetNKeyFromSeed(opts, pub, seed_file);
        if (s != NATS_OK)
            return fail_st(obs, "options", s, 0);
        sb_add(obs, ",\"unknown_nkey\":");
        refused(obs, opts, &was_refused);
        natsOptions_Destroy(opts);
        if (!was_refused)
            st = ST_FAIL;
    }
    sb_add(obs, "}");
    return st;
}

/* ---------------------------------------------------------------- tls */

static int feat_tls(sb *obs)
{
    NEED_ENV(url, "MATRIX_TLS_URL");
    NEED_ENV(ca, "MATRIX_TLS_CA");
    natsOptions *opts = NULL;
    natsConnection *nc = NULL;
    natsSubscription *sub = NULL;
    natsStatus s = base_opts(&opts, url, false);
    if (s == NATS_OK) {
        /* a libnats built without TLS refuses this (NATS_ILLEGAL_STATE) */
        s = natsOptions_SetSecure(opts, true);
        if (s != NATS_OK) {
            natsOptions_Destroy(opts);
            sb_add(obs, "{\"reason\":\"libnats built without TLS\",\"status\":\"%s\"}", status_name(s));
            return ST_SKIP;
        }
        s = natsOptions_LoadCATrustedCertificates(opts, ca);
    }
    if (s != NATS_OK) {
        natsOptions_Destroy(opts);
        return fail_st(obs, "tls options", s, 0);
    }
    s = natsConnection_Connect(&nc, opts);
    natsOptions_Destroy(opts);
    if (s != NATS_OK)
        return fail_st(obs, "connect", s, 0);
    int st = ST_OK;
    static const int sizes[] = {1, 10 * 1024, 500 * 1000};
    sb_add(obs, "{\"max_payload\":%" PRId64 ",\"roundtrips\":[", natsConnection_GetMaxPayload(nc));
    s = natsConnection_SubscribeSync(&sub, nc, "core.tls");
    if (s == NATS_OK)
        s = natsConnection_Flush(nc);
    for (size_t i = 0; s == NATS_OK && i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        int n = sizes[i];
        char *data = malloc((size_t)n);
        for (int k = 0; k < n; k++)
            data[k] = (char)((k * 31 + (int)i) % 251);
        natsMsg *m = NULL;
        s = natsConnection_Publish(nc, "core.tls", data, n);
        if (s == NATS_OK)
            s = natsSubscription_NextMsg(&m, sub, 5000);
        if (s == NATS_OK) {
            bool same = natsMsg_GetDataLength(m) == n && memcmp(natsMsg_GetData(m), data, (size_t)n) == 0;
            sb_add(obs, "%s[%d,%d,%s]", i ? "," : "", n, natsMsg_GetDataLength(m), same ? "true" : "false");
            if (!same)
                st = ST_FAIL;
        }
        natsMsg_Destroy(m);
        free(data);
    }
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(nc);
    if (s != NATS_OK)
        return fail_st(obs, "tls roundtrip", s, 0);
    sb_add(obs, "]");
    /* refused without the CA (the system's trust store only) */
    bool was_refused = false;
    s = base_opts(&opts, url, false);
    if (s == NATS_OK)
        s = natsOptions_SetSecure(opts, true);
    if (s != NATS_OK)
        return fail_st(obs, "tls options", s, 0);
    sb_add(obs, ",\"untrusted\":");
    {
        natsConnection *bad = NULL;
        s = natsConnection_Connect(&bad, opts);
        was_refused = (s != NATS_OK);
        /* the library's text names OpenSSL's reason: keep the status only */
        sb_add(obs, "\"%s\"", status_name(s));
        natsConnection_Destroy(bad);
    }
    natsOptions_Destroy(opts);
    if (!was_refused)
        st = ST_FAIL;
    /* a nats:// URL: the server's INFO says TLS is required, and the library upgrades */
    char plain[256];
    const char *hostport = strstr(url, "://");
    snprintf(plain, sizeof(plain), "nats://%s", hostport ? hostport + 3 : url);
    s = base_opts(&opts, plain, false);
    if (s == NATS_OK)
        s = natsOptions_LoadCATrustedCertificates(opts, ca);
    if (s != NATS_OK)
        return fail_st(obs, "plain options", s, 0);
    {
        natsConnection *up = NULL;
        sb echo = {0};
        s = natsConnection_Connect(&up, opts);
        if (s == NATS_OK)
            s = roundtrip(up, "core.tls.upgraded", "upgraded", &echo);
        sb_add(obs, ",\"nats_url\":[\"%s\",%s]", status_name(s), echo.b ? echo.b : "null");
        if (s != NATS_OK)
            st = ST_FAIL;
        free(echo.b);
        natsConnection_Destroy(up);
    }
    natsOptions_Destroy(opts);
    sb_add(obs, "}");
    return st;
}

/* ---------------------------------------------------------------- core messaging */

/* Read the messages of a sync subscription: wait up to 2 s for each of the first
 * `expected`, then 200 ms for any extra. Appends ["subject=payload",...] to obs. */
static int collect(natsSubscription *sub, int expected, sb *obs)
{
    int n = 0;
    sb_add(obs, "[");
    for (;;) {
        natsMsg *m = NULL;
        natsStatus s = natsSubscription_NextMsg(&m, sub, n < expected ? 2000 : 200);
        if (s != NATS_OK)
            break;
        sb_add(obs, "%s\"%s=%.*s\"", n ? "," : "", natsMsg_GetSubject(m), natsMsg_GetDataLength(m),
               natsMsg_GetData(m));
        n++;
        natsMsg_Destroy(m);
    }
    sb_add(obs, "]");
    return n;
}

static int feat_pubsub_wildcard(sb *obs)
{
    natsConnection *nc = NULL;
    natsSubscription *subs[3] = {0};
    static const char *patterns[3] = {"m.*.x", "m.>", "m.a.x"};
    static const char *subjects[] = {"m.a.x", "m.b.x", "m.a.y", "m.a.x.y", "m.a", "n.a.x", "m.c.x"};
    static const char *expect[3] = {
        "[\"m.a.x=1\",\"m.b.x=2\",\"m.c.x=7\"]",
        "[\"m.a.x=1\",\"m.b.x=2\",\"m.a.y=3\",\"m.a.x.y=4\",\"m.a=5\",\"m.c.x=7\"]",
        "[\"m.a.x=1\"]",
    };
    static const int counts[3] = {3, 6, 1};
    natsStatus s = connect_main(&nc);
    if (s != NATS_OK)
        return fail_st(obs, "connect", s, 0);
    for (int i = 0; s == NATS_OK && i < 3; i++)
        s = natsConnection_SubscribeSync(&subs[i], nc, patterns[i]);
    if (s == NATS_OK)
        s = natsConnection_Flush(nc);
    for (size_t i = 0; s == NATS_OK && i < sizeof(subjects) / sizeof(subjects[0]); i++) {
        char payload[8];
        snprintf(payload, sizeof(payload), "%zu", i + 1);
        s = natsConnection_PublishString(nc, subjects[i], payload);
    }
    if (s == NATS_OK)
        s = natsConnection_Flush(nc);
    int st = ST_OK;
    if (s != NATS_OK)
        st = fail_st(obs, "subscribe/publish", s, 0);
    else {
        sb_add(obs, "{");
        for (int i = 0; i < 3; i++) {
            sb one = {0};
            collect(subs[i], counts[i], &one);
            sb_add(obs, "%s\"%s\":%s", i ? "," : "", patterns[i], one.b);
            if (strcmp(one.b, expect[i]) != 0)
                st = ST_FAIL;
            free(one.b);
        }
        sb_add(obs, "}");
    }
    for (int i = 0; i < 3; i++)
        natsSubscription_Destroy(subs[i]);
    natsConnection_Destroy(nc);
    return st;
}

#define QMSGS 30

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int seen[QMSGS];      /* deliveries of each message to the queue members */
    int queue_total;
    int plain_total;
    bool plain_in_order;
    int bad;              /* payloads that are not 0..QMSGS-1 */
} qstate;

static void q_member_cb(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
    (void)nc; (void)sub;
    qstate *q = closure;
    int v = atoi(natsMsg_GetData(m));
    pthread_mutex_lock(&q->mu);
    if (v >= 0 && v < QMSGS)
        q->seen[v]++;
    else
        q->bad++;
    q->queue_total++;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    natsMsg_Destroy(m);
}

static void q_plain_cb(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
    (void)nc; (void)sub;
    qstate *q = closure;
    int v = atoi(natsMsg_GetData(m));
    pthread_mutex_lock(&q->mu);
    if (v != q->plain_total)
        q->plain_in_order = false;
    q->plain_total++;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    natsMsg_Destroy(m);
}

/* wait on cv until pred() or deadline (absolute, ms of CLOCK_REALTIME) */
static void timed_wait(pthread_cond_t *cv, pthread_mutex_t *mu, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cv, mu, &ts);
}

/* Callback states are static: the library may still run a callback of a connection or
 * subscription after its Destroy returned (each feature runs in a process of its own). */
static qstate q = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .plain_in_order = true};

static int feat_queue_group(sb *obs)
{
    natsConnection *members[3] = {0}, *pub = NULL;
    natsSubscription *msubs[3] = {0}, *plain = NULL;
    natsStatus s = connect_main(&pub);
    /* each member on its own connection, as separate workers would be */
    for (int i = 0; s == NATS_OK && i < 3; i++) {
        s = connect_main(&members[i]);
        if (s == NATS_OK)
            s = natsConnection_QueueSubscribe(&msubs[i], members[i], "core.q", "workers", q_member_cb, &q);
        if (s == NATS_OK)
            s = natsConnection_Flush(members[i]);
    }
    if (s == NATS_OK)
        s = natsConnection_Subscribe(&plain, pub, "core.q", q_plain_cb, &q);
    if (s == NATS_OK)
        s = natsConnection_Flush(pub);
    for (int i = 0; s == NATS_OK && i < QMSGS; i++) {
        char payload[8];
        snprintf(payload, sizeof(payload), "%d", i);
        s = natsConnection_PublishString(pub, "core.q", payload);
    }
    if (s == NATS_OK)
        s = natsConnection_Flush(pub);
    int st = ST_OK;
    if (s != NATS_OK)
        st = fail_st(obs, "subscribe/publish", s, 0);
    else {
        int64_t deadline = now_ms() + 5000;
        pthread_mutex_lock(&q.mu);
        while ((q.queue_total < QMSGS || q.plain_total < QMSGS) && now_ms() < deadline)
            timed_wait(&q.cv, &q.mu, 100);
        pthread_mutex_unlock(&q.mu);
        usleep(200 * 1000); /* anything extra would arrive now */
        pthread_mutex_lock(&q.mu);
        int once = 0, dup = 0, missing = 0;
        for (int i = 0; i < QMSGS; i++) {
            if (q.seen[i] == 1)
                once++;
            else if (q.seen[i] == 0)
                missing++;
            else
                dup++;
        }
        sb_add(obs, "{\"queue_received\":%d,\"delivered_once\":%d,\"duplicated\":%d,\"missing\":%d,"
                    "\"plain_received\":%d,\"plain_in_order\":%s}",
               q.queue_total, once, dup, missing, q.plain_total, q.plain_in_order ? "true" : "false");
        if (q.queue_total != QMSGS || once != QMSGS || q.plain_total != QMSGS || !q.plain_in_order || q.bad)
            st = ST_FAIL;
        pthread_mutex_unlock(&q.mu);
    }
    natsSubscription_Destroy(plain);
    natsConnection_Destroy(pub);
    for (int i = 0; i < 3; i++) {
        natsSubscription_Destroy(msubs[i]);
        natsConnection_Destroy(members[i]);
    }
    return st;
}

/* The responder echoes every request header, adds its own, and prefixes the payload. */
static void echo_cb(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
    (void)sub; (void)closure;
    natsMsg *r = NULL;
    sb data = {0};
    sb_add(&data, "echo:%.*s", natsMsg_GetDataLength(m), natsMsg_GetData(m));
    natsStatus s = natsMsg_Create(&r, natsMsg_GetReply(m), NULL, data.b, (int)data.n);
    const char **keys = NULL;
    int nkeys = 0;
    if (s == NATS_OK && natsMsgHeader_Keys(m, &keys, &nkeys) == NATS_OK) {
        for (int i = 0; i < nkeys; i++) {
            const char **vals = NULL;
            int nvals = 0;
            if (natsMsgHeader_Values(m, keys[i], &vals, &nvals) == NATS_OK) {
                for (int k = 0; k < nvals; k++)
                    natsMsgHeader_Add(r, keys[i], vals[k]);
                free((void *)vals);
            }
        }
        free((void *)keys);
    }
    if (s == NATS_OK)
        s = natsMsgHeader_Set(r, "X-Responder", "c");
    if (s == NATS_OK)
        s = natsConnection_PublishMsg(nc, r);
    if (s != NATS_OK)
        fprintf(stderr, "[c] responder: %s\n", status_name(s));
    natsMsg_Destroy(r);
    natsMsg_Destroy(m);
    free(data.b);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* {"Key":["v1","v2"],...} with the keys sorted */
static void headers_json(natsMsg *m, sb *obs)
{
    const char **keys = NULL;
    int nkeys = 0;
    sb_add(obs, "{");
    if (natsMsgHeader_Keys(m, &keys, &nkeys) == NATS_OK) {
        qsort(keys, (size_t)nkeys, sizeof(char *), cmp_str);
        for (int i = 0; i < nkeys; i++) {
            const char **vals = NULL;
            int nvals = 0;
            sb_add(obs, "%s", i ? "," : "");
            sb_str(obs, keys[i]);
            sb_add(obs, ":[");
            if (natsMsgHeader_Values(m, keys[i], &vals, &nvals) == NATS_OK) {
                for (int k = 0; k < nvals; k++) {
                    sb_add(obs, "%s", k ? "," : "");
                    sb_str(obs, vals[k]);
                }
                free((void *)vals);
            }
            sb_add(obs, "]");
        }
        free((void *)keys);
    }
    sb_add(obs, "}");
}

static int feat_request_reply_headers(sb *obs)
{
    natsConnection *responder = NULL, *nc = NULL;
    natsSubscription *sub = NULL;
    natsMsg *req = NULL, *reply = NULL;
    natsStatus s = connect_main(&responder);
    if (s == NATS_OK)
        s = natsConnection_Subscribe(&sub, responder, "core.echo", echo_cb, NULL);
    if (s == NATS_OK)
        s = natsConnection_Flush(responder);
    if (s == NATS_OK)
        s = connect_main(&nc);
    if (s == NATS_OK)
        s = natsMsg_Create(&req, "core.echo", NULL, "hello", 5);
    if (s == NATS_OK)
        s = natsMsgHeader_Set(req, "X-Request-Id", "42");
    if (s == NATS_OK)
        s = natsMsgHeader_Add(req, "X-Multi", "one");
    if (s == NATS_OK)
        s = natsMsgHeader_Add(req, "X-Multi", "two");
    if (s == NATS_OK)
        s = natsConnection_RequestMsg(&reply, nc, req, 3000);
    int st;
    if (s != NATS_OK)
        st = fail_st(obs, "request", s, 0);
    else {
        sb_add(obs, "{\"payload\":");
        sb_strn(obs, natsMsg_GetData(reply), natsMsg_GetDataLength(reply));
        sb_add(obs, ",\"headers\":");
        size_t at = obs->n;
        headers_json(reply, obs);
        const char *want = "{\"X-Multi\":[\"one\",\"two\"],\"X-Request-Id\":[\"42\"],\"X-Responder\":[\"c\"]}";
        st = (strcmp(obs->b + at, want) == 0 &&
              natsMsg_GetDataLength(reply) == 10 && memcmp(natsMsg_GetData(reply), "echo:hello", 10) == 0)
                 ? ST_OK : ST_FAIL;
        sb_add(obs, "}");
    }
    natsMsg_Destroy(reply);
    natsMsg_Destroy(req);
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(nc);
    natsConnection_Destroy(responder);
    return st;
}

static int feat_no_responders(sb *obs)
{
    natsConnection *nc = NULL;
    natsMsg *reply = NULL;
    natsStatus s = connect_main(&nc);
    if (s != NATS_OK)
        return fail_st(obs, "connect", s, 0);
    int64_t t0 = now_ms();
    s = natsConnection_RequestString(&reply, nc, "core.nobody", "anyone?", 3000);
    int64_t took = now_ms() - t0;
    /* the error must come from the server's status, not from the 3 s timeout */
    sb_add(obs, "{\"status\":\"%s\",\"before_timeout\":%s}", status_name(s), took < 2500 ? "true" : "false");
    natsMsg_Destroy(reply);
    natsConnection_Destroy(nc);
    return (s == NATS_NO_RESPONDERS && took < 2500) ? ST_OK : ST_FAIL;
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int handled;
    bool in_order;
    bool closed;
} dstate;

static void drain_cb(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
    (void)nc; (void)sub;
    dstate *d = closure;
    usleep(1000); /* a slow handler, so that messages are still pending when the drain starts */
    pthread_mutex_lock(&d->mu);
    if (atoi(natsMsg_GetData(m)) != d->handled)
        d->in_order = false;
    d->handled++;
    pthread_mutex_unlock(&d->mu);
    natsMsg_Destroy(m);
}

static void drain_closed_cb(natsConnection *nc, void *closure)
{
    (void)nc;
    dstate *d = closure;
    pthread_mutex_lock(&d->mu);
    d->closed = true;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static dstate d = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .in_order = true};

static int feat_drain(sb *obs)
{
    natsOptions *opts = NULL;
    natsConnection *nc = NULL;
    natsSubscription *sub = NULL;
    natsStatus s = base_opts(&opts, getenv("MATRIX_URL"), true);
    if (s == NATS_OK)
        s = natsOptions_SetClosedCB(opts, drain_closed_cb, &d);
    if (s == NATS_OK)
        s = natsConnection_Connect(&nc, opts);
    natsOptions_Destroy(opts);
    if (s == NATS_OK)
        s = natsConnection_Subscribe(&sub, nc, "core.drain", drain_cb, &d);
    if (s == NATS_OK)
        s = natsConnection_Flush(nc);
    for (int i = 0; s == NATS_OK && i < 100; i++) {
        char payload[8];
        snprintf(payload, sizeof(payload), "%d", i);
        s = natsConnection_PublishString(nc, "core.drain", payload);
    }
    if (s == NATS_OK)
        s = natsConnection_Flush(nc);
    if (s == NATS_OK)
        s = natsConnection_DrainTimeout(nc, 8000);
    int st;
    if (s != NATS_OK)
        st = fail_st(obs, "publish/drain", s, 0);
    else {
        int64_t deadline = now_ms() + 9000;
        pthread_mutex_lock(&d.mu);
        while (!d.closed && now_ms() < deadline)
            timed_wait(&d.cv, &d.mu, 100);
        sb_add(obs, "{\"handled\":%d,\"in_order\":%s,\"closed\":%s,\"is_closed\":%s}", d.handled,
               d.in_order ? "true" : "false", d.closed ? "true" : "false",
               natsConnection_IsClosed(nc) ? "true" : "false");
        st = (d.handled == 100 && d.in_order && d.closed) ? ST_OK : ST_FAIL;
        pthread_mutex_unlock(&d.mu);
    }
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(nc);
    return st;
}

/* ---------------------------------------------------------------- reconnects */

/* Ask the runner to act on the main server; block until it answers. */
static bool control(const char *what)
{
    char line[64];
    int n = snprintf(line, sizeof(line), "CONTROL %s\n", what);
    if (write(STDOUT_FILENO, line, (size_t)n) != n)
        return false;
    char c;
    size_t got = 0;
    char answer[64] = {0};
    for (;;) {
        ssize_t r = read(STDIN_FILENO, &c, 1);
        if (r <= 0)
            return false;
        if (c == '\n')
            break;
        if (got < sizeof(answer) - 1)
            answer[got++] = c;
    }
    fprintf(stderr, "[c] CONTROL %s -> %s\n", what, answer);
    return strcmp(answer, "done") == 0;
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int disconnected;
    int reconnected;
    int lame_duck;
} rstate;

static void r_disconnected_cb(natsConnection *nc, void *closure)
{
    (void)nc;
    rstate *r = closure;
    pthread_mutex_lock(&r->mu);
    r->disconnected++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void r_reconnected_cb(natsConnection *nc, void *closure)
{
    (void)nc;
    rstate *r = closure;
    pthread_mutex_lock(&r->mu);
    r->reconnected++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void r_lame_duck_cb(natsConnection *nc, void *closure)
{
    (void)nc;
    rstate *r = closure;
    pthread_mutex_lock(&r->mu);
    r->lame_duck++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static rstate r = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static int restart_js_before(natsConnection *nc, jsCtx **js, natsSubscription **psub, sb *obs);
static int restart_js_after(jsCtx *js, natsSubscription *psub, sb *obs);

static int reconnect_feature(sb *obs, const char *action, const char *subj)
{
    bool restart = strcmp(action, "restart") == 0;
    jsCtx *js = NULL;
    natsSubscription *psub = NULL;
    natsOptions *opts = NULL;
    natsConnection *nc = NULL, *pub = NULL;
    natsSubscription *sub = NULL;
    natsMsg *m = NULL;
    int st = ST_OK;
    natsStatus s = base_opts(&opts, getenv("MATRIX_URL"), true);
    if (s == NATS_OK)
        s = natsOptions_SetMaxReconnect(opts, -1);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectWait(opts, 100);
    if (s == NATS_OK)
        s = natsOptions_SetDisconnectedCB(opts, r_disconnected_cb, &r);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectedCB(opts, r_reconnected_cb, &r);
    if (s == NATS_OK)
        s = natsOptions_SetLameDuckModeCB(opts, r_lame_duck_cb, &r);
    if (s == NATS_OK)
        s = natsConnection_Connect(&nc, opts);
    natsOptions_Destroy(opts);
    if (s == NATS_OK)
        s = natsConnection_SubscribeSync(&sub, nc, subj);
    if (s == NATS_OK)
        s = natsConnection_Flush(nc);
    if (s != NATS_OK) {
        st = fail_st(obs, "connect/subscribe", s, 0);
        goto done;
    }
    /* before a restart: a file stream with a durable consumer that acked 1 of 3 */
    if (restart && (st = restart_js_before(nc, &js, &psub, obs)) != ST_OK)
        goto done;
    if (!control(action)) {
        st = fail_msg(obs, "no done from the runner", NULL);
        goto done;
    }
    /* the client reconnects by itself */
    int64_t deadline = now_ms() + 15000;
    pthread_mutex_lock(&r.mu);
    while (r.reconnected == 0 && now_ms() < deadline)
        timed_wait(&r.cv, &r.mu, 100);
    int reconnected = r.reconnected;
    pthread_mutex_unlock(&r.mu);
    if (reconnected == 0) {
        st = fail_msg(obs, "no reconnect within 15 s", NULL);
        goto done;
    }
    /* make sure the server has the resent subscription, then publish from elsewhere */
    s = natsConnection_Flush(nc);
    if (s == NATS_OK)
        s = connect_main(&pub);
    if (s == NATS_OK)
        s = natsConnection_PublishString(pub, subj, "after-restart");
    if (s == NATS_OK)
        s = natsConnection_Flush(pub);
    if (s == NATS_OK)
        s = natsSubscription_NextMsg(&m, sub, 5000);
    if (s != NATS_OK) {
        st = fail_st(obs, "after reconnect", s, 0);
        goto done;
    }
    pthread_mutex_lock(&r.mu);
    sb_add(obs, "{\"disconnected\":%s,\"reconnected\":%s,\"lame_duck_reported\":%s,\"got\":",
           r.disconnected > 0 ? "true" : "false", r.reconnected > 0 ? "true" : "false",
           r.lame_duck > 0 ? "true" : "false");
    pthread_mutex_unlock(&r.mu);
    sb_strn(obs, natsMsg_GetData(m), natsMsg_GetDataLength(m));
    if (natsMsg_GetDataLength(m) != 13 || memcmp(natsMsg_GetData(m), "after-restart", 13) != 0)
        st = ST_FAIL;
    /* ... all of which survived the restart */
    if (restart) {
        sb js_obs = {0};
        int jst = restart_js_after(js, psub, &js_obs);
        if (jst != ST_OK)
            st = jst;
        sb_add(obs, ",\"jetstream_after_restart\":%s", js_obs.b ? js_obs.b : "null");
        free(js_obs.b);
    }
    sb_add(obs, "}");
done:
    natsSubscription_Destroy(psub);
    jsCtx_Destroy(js);
    natsMsg_Destroy(m);
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(pub);
    natsConnection_Destroy(nc);
    return st;
}

static int feat_reconnect_restart(sb *obs) { return reconnect_feature(obs, "restart", "core.recon.restart"); }

static int feat_reconnect_lameduck(sb *obs)
{
    int st = reconnect_feature(obs, "lameduck", "core.recon.lameduck");
    /* a lame duck INFO is part of what the server must do: without the report, fail */
    if (st == ST_OK && strstr(obs->b, "\"lame_duck_reported\":true") == NULL)
        st = ST_FAIL;
    return st;
}

/* ---------------------------------------------------------------- JetStream */

static natsStatus js_connect(natsConnection **nc, jsCtx **js)
{
    natsStatus s = connect_main(nc);
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = 5000;
    if (s == NATS_OK)
        s = natsConnection_JetStream(js, *nc, &jo);
    return s;
}

static natsStatus add_stream(jsCtx *js, const char *name, const char *subject, jsErrCode *jerr)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    const char *subjects[1] = {subject};
    jsStreamConfig_Init(&cfg);
    cfg.Name = name;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    natsStatus s = js_AddStream(&si, js, &cfg, NULL, jerr);
    jsStreamInfo_Destroy(si);
    return s;
}

static int feat_js_publish_dedupe(sb *obs)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_connect(&nc, &js);
    if (s != NATS_OK) {
        int st = fail_st(obs, "connect", s, 0);
        jsCtx_Destroy(js);
        natsConnection_Destroy(nc);
        return st;
    }
    int st = ST_OK;
    s = add_stream(js, "MX", "mx.>", &jerr);
    if (s != NATS_OK) {
        st = fail_st(obs, "add stream MX", s, jerr);
        goto done;
    }
    sb_add(obs, "{\"acks\":[");
    /* a (with the option), a again (with the header), b (with the option) */
    for (int i = 0; i < 3; i++) {
        jsPubAck *pa = NULL;
        jsPubOptions po;
        jsPubOptions_Init(&po);
        char payload[8];
        snprintf(payload, sizeof(payload), "m%d", i + 1);
        if (i == 1) {
            natsMsg *m = NULL;
            s = natsMsg_Create(&m, "mx.dedupe", NULL, payload, (int)strlen(payload));
            if (s == NATS_OK)
                s = natsMsgHeader_Set(m, "Nats-Msg-Id", "a");
            if (s == NATS_OK)
                s = js_PublishMsg(&pa, js, m, &po, &jerr);
            natsMsg_Destroy(m);
        } else {
            po.MsgId = (i == 0) ? "a" : "b";
            s = js_Publish(&pa, js, "mx.dedupe", payload, (int)strlen(payload), &po, &jerr);
        }
        if (s != NATS_OK) {
            st = fail_st(obs, "publish", s, jerr);
            goto done;
        }
        sb_add(obs, "%s{\"stream\":", i ? "," : "");
        sb_str(obs, pa->Stream);
        sb_add(obs, ",\"seq\":%" PRIu64 ",\"duplicate\":%s}", pa->Sequence, pa->Duplicate ? "true" : "false");
        static const uint64_t want_seq[3] = {1, 1, 2};
        static const bool want_dup[3] = {false, true, false};
        if (strcmp(pa->Stream, "MX") != 0 || pa->Sequence != want_seq[i] || pa->Duplicate != want_dup[i])
            st = ST_FAIL;
        jsPubAck_Destroy(pa);
    }
    /* a publish that expects another last sequence is refused */
    {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.ExpectLastSeq = 1;
        jerr = 0;
        s = js_Publish(NULL, js, "mx.dedupe", "m4", 2, &po, &jerr);
        sb_add(obs, "],\"expect_last_seq_1\":[\"%s\",%d]", status_name(s), (int)jerr);
        if (s == NATS_OK || jerr != JSStreamWrongLastSequenceErr)
            st = ST_FAIL;
    }
    /* and one to a subject no stream takes has no responders */
    jerr = 0;
    s = js_Publish(NULL, js, "nostream.mx", "m5", 2, NULL, &jerr);
    sb_add(obs, ",\"no_stream\":\"%s\"", status_name(s));
    if (s != NATS_NO_RESPONDERS)
        st = ST_FAIL;
    jsStreamInfo *si = NULL;
    s = js_GetStreamInfo(&si, js, "MX", NULL, &jerr);
    if (s != NATS_OK) {
        st = fail_st(obs, "stream info", s, jerr);
        goto done;
    }
    sb_add(obs, ",\"stream_msgs\":%" PRIu64 ",\"last_seq\":%" PRIu64, si->State.Msgs, si->State.LastSeq);
    if (si->State.Msgs != 2)
        st = ST_FAIL;
    jsStreamInfo_Destroy(si);
    si = NULL;
    /* JetStream API refusals: [status, error code] each */
    {
        jsStreamConfig cfg;
        const char *other[1] = {"mx.a"};
        natsMsg *m = NULL;
        jsConsumerInfo *ci = NULL;
        sb_add(obs, ",\"api_errors\":{");
        jsStreamConfig_Init(&cfg);
        cfg.Name = "MX2";
        cfg.Subjects = other;
        cfg.SubjectsLen = 1;
        jerr = 0;
        s = js_AddStream(&si, js, &cfg, NULL, &jerr);
        jsStreamInfo_Destroy(si);
        si = NULL;
        sb_add(obs, "\"overlapping_subjects\":[\"%s\",%d]", status_name(s), (int)jerr);
        other[0] = "other.>";
        cfg.Name = "MX";
        jerr = 0;
        s = js_AddStream(&si, js, &cfg, NULL, &jerr);
        jsStreamInfo_Destroy(si);
        si = NULL;
        sb_add(obs, ",\"same_name_other_config\":[\"%s\",%d]", status_name(s), (int)jerr);
        jerr = 0;
        s = js_GetStreamInfo(&si, js, "NOPE", NULL, &jerr);
        jsStreamInfo_Destroy(si);
        si = NULL;
        sb_add(obs, ",\"stream_not_found\":[\"%s\",%d]", status_name(s), (int)jerr);
        jerr = 0;
        s = js_GetConsumerInfo(&ci, js, "MX", "NOPE", NULL, &jerr);
        jsConsumerInfo_Destroy(ci);
        sb_add(obs, ",\"consumer_not_found\":[\"%s\",%d]", status_name(s), (int)jerr);
        jerr = 0;
        s = js_GetMsg(&m, js, "MX", 99, NULL, &jerr);
        natsMsg_Destroy(m);
        sb_add(obs, ",\"msg_not_found\":[\"%s\",%d]", status_name(s), (int)jerr);
        /* a third message, then the second (now between two others) deleted twice */
        jerr = 0;
        s = js_Publish(NULL, js, "mx.dedupe", "m6", 2, NULL, &jerr);
        if (s == NATS_OK)
            s = js_DeleteMsg(js, "MX", 2, NULL, &jerr);
        sb_add(obs, ",\"delete_msg\":[\"%s\",%d]", status_name(s), (int)jerr);
        if (s != NATS_OK)
            st = ST_FAIL;
        jerr = 0;
        s = js_DeleteMsg(js, "MX", 2, NULL, &jerr);
        sb_add(obs, ",\"delete_msg_again\":[\"%s\",%d]", status_name(s), (int)jerr);
        sb_add(obs, "}");
    }
    sb_add(obs, "}");
done:
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return st;
}

/* ["payload",stream_seq,delivered] of a JetStream message */
static natsStatus js_msg_json(natsMsg *m, sb *obs, uint64_t *seq, uint64_t *delivered)
{
    jsMsgMetaData *meta = NULL;
    natsStatus s = natsMsg_GetMetaData(&meta, m);
    if (s != NATS_OK)
        return s;
    sb_add(obs, "[");
    sb_strn(obs, natsMsg_GetData(m), natsMsg_GetDataLength(m));
    sb_add(obs, ",%" PRIu64 ",%" PRIu64 "]", meta->Sequence.Stream, meta->NumDelivered);
    if (seq)
        *seq = meta->Sequence.Stream;
    if (delivered)
        *delivered = meta->NumDelivered;
    jsMsgMetaData_Destroy(meta);
    return NATS_OK;
}

static void consumer_info_json(jsConsumerInfo *ci, sb *obs)
{
    sb_add(obs, "{\"num_ack_pending\":%" PRId64 ",\"num_pending\":%" PRIu64 ",\"num_redelivered\":%" PRId64
                ",\"delivered\":[%" PRIu64 ",%" PRIu64 "],\"ack_floor\":[%" PRIu64 ",%" PRIu64 "]}",
           ci->NumAckPending, ci->NumPending, ci->NumRedelivered, ci->Delivered.Consumer, ci->Delivered.Stream,
           ci->AckFloor.Consumer, ci->AckFloor.Stream);
}

static int restart_js_before(natsConnection *nc, jsCtx **js, natsSubscription **psub, sb *obs)
{
    jsOptions jo;
    jsErrCode jerr = 0;
    natsMsgList l = {0};
    jsOptions_Init(&jo);
    jo.Wait = 5000;
    natsStatus s = natsConnection_JetStream(js, nc, &jo);
    if (s == NATS_OK)
        s = add_stream(*js, "MXR", "mxr.>", &jerr);
    for (int i = 1; s == NATS_OK && i <= 3; i++) {
        char subj[16], payload[8];
        jsPubOptions po;
        jsPubOptions_Init(&po);
        snprintf(subj, sizeof(subj), "mxr.%d", i);
        snprintf(payload, sizeof(payload), "r%d", i);
        po.MsgId = payload;
        s = js_Publish(NULL, *js, subj, payload, (int)strlen(payload), &po, &jerr);
    }
    if (s == NATS_OK) {
        jsSubOptions so;
        jsSubOptions_Init(&so);
        so.Stream = "MXR";
        s = js_PullSubscribe(psub, *js, "mxr.>", "KEEP", NULL, &so, &jerr);
    }
    if (s == NATS_OK)
        s = natsSubscription_Fetch(&l, *psub, 1, 3000, &jerr);
    if (s == NATS_OK && l.Count == 1)
        s = natsMsg_AckSync(l.Msgs[0], NULL, &jerr);
    natsMsgList_Destroy(&l);
    if (s != NATS_OK)
        return fail_st(obs, "jetstream before the restart", s, jerr);
    return ST_OK;
}

static int restart_js_after(jsCtx *js, natsSubscription *psub, sb *obs)
{
    jsErrCode jerr = 0;
    jsStreamInfo *si = NULL;
    jsConsumerInfo *ci = NULL;
    jsPubAck *pa = NULL;
    natsMsgList l = {0};
    int st = ST_OK;
    natsStatus s = js_GetStreamInfo(&si, js, "MXR", NULL, &jerr);
    if (s != NATS_OK)
        return fail_st(obs, "stream info after the restart", s, jerr);
    sb_add(obs, "{\"messages\":%" PRIu64 ",\"seqs\":[%" PRIu64 ",%" PRIu64 "]", si->State.Msgs, si->State.FirstSeq,
           si->State.LastSeq);
    if (si->State.Msgs != 3)
        st = ST_FAIL;
    jsStreamInfo_Destroy(si);
    s = js_GetConsumerInfo(&ci, js, "MXR", "KEEP", NULL, &jerr);
    if (s != NATS_OK)
        return fail_st(obs, "consumer info after the restart", s, jerr);
    sb_add(obs, ",\"consumer\":");
    consumer_info_json(ci, obs);
    if (ci->AckFloor.Stream != 1 || ci->NumPending != 2)
        st = ST_FAIL;
    jsConsumerInfo_Destroy(ci);
    /* the duplicate window is part of what survives */
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = "r1";
    s = js_Publish(&pa, js, "mxr.1", "r1", 2, &po, &jerr);
    if (s != NATS_OK)
        return fail_st(obs, "republish after the restart", s, jerr);
    sb_add(obs, ",\"republish_r1\":{\"seq\":%" PRIu64 ",\"duplicate\":%s}", pa->Sequence,
           pa->Duplicate ? "true" : "false");
    if (!pa->Duplicate)
        st = ST_FAIL;
    jsPubAck_Destroy(pa);
    /* and the consumer goes on where it was */
    s = natsSubscription_Fetch(&l, psub, 1, 3000, &jerr);
    if (s != NATS_OK || l.Count != 1) {
        natsMsgList_Destroy(&l);
        return fail_st(obs, "fetch after the restart", s, jerr);
    }
    uint64_t seq = 0, delivered = 0;
    sb_add(obs, ",\"next\":");
    s = js_msg_json(l.Msgs[0], obs, &seq, &delivered);
    if (s == NATS_OK)
        s = natsMsg_AckSync(l.Msgs[0], NULL, &jerr);
    natsMsgList_Destroy(&l);
    if (s != NATS_OK)
        return fail_st(obs, "ack after the restart", s, jerr);
    if (seq != 2 || delivered != 1)
        st = ST_FAIL;
    sb_add(obs, "}");
    return st;
}

static int feat_js_pull_consumer(sb *obs)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    natsSubscription *sub = NULL;
    jsErrCode jerr = 0;
    int st = ST_OK;
    natsStatus s = js_connect(&nc, &js);
    if (s != NATS_OK) {
        st = fail_st(obs, "connect", s, 0);
        goto done;
    }
    s = add_stream(js, "MXPULL", "mxpull.>", &jerr);
    if (s != NATS_OK) {
        st = fail_st(obs, "add stream MXPULL", s, jerr);
        goto done;
    }
    for (int i = 1; i <= 5; i++) {
        char payload[8];
        snprintf(payload, sizeof(payload), "p%d", i);
        s = js_Publish(NULL, js, "mxpull.q", payload, (int)strlen(payload), NULL, &jerr);
        if (s != NATS_OK) {
            st = fail_st(obs, "publish", s, jerr);
            goto done;
        }
    }
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.AckWait = 1000LL * 1000 * 1000; /* 1 s */
    s = js_PullSubscribe(&sub, js, "mxpull.q", "mxpull", NULL, &so, &jerr);
    if (s != NATS_OK) {
        st = fail_st(obs, "pull subscribe", s, jerr);
        goto done;
    }
    /* the first five */
    int64_t deadline = now_ms() + 5000;
    natsMsg *got[5] = {0};
    int ngot = 0;
    while (ngot < 5 && now_ms() < deadline) {
        natsMsgList l = {0};
        s = natsSubscription_Fetch(&l, sub, 5 - ngot, 2000, &jerr);
        for (int i = 0; i < l.Count; i++) {
            got[ngot++] = l.Msgs[i];
            l.Msgs[i] = NULL;
        }
        natsMsgList_Destroy(&l);
        if (s != NATS_OK && s != NATS_TIMEOUT)
            break;
    }
    if (ngot != 5) {
        st = fail_st(obs, "fetch 5", s, jerr);
        for (int i = 0; i < ngot; i++)
            natsMsg_Destroy(got[i]);
        goto done;
    }
    s = NATS_OK;
    sb_add(obs, "{\"first\":[");
    for (int i = 0; i < 5 && s == NATS_OK; i++) {
        s = js_msg_json(got[i], obs, NULL, NULL);
        if (i < 4)
            sb_add(obs, ",");
    }
    /* ack p1, p2, p5; nak p3; let p4's ack wait expire */
    if (s == NATS_OK)
        s = natsMsg_AckSync(got[0], NULL, &jerr);
    if (s == NATS_OK)
        s = natsMsg_AckSync(got[1], NULL, &jerr);
    if (s == NATS_OK)
        s = natsMsg_Nak(got[2], NULL);
    if (s == NATS_OK)
        s = natsMsg_AckSync(got[4], NULL, &jerr);
    for (int i = 0; i < 5; i++)
        natsMsg_Destroy(got[i]);
    if (s != NATS_OK) {
        st = fail_st(obs, "ack/nak", s, jerr);
        goto done;
    }
    /* the two redeliveries: p3 at once, p4 after its ack wait; each is acked as soon as
     * it comes (one at a time, so that p3's own ack wait cannot run out meanwhile) */
    uint64_t seqs[2] = {0, 0};
    sb parts[2] = {{0}, {0}};
    int nagain = 0;
    deadline = now_ms() + 6000;
    while (nagain < 2 && now_ms() < deadline) {
        natsMsgList l = {0};
        s = natsSubscription_Fetch(&l, sub, 1, 3000, &jerr);
        for (int i = 0; i < l.Count && nagain < 2; i++) {
            s = js_msg_json(l.Msgs[i], &parts[nagain], &seqs[nagain], NULL);
            if (s == NATS_OK)
                s = natsMsg_AckSync(l.Msgs[i], NULL, &jerr);
            nagain++;
        }
        natsMsgList_Destroy(&l);
        if (s != NATS_OK && s != NATS_TIMEOUT)
            break;
    }
    if (nagain != 2) {
        st = fail_st(obs, "fetch redeliveries", s, jerr);
        free(parts[0].b);
        free(parts[1].b);
        goto done;
    }
    /* by stream sequence: were the process slow, p4's ack wait could end before p3 is fetched */
    int a = (seqs[0] <= seqs[1]) ? 0 : 1;
    sb_add(obs, "],\"redelivered\":[%s,%s]", parts[a].b ? parts[a].b : "null", parts[1 - a].b ? parts[1 - a].b : "null");
    if (!(seqs[a] == 3 && seqs[1 - a] == 4))
        st = ST_FAIL;
    free(parts[0].b);
    free(parts[1].b);
    if (s != NATS_OK) {
        st = fail_st(obs, "ack redelivered", s, jerr);
        goto done;
    }
    /* nothing more comes: everything is acked */
    {
        natsMsgList l = {0};
        s = natsSubscription_Fetch(&l, sub, 1, 1500, &jerr);
        sb_add(obs, ",\"extra\":%d", l.Count);
        if (l.Count != 0)
            st = ST_FAIL;
        natsMsgList_Destroy(&l);
    }
    /* a no-wait pull on a consumer with nothing to deliver gets nothing (nats.c 3.4 then
     * waits for the request's expiry before it returns, on both servers) */
    {
        natsMsgList l = {0};
        jsFetchRequest fr;
        jsFetchRequest_Init(&fr);
        fr.Batch = 1;
        fr.NoWait = true;
        fr.Expires = 500LL * 1000 * 1000;
        s = natsSubscription_FetchRequest(&l, sub, &fr);
        sb_add(obs, ",\"no_wait\":[\"%s\",%d]", status_name(s), l.Count);
        if (l.Count != 0)
            st = ST_FAIL;
        natsMsgList_Destroy(&l);
    }
    jsConsumerInfo *ci = NULL;
    s = js_GetConsumerInfo(&ci, js, "MXPULL", "mxpull", NULL, &jerr);
    if (s != NATS_OK) {
        st = fail_st(obs, "consumer info", s, jerr);
        goto done;
    }
    sb_add(obs, ",\"info\":");
    consumer_info_json(ci, obs);
    sb_add(obs, "}");
    if (ci->NumAckPending != 0 || ci->NumPending != 0)
        st = ST_FAIL;
    jsConsumerInfo_Destroy(ci);
done:
    natsSubscription_Destroy(sub);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return st;
}

static int feat_js_push_consumer(sb *obs)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    natsSubscription *sub = NULL;
    jsErrCode jerr = 0;
    int st = ST_OK;
    natsMsg *got[3] = {0};
    natsStatus s = js_connect(&nc, &js);
    if (s != NATS_OK) {
        st = fail_st(obs, "connect", s, 0);
        goto done;
    }
    s = add_stream(js, "MXPUSH", "mxpush.>", &jerr);
    if (s != NATS_OK) {
        st = fail_st(obs, "add stream MXPUSH", s, jerr);
        goto done;
    }
    for (int i = 1; i <= 3; i++) {
        char payload[8];
        snprintf(payload, sizeof(payload), "s%d", i);
        s = js_Publish(NULL, js, "mxpush.q", payload, (int)strlen(payload), NULL, &jerr);
        if (s != NATS_OK) {
            st = fail_st(obs, "publish", s, jerr);
            goto done;
        }
    }
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.ManualAck = true;
    so.Config.Durable = "mxpush";
    so.Config.DeliverSubject = "deliver.mxpush";
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.AckWait = 30LL * 1000 * 1000 * 1000;
    s = js_SubscribeSync(&sub, js, "mxpush.q", NULL, &so, &jerr);
    if (s != NATS_OK) {
        st = fail_st(obs, "subscribe", s, jerr);
        goto done;
    }
    sb_add(obs, "{\"deliveries\":[");
    for (int i = 0; i < 3 && s == NATS_OK; i++) {
        s = natsSubscription_NextMsg(&got[i], sub, 3000);
        if (s == NATS_OK)
            s = js_msg_json(got[i], obs, NULL, NULL);
        sb_add(obs, ",");
    }
    if (s != NATS_OK) {
        st = fail_st(obs, "first deliveries", s, 0);
        goto done;
    }
    /* ack s1, nak s2, ack s3: s2 comes again */
    s = natsMsg_AckSync(got[0], NULL, &jerr);
    if (s == NATS_OK)
        s = natsMsg_Nak(got[1], NULL);
    if (s == NATS_OK)
        s = natsMsg_AckSync(got[2], NULL, &jerr);
    if (s != NATS_OK) {
        st = fail_st(obs, "ack/nak", s, jerr);
        goto done;
    }
    natsMsg *m = NULL;
    uint64_t seq = 0, delivered = 0;
    s = natsSubscription_NextMsg(&m, sub, 3000);
    if (s == NATS_OK)
        s = js_msg_json(m, obs, &seq, &delivered);
    if (s == NATS_OK)
        s = natsMsg_AckSync(m, NULL, &jerr);
    natsMsg_Destroy(m);
    m = NULL;
    if (s != NATS_OK) {
        st = fail_st(obs, "redelivery", s, jerr);
        goto done;
    }
    if (seq != 2 || delivered != 2)
        st = ST_FAIL;
    /* and nothing else */
    s = natsSubscription_NextMsg(&m, sub, 500);
    sb_add(obs, "],\"extra\":%d", s == NATS_OK ? 1 : 0);
    if (s == NATS_OK)
        st = ST_FAIL;
    natsMsg_Destroy(m);
    jsConsumerInfo *ci = NULL;
    s = js_GetConsumerInfo(&ci, js, "MXPUSH", "mxpush", NULL, &jerr);
    if (s != NATS_OK) {
        st = fail_st(obs, "consumer info", s, jerr);
        goto done;
    }
    sb_add(obs, ",\"info\":");
    consumer_info_json(ci, obs);
    sb_add(obs, "}");
    if (ci->NumAckPending != 0 || ci->NumPending != 0)
        st = ST_FAIL;
    jsConsumerInfo_Destroy(ci);
done:
    for (int i = 0; i < 3; i++)
        natsMsg_Destroy(got[i]);
    natsSubscription_Destroy(sub);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return st;
}

/* ---------------------------------------------------------------- KV */

static const char *op_name(kvOperation op)
{
    switch (op) {
    case kvOp_Put: return "put";
    case kvOp_Delete: return "del";
    case kvOp_Purge: return "purge";
    default: return "unknown";
    }
}

/* ["key","op",revision,"value"] */
static void kv_entry_json(kvEntry *e, sb *obs)
{
    sb_add(obs, "[");
    sb_str(obs, kvEntry_Key(e));
    sb_add(obs, ",\"%s\",%" PRIu64 ",", op_name(kvEntry_Operation(e)), kvEntry_Revision(e));
    sb_strn(obs, kvEntry_Value(e), kvEntry_ValueLen(e));
    sb_add(obs, "]");
}

static int feat_kv(sb *obs)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    kvStore *kv = NULL;
    kvWatcher *w = NULL;
    kvEntry *e = NULL;
    int st = ST_OK;
    const char *step = "connect";
    uint64_t rev = 0;
    sb texts = {0};
    natsStatus s = js_connect(&nc, &js);
    if (s == NATS_OK) {
        kvConfig cfg;
        kvConfig_Init(&cfg);
        cfg.Bucket = "mxkv";
        cfg.History = 5;
        step = "create bucket";
        s = js_CreateKeyValue(&kv, js, &cfg);
    }
    if (s == NATS_OK) {
        step = "watch";
        s = kvStore_WatchAll(&w, kv, NULL);
    }
    if (s == NATS_OK) {
        /* an empty bucket: the watcher says "initial values done" with no entry */
        s = kvWatcher_Next(&e, w, 3000);
        if (s == NATS_OK && e != NULL) {
            kvEntry_Destroy(e);
            e = NULL;
            s = NATS_MISMATCH;
        }
    }
    if (s != NATS_OK) {
        st = fail_st(obs, step, s, 0);
        goto done;
    }
    sb_add(obs, "{\"put\":[");
    step = "put k1";
    s = kvStore_PutString(&rev, kv, "k1", "v1");
    if (s != NATS_OK) goto failed;
    sb_add(obs, "%" PRIu64, rev);
    step = "get k1";
    s = kvStore_Get(&e, kv, "k1");
    if (s != NATS_OK) goto failed;
    sb_add(obs, "],\"get\":");
    kv_entry_json(e, obs);
    kvEntry_Destroy(e);
    e = NULL;
    step = "update k1";
    s = kvStore_UpdateString(&rev, kv, "k1", "v2", 1);
    if (s != NATS_OK) goto failed;
    sb_add(obs, ",\"update\":%" PRIu64, rev);
    /* an update from a stale revision is refused */
    s = kvStore_UpdateString(&rev, kv, "k1", "v3", 1);
    sb_add(obs, ",\"stale_update\":\"%s\"", status_name(s));
    sb_add(&texts, "{\"stale_update\":");
    sb_str(&texts, s != NATS_OK ? last_error_text() : NULL);
    if (s == NATS_OK)
        st = ST_FAIL;
    /* creating a key that exists is refused */
    s = kvStore_CreateString(&rev, kv, "k1", "v4");
    sb_add(obs, ",\"create_existing\":\"%s\"", status_name(s));
    sb_add(&texts, ",\"create_existing\":");
    sb_str(&texts, s != NATS_OK ? last_error_text() : NULL);
    sb_add(&texts, "}");
    if (s == NATS_OK)
        st = ST_FAIL;
    step = "get k1 after update";
    s = kvStore_Get(&e, kv, "k1");
    if (s != NATS_OK) goto failed;
    sb_add(obs, ",\"get_updated\":");
    kv_entry_json(e, obs);
    kvEntry_Destroy(e);
    e = NULL;
    step = "put k2";
    s = kvStore_PutString(&rev, kv, "k2", "x");
    if (s != NATS_OK) goto failed;
    sb_add(obs, ",\"put_k2\":%" PRIu64, rev);
    step = "delete k1";
    s = kvStore_Delete(kv, "k1");
    if (s != NATS_OK) goto failed;
    s = kvStore_Get(&e, kv, "k1");
    sb_add(obs, ",\"get_deleted\":\"%s\"", status_name(s));
    if (s == NATS_OK) {
        st = ST_FAIL;
        kvEntry_Destroy(e);
        e = NULL;
    }
    step = "purge k2";
    s = kvStore_Purge(kv, "k2", NULL);
    if (s != NATS_OK) goto failed;
    step = "put k3";
    s = kvStore_PutString(&rev, kv, "k3", "z");
    if (s != NATS_OK) goto failed;
    sb_add(obs, ",\"put_k3\":%" PRIu64, rev);
    step = "keys";
    {
        kvKeysList keys = {0};
        s = kvStore_Keys(&keys, kv, NULL);
        if (s != NATS_OK) goto failed;
        qsort(keys.Keys, (size_t)keys.Count, sizeof(char *), cmp_str);
        sb_add(obs, ",\"keys\":[");
        for (int i = 0; i < keys.Count; i++) {
            sb_add(obs, "%s", i ? "," : "");
            sb_str(obs, keys.Keys[i]);
        }
        sb_add(obs, "]");
        if (keys.Count != 1 || strcmp(keys.Keys[0], "k3") != 0)
            st = ST_FAIL;
        kvKeysList_Destroy(&keys);
    }
    step = "history";
    {
        kvEntryList h = {0};
        s = kvStore_History(&h, kv, "k1", NULL);
        if (s != NATS_OK) goto failed;
        sb_add(obs, ",\"history_k1\":[");
        for (int i = 0; i < h.Count; i++) {
            sb_add(obs, "%s", i ? "," : "");
            kv_entry_json(h.Entries[i], obs);
        }
        sb_add(obs, "]");
        if (h.Count != 3)
            st = ST_FAIL;
        kvEntryList_Destroy(&h);
    }
    step = "watch";
    {
        sb_add(obs, ",\"watched\":[");
        int n = 0;
        for (;;) {
            s = kvWatcher_Next(&e, w, n < 6 ? 3000 : 300);
            if (s != NATS_OK)
                break;
            if (e == NULL)
                continue;
            sb_add(obs, "%s", n ? "," : "");
            kv_entry_json(e, obs);
            kvEntry_Destroy(e);
            e = NULL;
            n++;
        }
        sb_add(obs, "]");
        if (n != 6)
            st = ST_FAIL;
    }
    step = "status";
    {
        kvStatus *ks = NULL;
        s = kvStore_Status(&ks, kv);
        if (s != NATS_OK) goto failed;
        sb_add(obs, ",\"status\":{\"bucket\":");
        sb_str(obs, kvStatus_Bucket(ks));
        sb_add(obs, ",\"values\":%" PRIu64 ",\"history\":%" PRId64 "}", kvStatus_Values(ks), kvStatus_History(ks));
        kvStatus_Destroy(ks);
    }
    sb_add(obs, "}");
    /* the expected story, revision by revision */
    static const char *want =
        "{\"put\":[1],\"get\":[\"k1\",\"put\",1,\"v1\"],\"update\":2,\"stale_update\":\"NATS_ERR\","
        "\"create_existing\":\"NATS_ERR\",\"get_updated\":[\"k1\",\"put\",2,\"v2\"],\"put_k2\":3,"
        "\"get_deleted\":\"NATS_NOT_FOUND\",\"put_k3\":6,\"keys\":[\"k3\"],"
        "\"history_k1\":[[\"k1\",\"put\",1,\"v1\"],[\"k1\",\"put\",2,\"v2\"],[\"k1\",\"del\",4,\"\"]],"
        "\"watched\":[[\"k1\",\"put\",1,\"v1\"],[\"k1\",\"put\",2,\"v2\"],[\"k2\",\"put\",3,\"x\"],"
        "[\"k1\",\"del\",4,\"\"],[\"k2\",\"purge\",5,\"\"],[\"k3\",\"put\",6,\"z\"]],"
        "\"status\":{\"bucket\":\"mxkv\",\"values\":5,\"history\":5}}";
    if (strcmp(obs->b, want) != 0)
        st = ST_FAIL;
    /* and the server's words for the two refusals */
    obs->n--;
    sb_add(obs, ",\"error_texts\":%s}", texts.b);
    goto done;
failed:
    st = fail_st(obs, step, s, 0);
done:
    free(texts.b);
    kvEntry_Destroy(e);
    kvWatcher_Destroy(w);
    kvStore_Destroy(kv);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return st;
}

/* ---------------------------------------------------------------- not in nats.c 3.4 */

static int feat_object_store(sb *obs)
{
    sb_add(obs, "{\"reason\":\"nats.c %s has no object store API\"}", NATS_VERSION_STRING);
    return ST_SKIP;
}

static int feat_websocket(sb *obs)
{
    sb_add(obs, "{\"reason\":\"nats.c %s has no WebSocket transport\"}", NATS_VERSION_STRING);
    return ST_SKIP;
}

/* ---------------------------------------------------------------- driver */

typedef int (*feat_fn)(sb *);

static const struct {
    const char *name;
    feat_fn fn;
    int timeout_s;
} FEATURES[] = {
    {"connect_user", feat_connect_user, 15},
    {"connect_token", feat_connect_token, 15},
    {"connect_nkey", feat_connect_nkey, 15},
    {"connect_creds", feat_connect_creds, 15},
    {"tls", feat_tls, 15},
    {"pubsub_wildcard", feat_pubsub_wildcard, 15},
    {"queue_group", feat_queue_group, 15},
    {"request_reply_headers", feat_request_reply_headers, 15},
    {"no_responders", feat_no_responders, 15},
    {"drain", feat_drain, 15},
    {"js_publish_dedupe", feat_js_publish_dedupe, 15},
    {"js_pull_consumer", feat_js_pull_consumer, 20},
    {"js_push_consumer", feat_js_push_consumer, 15},
    {"kv", feat_kv, 20},
    {"object_store", feat_object_store, 5},
    {"websocket", feat_websocket, 5},
    {"reconnect_restart", feat_reconnect_restart, 45},
    {"reconnect_lameduck", feat_reconnect_lameduck, 45},
};

static const char *ST_NAMES[] = {"ok", "fail", "skip"};

/* In the child: run one feature, send its RESULT line to the parent, clean up. */
static void child(int idx, int fd)
{
    natsStatus s = nats_Open(-1);
    sb obs = {0};
    int st;
    if (s != NATS_OK)
        st = fail_st(&obs, "nats_Open", s, 0);
    else
        st = FEATURES[idx].fn(&obs);
    if (obs.b == NULL)
        sb_add(&obs, "{}");
    sb line = {0};
    sb_add(&line, "RESULT %s %s %s\n", FEATURES[idx].name, ST_NAMES[st], obs.b);
    size_t off = 0;
    while (off < line.n) {
        ssize_t w = write(fd, line.b + off, line.n - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    close(fd);
    free(line.b);
    free(obs.b);
    nats_CloseAndWait(5000);
    exit(0);
}

static void run_feature(int idx, int scale)
{
    int fds[2];
    const char *name = FEATURES[idx].name;
    fflush(stdout);
    fflush(stderr);
    if (pipe(fds) != 0) {
        printf("RESULT %s fail {\"error\":\"pipe\"}\n", name);
        fflush(stdout);
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        printf("RESULT %s fail {\"error\":\"fork\"}\n", name);
        fflush(stdout);
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        child(idx, fds[1]);
    }
    close(fds[1]);
    sb got = {0};
    int64_t deadline = now_ms() + (int64_t)FEATURES[idx].timeout_s * 1000 * scale;
    bool eof = false, timed_out = false;
    while (!eof) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int r = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        char buf[4096];
        ssize_t n = read(fds[0], buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            eof = true;
        else {
            sb_reserve(&got, (size_t)n);
            memcpy(got.b + got.n, buf, (size_t)n);
            got.n += (size_t)n;
            got.b[got.n] = 0;
        }
    }
    close(fds[0]);
    bool complete = got.n > 0 && got.b[got.n - 1] == '\n';
    if (complete) {
        fputs(got.b, stdout);
    } else if (timed_out) {
        printf("RESULT %s fail {\"error\":\"timeout\",\"seconds\":%d}\n", name, FEATURES[idx].timeout_s);
    }
    fflush(stdout);
    /* the child cleans up after its result; give it a little time, then end it */
    int status = 0;
    int64_t grace = now_ms() + (complete ? 10000 : 0) * scale;
    pid_t w;
    while ((w = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() < grace)
        usleep(20 * 1000);
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        if (complete)
            fprintf(stderr, "[c] %s: cleanup did not finish, killed\n", name);
    }
    if (!complete && !timed_out) {
        if (WIFSIGNALED(status))
            printf("RESULT %s fail {\"error\":\"crashed\",\"signal\":%d}\n", name, WTERMSIG(status));
        else
            printf("RESULT %s fail {\"error\":\"no result\",\"exit\":%d}\n", name, WEXITSTATUS(status));
        fflush(stdout);
    }
    free(got.b);
}

int main(int argc, char **argv)
{
    /* optional arguments: the features to run (all by default) */
    const char *sc = getenv("MATRIX_C_TIMEOUT_SCALE");
    if (sc != NULL && atoi(sc) > 1)
        timeout_scale = atoi(sc);
    signal(SIGPIPE, SIG_IGN);
    for (size_t i = 0; i < sizeof(FEATURES) / sizeof(FEATURES[0]); i++) {
        bool wanted = argc < 2;
        for (int a = 1; a < argc; a++)
            if (strcmp(argv[a], FEATURES[i].name) == 0)
                wanted = true;
        if (wanted)
            run_feature((int)i, timeout_scale);
    }
    return 0;
}
