/*
 * telemetry.h - the telemetry worker (one replica at a time, through its
 * leadership lock): keeps the daily partitions of gpu_metric_samples
 * (created ahead, dropped past retention), recomputes the hourly roll-ups
 * of the last hours, and raises / resolves idle (hoarding) alerts.
 */
#ifndef GP_WORKERS_TELEMETRY_H
#define GP_WORKERS_TELEMETRY_H

struct periodic;

struct telemetry_config {
	int interval_s;        /* between passes */
	int retention_days;    /* raw samples kept */
	int idle_after_s;      /* an allocation this long without workload and activity is idle */
	double idle_threshold; /* sm_active below this counts as idle */
};

int telemetry_start(struct periodic **out, const struct telemetry_config *cfg)
    __attribute__((warn_unused_result));

#endif
