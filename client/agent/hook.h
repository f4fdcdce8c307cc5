/*
 * hook.h - the after-change hook (docs/agent.md, "After-change hook").
 *
 * An operator's executable run after an apply changed a GPU's layout
 * (for example to restart the DRA kubelet plugin of the node, which sees
 * MIG instances created after it started only once restarted). It runs
 * on its own thread, never two at once: changes made while it runs are
 * coalesced into one more run, with the union of the GPUs changed. The
 * poller only hands the change over; a slow hook never holds it up.
 */
#ifndef GP_AGENT_HOOK_H
#define GP_AGENT_HOOK_H

#include <stdbool.h>
#include <stddef.h>

struct hook;

/* 0 when path is absolute and names an executable regular file, else -1
 * with the reason in err. */
int hook_check_path(const char *path, char *err, size_t errlen);

/* Start the hook thread for path (checked), killed after timeout_s. */
struct hook *hook_start(const char *path, int timeout_s, const char *node_name, char *err,
    size_t errlen);

/* The layout of these GPUs changed, generation applied: run the hook
 * (now, or once the running one is done). Never blocks on the hook. */
void hook_notify(struct hook *h, const char *const *gpu_uuids, int n, long long generation);

/* Stop: a running hook's process group gets SIGTERM, then SIGKILL after
 * a few seconds; runs not started yet are dropped (logged). NULL is ok. */
void hook_stop(struct hook *h);

#endif
