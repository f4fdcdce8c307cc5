/*
 * liveness.h - the agent liveness worker: a periodic worker (leader
 * only) that marks agent-managed nodes silent past the grace period
 * `unknown` (out of placement, alert node_unknown); a heartbeat or a
 * status report brings them back (db/db_agent.c).
 */
#ifndef GP_WORKERS_LIVENESS_H
#define GP_WORKERS_LIVENESS_H

struct periodic;

/* Start it: a pass every grace_s / 5 seconds (at least 1 s). */
int liveness_start(struct periodic **out, int grace_s) __attribute__((warn_unused_result));

#endif
