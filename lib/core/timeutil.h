/*
 * timeutil.h - wall and monotonic clocks, RFC 3339 UTC formatting and parsing.
 */
#ifndef GP_CORE_TIMEUTIL_H
#define GP_CORE_TIMEUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Microseconds since the epoch (CLOCK_REALTIME). */
int64_t time_now_us(void);

/* Microseconds from CLOCK_MONOTONIC, for durations. */
int64_t time_mono_us(void);

/* "2026-11-22T01:02:03.456Z" into buf (at least 32 bytes). */
void time_format_rfc3339_ms(int64_t us, char *buf, size_t len);

/* "2026-11-22T01:02:03Z" into buf (at least 32 bytes). */
void time_format_rfc3339(int64_t us, char *buf, size_t len);

/*
 * Parse RFC 3339 ("2026-11-22T01:02:03Z", fractional seconds and
 * "+hh:mm" offsets accepted) into microseconds since the epoch.
 * Returns -1 on malformed input.
 */
int time_parse_rfc3339(const char *s, int64_t *out_us);

/*
 * A billing period's name, "YYYY-MM": a month 01-12 of a year 1970-9999
 * (the years the API's times cover). The one rule every endpoint that
 * takes a period uses.
 */
bool time_period_valid(const char *s);

/*
 * Exponential back-off with jitter, in the caller's unit: first doubled
 * `doublings` times (stopping at max), then a value from half of that to
 * all of it, drawn from random (a uniform value, e.g. from rand_r or
 * getrandom). The pusher's retries, the agent's and the database's
 * reconnects use it.
 */
int64_t time_backoff(int64_t first, int doublings, int64_t max, uint32_t random);

#endif
