/*
 * defrag_apply.h - the defragmentation apply worker: on the replica that
 * holds its leadership lock, it advances every applying plan's moves, one
 * committed step (defrag_step, migration 0026) at a time, in order, until
 * a move waits for its node agent; the next pass goes on from there. A
 * replica killed mid-plan leaves each move in a committed state the next
 * leader resumes from (docs/capacity.md "Applying a plan").
 */
#ifndef GP_WORKERS_DEFRAG_APPLY_H
#define GP_WORKERS_DEFRAG_APPLY_H

struct periodic;

/*
 * Start the worker (periodic.h: leader only, a pass every interval_s
 * seconds); threshold is GPUPOOL_IDLE_THRESHOLD, the idle rule a move's
 * source is checked against again; timeout_s (GPUPOOL_DEFRAG_MOVE_TIMEOUT)
 * how long a move waits for its new instance. periodic_stop stops it.
 */
int defrag_apply_start(struct periodic **out, int interval_s, double threshold, int timeout_s)
    __attribute__((warn_unused_result));

#endif
