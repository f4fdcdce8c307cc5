/*
 * baseline_trivial.c - baseline (a) of tests/bench/http: the cheapest
 * useful libmicrohttpd handler, answering every request with a small
 * JSON body. Same daemon flags and thread count as gpupoold, and like
 * gpupoold it replies on the second callback so that libmicrohttpd
 * 0.9.75 keeps the connection alive.
 *
 *   bench_http_trivial PORT        (runs until SIGINT or SIGTERM)
 */
#include "common.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char body[] = "{\"status\":\"ok\"}";
static char seen; /* con_cls marker: the first callback happened */

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
    const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)cls;
	(void)url;
	(void)method;
	(void)version;
	(void)upload_data;
	if (*con_cls == NULL) {
		*con_cls = &seen;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	r = MHD_create_response_from_buffer(sizeof(body) - 1, (void *)(uintptr_t)body,
	    MHD_RESPMEM_PERSISTENT);
	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	*con_cls = NULL;
}

int
main(int argc, char **argv)
{
	struct MHD_Daemon *d;
	int port;

	if (argc != 2 || (port = bench_parse_port(argv[1])) < 0) {
		fprintf(stderr, "usage: bench_http_trivial PORT\n");
		return 2;
	}
	bench_block_signals();
	d = bench_start(port, on_request, NULL, on_completed);
	if (d == NULL)
		return 1;
	printf("listening on 127.0.0.1:%d\n", port);
	fflush(stdout);
	bench_wait_for_signal();
	MHD_stop_daemon(d);
	return 0;
}
