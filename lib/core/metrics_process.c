/*
 * metrics_process.c - the process collector (metrics_registry.h):
 * gpupool_build_info and the process_* families, read from /proc.
 */
#include "metrics_registry.h"

#include <dirent.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef GP_VERSION
#define GP_VERSION "0.0.0"
#endif
#ifndef GP_COMMIT
#define GP_COMMIT "unknown"
#endif

/* The process's start, epoch seconds: boot time plus its start in ticks. */
static double
process_start_time(unsigned long long starttime, long ticks)
{
	double boot = 0;
	char line[256];
	FILE *f = fopen("/proc/stat", "r");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "btime %lf", &boot) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return boot + (double)starttime / (double)ticks;
}

/* Open descriptors, less ".", ".." and the directory's own. */
static int
process_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int fds = 0;

	if (d == NULL)
		return 0;
	while (readdir(d) != NULL)
		fds++;
	closedir(d);
	return fds - 3;
}

void
metrics_process_collect(struct strbuf *b, struct arena *a, void *arg)
{
	static double start_time;
	long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	unsigned long utime = 0, stime = 0, vsize = 0;
	long rss = 0;
	unsigned long long starttime = 0;
	struct rlimit rl;
	FILE *f;

	(void)a;
	(void)arg;
	metrics_family(b, "gpupool_build_info", "gauge", "The running build (always 1).");
	strbuf_printf(b, "gpupool_build_info{version=\"%s\",commit=\"%s\"} 1\n", GP_VERSION,
	    GP_COMMIT);
	f = fopen("/proc/self/stat", "r");
	if (f != NULL) {
		/* fields 14, 15 (utime, stime), 22 (starttime), 23 (vsize), 24 (rss) */
		if (fscanf(f,
			"%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d "
			"%*d %*d %llu %lu %ld",
			&utime, &stime, &starttime, &vsize, &rss) != 5)
			utime = stime = 0;
		fclose(f);
	}
	if (start_time == 0 && ticks > 0)
		start_time = process_start_time(starttime, ticks);
	metrics_single(b, "process_cpu_seconds_total", "counter",
	    "User and system CPU time spent in seconds.", "%.2f",
	    ticks > 0 ? (double)(utime + stime) / (double)ticks : 0.0);
	metrics_single(b, "process_resident_memory_bytes", "gauge",
	    "Resident memory size in bytes.", "%lld", (long long)rss * page);
	metrics_single(b, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
	    "%lu", vsize);
	metrics_single(b, "process_open_fds", "gauge", "Number of open file descriptors.", "%d",
	    process_open_fds());
	metrics_single(b, "process_start_time_seconds", "gauge",
	    "Start time of the process since the epoch in seconds.", "%.2f", start_time);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		metrics_single(b, "process_max_fds", "gauge",
		    "Maximum number of open file descriptors.", "%llu",
		    (unsigned long long)rl.rlim_cur);
}
