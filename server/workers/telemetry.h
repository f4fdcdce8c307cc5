/*
 * telemetry.h - the telemetry worker (one replica at a time, through its
 * leadership lock): keeps the daily partitions of gpu_metric_samples
 * (created ahead, dropped past retention), recomputes the hourly roll-ups
 * from its watermark (late samples: a settle window before it), raises /
 * resolves idle (hoarding) alerts, and prunes delivered outbox rows,
 * resolved alerts and ended workload profiles past their retention.
 */
#ifndef GP_WORKERS_TELEMETRY_H
#define GP_WORKERS_TELEMETRY_H

struct periodic;

struct telemetry_config {
	int interval_s;        /* between passes */
	int retention_days;    /* raw samples kept */
	int idle_after_s;      /* an allocation this long without workload and activity is idle */
	double idle_threshold; /* sm_active below this counts as idle */
	int outbox_retention_days;   /* delivered outbox rows kept (0: for ever) */
	int alerts_retention_days;   /* resolved alerts kept (0: for ever) */
	int profiles_retention_days; /* ended workload profiles kept (0: for ever) */
};

int telemetry_start(struct periodic **out, const struct telemetry_config *cfg)
    __attribute__((warn_unused_result));

#endif
