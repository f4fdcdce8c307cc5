/*
 * push.h - the agent's push listener: POST /v1/desired-state from the
 * server, signed with the node's push secret (docs/agent.md, "Security").
 *
 *   X-Gpupool-Timestamp: <unix seconds>
 *   X-Gpupool-Signature: v1=<hex HMAC-SHA256(push_secret, timestamp "." body)>
 *
 * A missing or bad signature, or a timestamp more than 300 s off, is
 * answered 401 and the body is never parsed. A good one is handed to the
 * submit callback, which applies it (a generation at or below the applied
 * one is a no-op) and returns the observed generation: 200
 * {"observed_generation":G}.
 */
#ifndef GP_AGENT_PUSH_H
#define GP_AGENT_PUSH_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#define PUSH_MAX_SKEW 300
#define PUSH_MAX_BODY (1024 * 1024)

/* Verify a signature header value against secret, timestamp and body;
 * now is the current unix time. Returns 0 when valid, -1 otherwise with
 * why ("bad signature", "stale timestamp" ...). */
int push_verify(const char *secret, const char *timestamp, const char *signature, const char *body,
    size_t body_len, long long now, const char **why);

/* The signature header value for body ("v1=<hex>") into out (>= 68 bytes). */
int push_sign(const char *secret, const char *timestamp, const char *body, size_t body_len,
    char *out, size_t outlen);

/* Apply a verified document; returns the observed generation, or -1 with
 * err when the document is malformed (answered 400). */
typedef long long (*push_submit_fn)(void *ctx, struct json_object *doc, char *err, size_t errlen);
/* Copy the current push secret into buf; false when none yet (503). */
typedef bool (*push_secret_fn)(void *ctx, char *buf, size_t len);

struct push_server;

/* Listen on host:port ("0.0.0.0:9400", "127.0.0.1:0"); NULL with err. */
struct push_server *push_start(const char *listen, push_submit_fn submit, push_secret_fn secret,
    void *ctx, char *err, size_t errlen);

/* The port actually bound. */
int push_port(const struct push_server *p);

void push_stop(struct push_server *p);

#endif
