/*
 * lifecycle.h - start and stop of the handlers' shared state (lifecycle.c).
 */
#ifndef GP_API_LIFECYCLE_H
#define GP_API_LIFECYCLE_H

#include "api.h"

/*
 * The handlers' /metrics collectors (lifecycle.c): api_start registers
 * them before http_start; api_stop after http_stop (and before the
 * catalog is freed) forgets every collector and the layout cache.
 */
int api_start(struct app *app) __attribute__((warn_unused_result));
void api_stop(struct app *app);

#endif
