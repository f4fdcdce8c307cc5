/*
 * spec.h - SpecAndCount: {model, profile, count}.
 *
 * profile is a MIG profile name of the model ("3g.40gb") or "full" for a
 * whole GPU. The canonical text form is MODEL/PROFILE=COUNT
 * ("H100-80GB/3g.40gb=2"); the Kubernetes resource names are
 * "nvidia.com/mig-3g.40gb" and "nvidia.com/gpu" (the device plugin spells
 * a profile's '+' as '.', so "1g.10gb+me" is "nvidia.com/mig-1g.10gb.me").
 */
#ifndef GP_DOMAIN_SPEC_H
#define GP_DOMAIN_SPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "domain/catalog.h"

#define SPEC_FULL "full"
#define SPEC_COUNT_MAX 4096 /* instances of one item */
#define SPEC_TEXT_MAX 80    /* text form, NUL included */
#define SPEC_K8S_MAX 64     /* Kubernetes resource name, NUL included */

struct spec_count {
	char model[CATALOG_NAME_MAX];
	char profile[CATALOG_NAME_MAX];
	int count;
};

/*
 * Parse the text form, strictly: no spaces, a model and a profile of
 * letters, digits and ". _ -" (the profile also '+'), each at most 31
 * bytes, and a decimal count from 1 to SPEC_COUNT_MAX without sign or
 * leading zeros. Checks syntax only (see spec_validate). On failure
 * returns -1 with a validation error on the field path `field`.
 */
int spec_parse(const char *text, struct spec_count *out, const char *field, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Write the text form into buf. Returns 0, or -1 (buf holding a
 * truncated string) when size is too small; SPEC_TEXT_MAX always fits.
 */
int spec_format(const struct spec_count *s, char *buf, size_t size)
    __attribute__((warn_unused_result));

/*
 * Fill s from parts; returns -1 with a validation error on field when a
 * name does not fit (the count is checked by spec_validate).
 */
int spec_set(struct spec_count *s, const char *model, const char *profile, int count,
    const char *field, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Check s against the catalog: a known model, a profile that model
 * offers (or "full", offered by every model) and 1 <= count <=
 * SPEC_COUNT_MAX. Errors name "<field>.model", "<field>.profile" and
 * "<field>.count" (just "model" ... when field is "" or NULL); every
 * failing field is reported. On success *model and *profile (either may
 * be NULL) receive the catalog entries, *profile NULL for "full".
 */
int spec_validate(const struct spec_count *s, const struct catalog *c, const char *field,
    const struct gpu_model **model, const struct mig_profile **profile, struct gp_error *err)
    __attribute__((warn_unused_result));

/* True when s asks for whole GPUs. */
bool spec_is_full(const struct spec_count *s);

/* Same model and profile (counts aside). */
bool spec_same_kind(const struct spec_count *a, const struct spec_count *b);

/* Order by model, then profile, then count: <0, 0, >0 like strcmp. */
int spec_compare(const struct spec_count *a, const struct spec_count *b);

/*
 * The Kubernetes extended-resource name for profile ("full" or a MIG
 * profile name) into buf. Returns -1 when it does not fit.
 */
int spec_k8s_resource(const char *profile, char *buf, size_t size)
    __attribute__((warn_unused_result));

/*
 * The profile of model m that the Kubernetes resource name stands for:
 * SPEC_FULL for "nvidia.com/gpu", the catalog's name for
 * "nvidia.com/mig-...", NULL when m offers no such profile.
 */
const char *spec_profile_from_k8s(const struct gpu_model *m, const char *resource);

#endif
