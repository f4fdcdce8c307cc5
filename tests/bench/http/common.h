/*
 * common.h - what the two HTTP baselines share: the libmicrohttpd flags,
 * limits and thread count of gpupoold (server/http/server.c and
 * server/config.c), so that the baselines differ from it only in the
 * work done per request.
 */
#ifndef GP_BENCH_HTTP_COMMON_H
#define GP_BENCH_HTTP_COMMON_H

#include <microhttpd.h>

/*
 * Start a daemon on 127.0.0.1:port with gpupoold's flags and options
 * (internal polling thread pool, epoll, GPUPOOL_THREADS or 2 x CPUs
 * threads). Returns NULL after printing why on failure.
 */
struct MHD_Daemon *bench_start(int port, MHD_AccessHandlerCallback handler, void *cls,
    MHD_RequestCompletedCallback completed);

/* Parse a port from text; -1 when it is not an integer from 0 to 65535. */
int bench_parse_port(const char *s);

/* Block until SIGINT or SIGTERM arrives; call before any thread starts. */
void bench_block_signals(void);
void bench_wait_for_signal(void);

#endif
