/*
 * common.c - daemon start-up shared by the HTTP baselines: the same
 * libmicrohttpd flags, options and thread count as gpupoold.
 */
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sigset_t stop_signals;

/* GPUPOOL_THREADS (1 to 256) or 2 x online CPUs, as config_load does. */
static unsigned int
bench_threads(void)
{
	const char *v = getenv("GPUPOOL_THREADS");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	if (v != NULL && *v != '\0') {
		char *end;
		long n;

		errno = 0;
		n = strtol(v, &end, 10);
		if (errno == 0 && *end == '\0' && n >= 1 && n <= 256)
			return (unsigned int)n;
		fprintf(stderr, "GPUPOOL_THREADS must be an integer from 1 to 256\n");
		exit(2);
	}
	return ncpu > 0 ? (unsigned int)(ncpu * 2) : 4;
}

int
bench_parse_port(const char *s)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || n < 0 || n > 65535)
		return -1;
	return (int)n;
}

struct MHD_Daemon *
bench_start(int port, MHD_AccessHandlerCallback handler, void *cls,
    MHD_RequestCompletedCallback completed)
{
	struct sockaddr_in addr;
	struct MHD_Daemon *d;

	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)port);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* Keep in step with http_start() in server/http/server.c. */
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
		MHD_USE_TURBO | MHD_USE_ERROR_LOG,
	    0, NULL, NULL, handler, cls, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
	    MHD_OPTION_THREAD_POOL_SIZE, bench_threads(), MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned int)1024, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)256,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)30, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	    (size_t)(64 * 1024), MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
	    MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned int)1, MHD_OPTION_END);
	if (d == NULL)
		fprintf(stderr, "could not start libmicrohttpd on port %d\n", port);
	return d;
}

void
bench_block_signals(void)
{
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
}

void
bench_wait_for_signal(void)
{
	int sig;

	while (sigwait(&stop_signals, &sig) != 0)
		;
}
