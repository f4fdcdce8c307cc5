/*
 * db_lock.h - leadership across replicas: a session advisory lock named
 * by a worker, held on the calling thread's connection for as long as
 * that connection lives.
 */
#ifndef GP_DB_LOCK_H
#define GP_DB_LOCK_H

#include <stdbool.h>

#include "db.h"

/*
 * Take or keep the leadership lock `name` on db's session: *leader is
 * true when this session holds it after the call (it already did, or
 * took it now), false when another session holds it. Never stacks the
 * lock (a session holds it at most once). A broken connection loses the
 * lock with the session; the next call takes it again if it is free.
 * Fails with err (503 while the database is away).
 */
int db_leader_try(struct db *db, const char *name, bool *leader, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Give the leadership lock `name` up (a no-op when not held). */
int db_leader_release(struct db *db, const char *name, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
