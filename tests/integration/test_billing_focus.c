/*
 * test_billing_focus.c - the FOCUS 1.4 export checked against the column
 * rules of the FOCUS 1.4 requirements model (FOCUS_Spec,
 * specification/requirements_model/releases/1.4), kept as data in
 * tests/fixtures/focus/columns-1.4.csv (its README names the files, the
 * commits and gpupool's applicability decisions): every column the rules
 * make mandatory or that applies to gpupool present, Removed columns
 * absent, FOCUS columns before x_ columns, nulls, types and formats
 * (decimal, ISO 8601 UTC, currency, JSON key-value), allowed values; then
 * the rules between columns (each with its model rule id), the totals
 * against the database, and the Used / Unused split of a reservation hour
 * computed by hand from telemetry written with SQL. Also the utilization
 * report built from the same telemetry, and who sees it.
 */
#include "billing_export_util.h"

#include <ctype.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#ifndef FIXTURES_DIR
#error FIXTURES_DIR must be defined
#endif

#define MAX_COLS 96
#define MAX_ROWS 400

struct rule {
	char id[64];
	char status[16];   /* Active, Deprecated or Removed (the model's Status) */
	char presence[16]; /* Mandatory, Conditional or Recommended */
	char gpupool[16];  /* required, emitted, not-applicable or absent */
	bool nulls;
	char type[16];
	char format[16];
	char allowed[2048];
};

struct table {
	int ncols, nrows;
	char *head[MAX_COLS];
	char **cell[MAX_ROWS]; /* [row][col] */
};

static struct rule rules[96];
static int nrules;

/* RFC 4180: the next field of *p (quoted fields may hold , " CR LF); *end: the record ended */
static char *
csv_field(char **p, bool *end)
{
	char *s = *p, *out, *w;

	out = w = s;
	if (*s == '"') {
		s++;
		for (;;) {
			if (*s == '\0')
				fail_msg("unterminated quoted field");
			if (*s == '"' && s[1] == '"') {
				*w++ = '"';
				s += 2;
			} else if (*s == '"') {
				s++;
				break;
			} else {
				*w++ = *s++;
			}
		}
	} else {
		while (*s != ',' && *s != '\n' && *s != '\0') {
			if (*s == '"' || *s == '\r')
				fail_msg("bare quote or CR in an unquoted field");
			*w++ = *s++;
		}
	}
	if (*s != ',' && *s != '\n' && *s != '\0')
		fail_msg("junk after a quoted field");
	*end = *s != ',';
	*p = *s == '\0' ? s : s + 1;
	*w = '\0';
	return out;
}

static void
csv_parse(char *text, struct table *t)
{
	char *p = text;
	bool end = false;

	memset(t, 0, sizeof(*t));
	while (!end) {
		assert_true(t->ncols < MAX_COLS);
		t->head[t->ncols++] = csv_field(&p, &end);
	}
	while (*p != '\0') {
		int n = 0;

		assert_true(t->nrows < MAX_ROWS);
		t->cell[t->nrows] = calloc((size_t)t->ncols, sizeof(char *));
		end = false;
		while (!end) {
			char *f = csv_field(&p, &end);

			if (n >= t->ncols)
				fail_msg("row %d has more fields than the header", t->nrows + 1);
			t->cell[t->nrows][n++] = f;
		}
		if (n != t->ncols)
			fail_msg("row %d has %d fields, the header %d", t->nrows + 1, n, t->ncols);
		t->nrows++;
	}
}

static void
load_rules(void)
{
	FILE *f = fopen(FIXTURES_DIR "/focus/columns-1.4.csv", "r");
	char line[4096];

	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f)); /* header */
	nrules = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		struct rule *r = &rules[nrules++];
		char *p = line;
		bool end;

		assert_true(nrules < (int)(sizeof(rules) / sizeof(rules[0])));
		line[strcspn(line, "\n")] = '\0';
		snprintf(r->id, sizeof(r->id), "%s", csv_field(&p, &end));
		snprintf(r->status, sizeof(r->status), "%s", csv_field(&p, &end));
		snprintf(r->presence, sizeof(r->presence), "%s", csv_field(&p, &end));
		(void)csv_field(&p, &end); /* PresenceRule */
		(void)csv_field(&p, &end); /* ApplicabilityCriteria */
		snprintf(r->gpupool, sizeof(r->gpupool), "%s", csv_field(&p, &end));
		snprintf(r->type, sizeof(r->type), "%s", csv_field(&p, &end));
		snprintf(r->format, sizeof(r->format), "%s", csv_field(&p, &end));
		r->nulls = strcmp(csv_field(&p, &end), "false") != 0;
		snprintf(r->allowed, sizeof(r->allowed), "%s", end ? "" : csv_field(&p, &end));
		assert_true(end);
		/* a mandatory Active column always applies */
		if (strcmp(r->status, "Active") == 0 && strcmp(r->presence, "Mandatory") == 0)
			assert_string_equal(r->gpupool, "required");
	}
	fclose(f);
	/* the 67 columns of releases/1.4/model_rules/datasets/cost_and_usage/columns */
	assert_int_equal(nrules, 67);
}

static const struct rule *
rule_of(const char *id)
{
	for (int i = 0; i < nrules; i++)
		if (strcmp(rules[i].id, id) == 0)
			return &rules[i];
	return NULL;
}

static int
col(const struct table *t, const char *name)
{
	for (int i = 0; i < t->ncols; i++)
		if (strcmp(t->head[i], name) == 0)
			return i;
	fail_msg("no column %s", name);
	return -1;
}

static const char *
val(const struct table *t, int row, const char *name)
{
	return t->cell[row][col(t, name)];
}

static bool
matches(const char *re, const char *s)
{
	regex_t rx;
	bool ok;

	assert_int_equal(regcomp(&rx, re, REG_EXTENDED | REG_NOSUB), 0);
	ok = regexec(&rx, s, 0, NULL, 0) == 0;
	regfree(&rx);
	return ok;
}

static bool
allowed(const struct rule *r, const char *v)
{
	const char *p = r->allowed;
	size_t n = strlen(v);

	while (*p != '\0') {
		const char *bar = strchr(p, '|');
		size_t len = bar != NULL ? (size_t)(bar - p) : strlen(p);

		if (len == n && strncmp(p, v, n) == 0)
			return true;
		if (bar == NULL)
			break;
		p = bar + 1;
	}
	return false;
}

/* "-12.345" -> value × 10^scale, exactly (fails on more fraction digits) */
static __int128
scaled(const char *s, int scale)
{
	__int128 v = 0;
	int frac = -1;
	bool neg = *s == '-';

	if (neg)
		s++;
	for (; *s != '\0'; s++) {
		if (*s == '.') {
			frac = 0;
			continue;
		}
		assert_true(isdigit((unsigned char)*s));
		v = v * 10 + (*s - '0');
		if (frac >= 0)
			frac++;
	}
	if (frac < 0)
		frac = 0;
	assert_true(frac <= scale);
	for (; frac < scale; frac++)
		v *= 10;
	return neg ? -v : v;
}

/* The per-column rules of the fixture; the header's order and names. */
static void
check_columns(const struct table *t)
{
	bool custom_seen = false;

	for (int i = 0; i < t->ncols; i++) {
		const char *h = t->head[i];
		const struct rule *ru;

		for (int j = 0; j < i; j++)
			if (strcmp(t->head[j], h) == 0)
				fail_msg("column %s twice", h);
		if (strncmp(h, "x_", 2) == 0) {
			custom_seen = true;
			continue;
		}
		/* FOCUS: custom columns after all FOCUS columns, prefixed x_ */
		if (custom_seen)
			fail_msg("FOCUS column %s after a custom column", h);
		ru = rule_of(h);
		if (ru == NULL || strcmp(ru->status, "Removed") == 0)
			fail_msg("column %s is neither FOCUS 1.4 nor x_", h);
		if (!matches("^[A-Z][A-Za-z]*$", h))
			fail_msg("column %s is not Pascal case", h);
		/* FOCUS columns in alphabetical order (docs/billing.md) */
		if (i > 0 && strcmp(t->head[i - 1], h) >= 0)
			fail_msg("FOCUS column %s after %s", h, t->head[i - 1]);
	}
	/*
	 * Presence: every Mandatory column, every Conditional or Recommended
	 * one whose ApplicabilityCriteria hold for gpupool ("required"), and
	 * the ones gpupool emits although it need not ("emitted"), so that
	 * their rules stay checked. A Removed column must not be there.
	 */
	for (int i = 0; i < nrules; i++) {
		const struct rule *ru = &rules[i];
		bool present = false;

		for (int c = 0; c < t->ncols; c++)
			present = present || strcmp(t->head[c], ru->id) == 0;
		if (strcmp(ru->status, "Removed") == 0) {
			if (present)
				fail_msg("column %s is Removed in FOCUS 1.4", ru->id);
		} else if (strcmp(ru->gpupool, "required") == 0 ||
		    strcmp(ru->gpupool, "emitted") == 0) {
			if (!present)
				fail_msg("no column %s (%s %s, %s for gpupool)", ru->id, ru->status,
				    ru->presence, ru->gpupool);
		}
	}

	for (int r = 0; r < t->nrows; r++)
		for (int c = 0; c < t->ncols; c++) {
			const struct rule *ru = rule_of(t->head[c]);
			const char *v = t->cell[r][c];

			if (ru == NULL)
				continue;
			assert_true(*ru->type != '\0'); /* an emitted column has its type */
			if (*v == '\0') {
				if (!ru->nulls)
					fail_msg("row %d: %s must not be null", r + 1, ru->id);
				continue;
			}
			if (strcmp(ru->type, "Decimal") == 0 &&
			    !matches("^-?(0|[1-9][0-9]*)(\\.[0-9]+)?(E-?[0-9]+)?$", v))
				fail_msg("row %d: %s = '%s' is not a FOCUS number", r + 1, ru->id,
				    v);
			if (strcmp(ru->type, "DateTime") == 0 &&
			    !matches("^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):"
				     "[0-5][0-9]:[0-5][0-9]Z$",
				v))
				fail_msg("row %d: %s = '%s' is not ISO 8601 UTC", r + 1, ru->id, v);
			if (strcmp(ru->format, "Currency") == 0 && !matches("^[A-Z]{3}$", v))
				fail_msg("row %d: %s = '%s' is not ISO 4217", r + 1, ru->id, v);
			if (strcmp(ru->format, "AllowedValues") == 0 && !allowed(ru, v))
				fail_msg("row %d: %s = '%s' is not an allowed value", r + 1, ru->id,
				    v);
			if (strcmp(ru->format, "Unit") == 0 &&
			    !matches("^([0-9]+ )?[A-Z][A-Za-z]*(-[A-Z][a-z]+|/([0-9]+ )?[A-Z][a-z]+)?$",
				v))
				fail_msg("row %d: %s = '%s' is not in Unit Format", r + 1, ru->id,
				    v);
			if (strcmp(ru->format, "KeyValue") == 0) {
				struct json_object *o = json_tokener_parse(v);

				if (o == NULL || !json_object_is_type(o, json_type_object))
					fail_msg("row %d: %s is not a JSON object: %s", r + 1,
					    ru->id, v);
				json_object_object_foreach(o, k, jv)
				{
					if (jv != NULL &&
					    (json_object_is_type(jv, json_type_object) ||
						json_object_is_type(jv, json_type_array)))
						fail_msg("row %d: %s.%s is not a scalar", r + 1,
						    ru->id, k);
				}
				json_object_put(o);
			}
		}
}

static bool
null(const struct table *t, int r, const char *c)
{
	return *val(t, r, c) == '\0';
}

/*
 * CAU-ServiceSubcategory-C-004-M pairs every subcategory with one parent
 * category; the model's allowed values (and so the fixture's) list the
 * subcategories grouped by parent, each group ending with "Other (<parent>)".
 * The parent of a subcategory: the <parent> of the first "Other (...)" at or
 * after it. Static storage: one call at a time.
 */
static const char *
parent_category(const char *sub)
{
	static char parent[64];
	const struct rule *ru = rule_of("ServiceSubcategory");
	const char *p, *other;
	size_t n = strlen(sub);

	assert_non_null(ru);
	for (p = ru->allowed; p != NULL; p = strchr(p, '|') != NULL ? strchr(p, '|') + 1 : NULL)
		if (strncmp(p, sub, n) == 0 && (p[n] == '|' || p[n] == '\0'))
			break;
	if (p == NULL)
		fail_msg("ServiceSubcategory %s is not an allowed value", sub);
	other = strstr(p, "Other (");
	assert_non_null(other);
	other += strlen("Other (");
	n = strcspn(other, ")");
	assert_true(n < sizeof(parent));
	memcpy(parent, other, n);
	parent[n] = '\0';
	return parent;
}

/* every value of column a comes with one value of column b (CheckDistinctCount 1) */
static void
check_one_per(const struct table *t, const char *a, const char *b)
{
	for (int i = 0; i < t->nrows; i++)
		for (int j = i + 1; j < t->nrows; j++)
			if (!null(t, i, a) && strcmp(val(t, i, a), val(t, j, a)) == 0 &&
			    strcmp(val(t, i, b), val(t, j, b)) != 0)
				fail_msg("%s %s has two %s: %s and %s", a, val(t, i, a), b,
				    val(t, i, b), val(t, j, b));
}

/* a cost equals PricingQuantity × a unit price (1.5 micro-units: the row's rounding plus the
 * Used / Unused split's) */
static void
check_product(const struct table *t, int r, const char *price, const char *cost)
{
	__int128 q, p, c, d;

	if (null(t, r, "PricingQuantity") || null(t, r, price))
		return;
	q = scaled(val(t, r, "PricingQuantity"), 9);
	p = scaled(val(t, r, price), 6);
	c = scaled(val(t, r, cost), 6) * 1000000000;
	d = q * p - c;
	if (d < 0)
		d = -d;
	if (d > (__int128)1500000000)
		fail_msg("row %d: %s × %s is not %s", r + 1, val(t, r, "PricingQuantity"),
		    val(t, r, price), val(t, r, cost));
}

/* The rules between columns (each names the spec requirement it checks). */
static void
check_rows(const struct table *t)
{
	for (int r = 0; r < t->nrows; r++) {
		const char *cat = val(t, r, "ChargeCategory");
		bool usage = strcmp(cat, "Usage") == 0;
		bool correction = strcmp(val(t, r, "ChargeClass"), "Correction") == 0;

		/* CapacityReservationStatus MUST be null when CapacityReservationId is null */
		if (null(t, r, "CapacityReservationId"))
			assert_true(null(t, r, "CapacityReservationStatus"));
		/* ... MUST NOT be null when the id is not null and ChargeCategory is "Usage" */
		else if (usage)
			assert_false(null(t, r, "CapacityReservationStatus"));
		/* PricingUnit MUST be null when PricingQuantity is null, and not null otherwise */
		assert_int_equal(null(t, r, "PricingUnit"), null(t, r, "PricingQuantity"));
		/* PricingQuantity, PricingCategory, ListUnitPrice, ContractedUnitPrice MUST NOT be
		 * null when ChargeCategory is "Usage" and ChargeClass is not "Correction" */
		if (usage && !correction) {
			assert_false(null(t, r, "PricingQuantity"));
			assert_false(null(t, r, "PricingCategory"));
			assert_false(null(t, r, "ListUnitPrice"));
			assert_false(null(t, r, "ContractedUnitPrice"));
		}
		/* ConsumedQuantity MUST be null when ChargeCategory is not "Usage" */
		if (!usage)
			assert_true(null(t, r, "ConsumedQuantity"));
		assert_int_equal(null(t, r, "ConsumedUnit"), null(t, r, "ConsumedQuantity"));
		/* SkuPriceDetails MUST be null when SkuPriceId is null; keys FOCUS-defined or x_ */
		if (null(t, r, "SkuPriceId"))
			assert_true(null(t, r, "SkuPriceDetails"));
		if (!null(t, r, "SkuPriceDetails")) {
			struct json_object *o = json_tokener_parse(val(t, r, "SkuPriceDetails"));

			json_object_object_foreach(o, k, jv)
			{
				(void)jv;
				if (strncmp(k, "x_", 2) != 0 && strcmp(k, "GpuCount") != 0)
					fail_msg("SkuPriceDetails key %s", k);
			}
			assert_true(json_object_is_type(json_object_object_get(o, "GpuCount"),
					json_type_double) ||
			    json_object_is_type(json_object_object_get(o, "GpuCount"),
				json_type_int));
			json_object_put(o);
		}
		/* ChargeFrequency MUST NOT be "Usage-Based" when ChargeCategory is "Purchase" */
		if (strcmp(cat, "Purchase") == 0)
			assert_string_not_equal(val(t, r, "ChargeFrequency"), "Usage-Based");
		/* the charge period lies in the billing period, start before end */
		assert_true(
		    strcmp(val(t, r, "ChargePeriodStart"), val(t, r, "ChargePeriodEnd")) < 0);
		assert_true(
		    strcmp(val(t, r, "BillingPeriodStart"), val(t, r, "ChargePeriodStart")) <= 0);
		assert_true(
		    strcmp(val(t, r, "ChargePeriodEnd"), val(t, r, "BillingPeriodEnd")) <= 0);
		/* no discounts in gpupool: every cost metric is the same amount */
		assert_string_equal(val(t, r, "BilledCost"), val(t, r, "EffectiveCost"));
		assert_string_equal(val(t, r, "BilledCost"), val(t, r, "ListCost"));
		assert_string_equal(val(t, r, "BilledCost"), val(t, r, "ContractedCost"));
		/* CAU-ListCost-C-011-C, CAU-ContractedCost-C-011-C: the cost MUST equal the
		 * product of the unit price and PricingQuantity when both are not null (1.4
		 * has no exception for corrections); to the micro-unit rounding */
		check_product(t, r, "ListUnitPrice", "ListCost");
		check_product(t, r, "ContractedUnitPrice", "ContractedCost");
		/*
		 * FOCUS 1.4 (requirements model rule ids): prices, quantities and
		 * the pricing category follow SkuPriceId; SKU columns are set on
		 * usage and purchases.
		 */
		if (null(t, r, "SkuPriceId")) {
			/* CAU-ConsumedQuantity-C-009-C: MUST be null when SkuPriceId is null */
			if (!null(t, r, "ConsumedQuantity"))
				fail_msg("row %d: ConsumedQuantity without SkuPriceId", r + 1);
			/* CAU-PricingQuantity-C-011-C: MUST be null when SkuPriceId is null */
			if (!null(t, r, "PricingQuantity"))
				fail_msg("row %d: PricingQuantity without SkuPriceId", r + 1);
			/* CAU-PricingCategory-C-012-C: MUST be null when SkuPriceId is null */
			if (!null(t, r, "PricingCategory"))
				fail_msg("row %d: PricingCategory without SkuPriceId", r + 1);
			/* CAU-ListUnitPrice-C-012-C: MUST be null when SkuPriceId is null */
			if (!null(t, r, "ListUnitPrice"))
				fail_msg("row %d: ListUnitPrice without SkuPriceId", r + 1);
			/* CAU-ContractedUnitPrice-C-014-C: MUST be null when SkuPriceId is null */
			if (!null(t, r, "ContractedUnitPrice"))
				fail_msg("row %d: ContractedUnitPrice without SkuPriceId", r + 1);
		} else {
			/* CAU-ListUnitPrice-C-013-C: MUST NOT be null when SkuPriceId is not null */
			if (null(t, r, "ListUnitPrice"))
				fail_msg("row %d (%s): SkuPriceId %s without ListUnitPrice", r + 1,
				    cat, val(t, r, "SkuPriceId"));
			/* CAU-ContractedUnitPrice-C-015-C: MUST NOT be null when SkuPriceId is
			 * not null */
			if (null(t, r, "ContractedUnitPrice"))
				fail_msg("row %d (%s): SkuPriceId %s without ContractedUnitPrice",
				    r + 1, cat, val(t, r, "SkuPriceId"));
		}
		/* CAU-SkuId-C-005-C, CAU-SkuPriceId-C-005-C: MUST NOT be null when
		 * ChargeCategory is "Usage" or "Purchase" and ChargeClass is not "Correction" */
		if ((usage || strcmp(cat, "Purchase") == 0) && !correction) {
			assert_false(null(t, r, "SkuId"));
			assert_false(null(t, r, "SkuPriceId"));
		}
		/* CAU-SkuId-C-004-C, CAU-SkuPriceId-C-004-C, CAU-PricingQuantity-C-004-C,
		 * CAU-PricingCategory-C-003-C, CAU-ListUnitPrice-C-004-C,
		 * CAU-ContractedUnitPrice-C-005-C: MUST be null when ChargeCategory is "Tax" */
		if (strcmp(cat, "Tax") == 0) {
			assert_true(null(t, r, "SkuId"));
			assert_true(null(t, r, "SkuPriceId"));
			assert_true(null(t, r, "PricingQuantity"));
			assert_true(null(t, r, "PricingCategory"));
			assert_true(null(t, r, "ListUnitPrice"));
			assert_true(null(t, r, "ContractedUnitPrice"));
		}
		/* CAU-SkuMeter-C-004-C: MUST be null when SkuId is null;
		 * CAU-SkuMeter-C-005-C: SHOULD NOT be null when SkuId is not null
		 * (gpupool always names the meter) */
		if (null(t, r, "SkuId"))
			assert_true(null(t, r, "SkuMeter"));
		else if (null(t, r, "SkuMeter"))
			fail_msg("row %d: SkuId %s without SkuMeter", r + 1, val(t, r, "SkuId"));
		/* CAU-ListUnitPrice-C-008-M, CAU-ContractedUnitPrice-C-009-M: a
		 * non-negative decimal value */
		if (!null(t, r, "ListUnitPrice"))
			assert_true(val(t, r, "ListUnitPrice")[0] != '-');
		if (!null(t, r, "ContractedUnitPrice"))
			assert_true(val(t, r, "ContractedUnitPrice")[0] != '-');
		/*
		 * HostProviderName (CAU-HostProviderName-C-004-C .. C-006-M): MAY be
		 * null only for services without infrastructure or when the host
		 * cannot be determined, "MUST NOT be null in all other cases"; every
		 * gpupool charge is GPU capacity gpupool hosts itself, so it is never
		 * null, and (CAU-HostProviderName-C-010-M) "MUST equal
		 * ServiceProviderName in all other cases" (no host selected by the
		 * customer or exposed by another provider).
		 */
		assert_false(null(t, r, "HostProviderName"));
		assert_string_equal(val(t, r, "HostProviderName"),
		    val(t, r, "ServiceProviderName"));
		/* CAU-CapacityReservationId-C-005-C: MUST NOT be null when the charge is the
		 * unused portion of a capacity reservation */
		if (strcmp(val(t, r, "CapacityReservationStatus"), "Unused") == 0)
			assert_false(null(t, r, "CapacityReservationId"));
		/* CAU-ResourceType-C-004-C / C-005-C: null exactly when ResourceId is null;
		 * CAU-RegionName-C-004-C / C-005-C, CAU-SubAccountName-C-004-C / C-005-C:
		 * likewise with RegionId, SubAccountId */
		assert_int_equal(null(t, r, "ResourceType"), null(t, r, "ResourceId"));
		assert_int_equal(null(t, r, "RegionName"), null(t, r, "RegionId"));
		assert_int_equal(null(t, r, "SubAccountName"), null(t, r, "SubAccountId"));
		/* CAU-ServiceSubcategory-C-004-M: its one parent ServiceCategory */
		assert_string_equal(val(t, r, "ServiceCategory"),
		    parent_category(val(t, r, "ServiceSubcategory")));
		/* x_AmountMicro is the cost in micro-units */
		assert_true(
		    scaled(val(t, r, "BilledCost"), 6) == atoll(val(t, r, "x_AmountMicro")));
	}
	/* CAU-ServiceName-C-005-C: one ServiceCategory per ServiceName; C-008-C (SHOULD,
	 * followed): one ServiceSubcategory; CAU-SkuPriceId-C-008-M: one parent SkuId */
	check_one_per(t, "ServiceName", "ServiceCategory");
	check_one_per(t, "ServiceName", "ServiceSubcategory");
	check_one_per(t, "SkuPriceId", "SkuId");
}

static int
group_setup(void **state)
{
	static const char *const env[] = { BILLING_SERVER_ENV,
		"GPUPOOL_BILLING_EXPORT_INTERVAL_MS=200", NULL };
	const struct fixture_options opts = { .server_env = env };
	struct fixture *fx;
	const char *gpu1, *gpu2;

	if (fixture_create(&opts, &fx) != 0)
		return -1;
	*state = fx;
	load_rules();
	seed_golden(fx);
	fx_sql_exec(fx, "UPDATE clusters SET region = 'eu-west-1'");
	/*
	 * Telemetry of pool wx's two H100 (held 10:59:30-13:00:20 on 2 March)
	 * for the hour 11:00: GPU 1 ran a workload all along with half its
	 * samples below the idle threshold, GPU 2 had no workload at all.
	 * Idle: 3600 × 30/60 + 3600 = 5400 of 7200 instance-seconds (3/4).
	 */
	gpu1 = fx_sql_text(fx, "SELECT min(id)::text FROM gpus WHERE model = 'H100-80GB'");
	gpu2 = fx_sql_text(fx, "SELECT max(id)::text FROM gpus WHERE model = 'H100-80GB'");
	fx_sql_exec(fx,
	    "INSERT INTO gpu_metric_hourly (hour, gpu_id, device_uuid, samples, sm_active_avg, "
	    "sm_active_low) SELECT '2026-03-02 11:00:00+00', id, uuid, 60, "
	    "CASE WHEN id = $1::int8 THEN 0.4 ELSE 0.0 END, "
	    "CASE WHEN id = $1::int8 THEN 30 ELSE 60 END FROM gpus WHERE id IN ($1::int8, $2::int8)",
	    gpu1, gpu2);
	fx_sql_exec(fx,
	    "INSERT INTO workload_profiles (node_id, device_uuid, gpu_id, namespace, pod, "
	    "first_seen_at, last_seen_at, ended_at) SELECT node_id, uuid, id, 'ml', 'train-0', "
	    "'2026-03-02 10:00:00+00', '2026-03-02 14:00:00+00', '2026-03-02 14:00:00+00' "
	    "FROM gpus WHERE id = $1::int8",
	    gpu1);
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL),
	    200);
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/billing/periods/2026-03/close",
			  NULL),
	    200);
	return 0;
}

static void
test_focus_conformance(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	struct json_object *e;
	struct table t;
	char *text;
	int64_t id, id2;
	__int128 total = 0;
	int used = -1, unused = -1;
	const char *wx_row;

	id = exp_create(fx, fx->admin_token, "{\"format\":\"focus\",\"period\":\"2026-03\"}");
	e = exp_wait(fx, id, 30000);
	assert_json_str(e, "state", "done");
	r = exp_download(fx, id);
	assert_string_equal(r->content_type, "text/csv; charset=utf-8");
	assert_int_equal((int64_t)r->body_len, fx_json_int(e, "bytes"));
	assert_string_equal(fx_json_str(e, "sha256"), exp_sha256(fx, r->body, r->body_len));
	text = strdup(r->body);
	csv_parse(text, &t);
	assert_int_equal(t.nrows, fx_json_int(e, "rows"));
	check_columns(&t);
	check_rows(&t);

	/* the sum of BilledCost is the period's billed amount, to the micro-unit */
	for (int i = 0; i < t.nrows; i++)
		total += scaled(val(&t, i, "BilledCost"), 6);
	assert_true(total ==
	    (__int128)fx_sql_int64(fx,
		"SELECT sum(amount_micro) FROM "
		"billing_usage WHERE period = '2026-03'"));
	/* every usage row of the period is there, its parts summing to its amount */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM billing_usage WHERE period = '2026-03'"),
	    t.nrows - 1); /* one row split in two */

	/* the reservation hour wx 11:00 (2 × 2.50 EUR): 3/4 idle -> Unused 3.75, Used 1.25 */
	wx_row = fx_sql_text(fx,
	    "SELECT u.id::text FROM billing_usage u JOIN pools p ON p.id = u.pool_id WHERE "
	    "p.name = 'wx' AND u.kind = 'usage' AND u.hour = '2026-03-02 11:00:00+00'");
	for (int i = 0; i < t.nrows; i++)
		if (strcmp(val(&t, i, "x_UsageId"), wx_row) == 0) {
			if (strcmp(val(&t, i, "CapacityReservationStatus"), "Used") == 0)
				used = i;
			else
				unused = i;
		}
	assert_true(used >= 0 && unused >= 0);
	assert_string_equal(val(&t, unused, "CapacityReservationStatus"), "Unused");
	assert_string_equal(val(&t, used, "BilledCost"), "1.25");
	assert_string_equal(val(&t, unused, "BilledCost"), "3.75");
	assert_string_equal(val(&t, used, "PricingQuantity"), "0.5");
	assert_string_equal(val(&t, unused, "PricingQuantity"), "1.5");
	assert_string_equal(val(&t, used, "ListUnitPrice"), "2.5");
	assert_string_equal(val(&t, used, "x_IdleShare"), "0.75");
	assert_string_equal(val(&t, used, "x_RowAmountMicro"), "5000000");
	assert_string_equal(val(&t, used, "CapacityReservationId"),
	    fx_str(fx, "pool-%s", fx_sql_text(fx, "SELECT id::text FROM pools WHERE name = 'wx'")));
	assert_string_equal(val(&t, used, "SubAccountId"), "acme");
	assert_string_equal(val(&t, used, "SubAccountName"), "Acme");
	assert_string_equal(val(&t, used, "RegionId"), "eu-west-1");
	assert_string_equal(val(&t, used, "ChargePeriodStart"), "2026-03-02T11:00:00Z");
	assert_string_equal(val(&t, used, "ChargePeriodEnd"), "2026-03-02T12:00:00Z");
	assert_string_equal(val(&t, used, "BillingPeriodStart"), "2026-03-01T00:00:00Z");
	assert_string_equal(val(&t, used, "BillingPeriodEnd"), "2026-04-01T00:00:00Z");
	assert_string_equal(val(&t, used, "SkuId"), "H100-80GB/full");
	{
		struct json_object *d = json_tokener_parse(val(&t, used, "SkuPriceDetails"));

		assert_int_equal(json_object_get_int(json_object_object_get(d, "GpuCount")), 1);
		json_object_put(d);
	}
	/* the credit of the same hour (GPU 1 failed 11:15-11:45) stays whole */
	{
		int credits = 0;

		for (int i = 0; i < t.nrows; i++)
			if (strcmp(val(&t, i, "ChargeCategory"), "Credit") == 0) {
				assert_true(scaled(val(&t, i, "BilledCost"), 6) <= 0);
				assert_true(null(&t, i, "CapacityReservationStatus"));
				credits++;
			}
		assert_true(credits >= 2);
	}
	/* MIG: GpuCount = compute slices / 7 */
	for (int i = 0; i < t.nrows; i++)
		if (strcmp(val(&t, i, "SkuId"), "A100-40GB/1g.5gb") == 0) {
			struct json_object *d = json_tokener_parse(val(&t, i, "SkuPriceDetails"));

			assert_string_equal(json_object_to_json_string_ext(json_object_object_get(d,
									       "GpuCount"),
						JSON_C_TO_STRING_PLAIN),
			    "0.142857");
			json_object_put(d);
		}

	/* again: byte-identical */
	id2 = exp_create(fx, fx->admin_token, "{\"format\":\"focus\",\"period\":\"2026-03\"}");
	e = exp_wait(fx, id2, 30000);
	assert_string_equal(fx_json_str(e, "sha256"), exp_sha256(fx, r->body, r->body_len));
	for (int i = 0; i < t.nrows; i++)
		free(t.cell[i]);
	free(text);
}

static struct json_object *
find_row(struct json_object *rows, const char *key, const char *value)
{
	for (size_t i = 0; i < json_object_array_length(rows); i++) {
		struct json_object *it = json_object_array_get_idx(rows, i);

		if (strcmp(fx_json_str(it, key), value) == 0)
			return it;
	}
	return NULL;
}

static void
test_utilization(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	struct json_object *wx, *acme;
	const char *user = fixture_create_user(fx, "uo", "none");
	const char *q = "/v1/reports/utilization?from=2026-03-02T00:00:00Z&to=2026-03-03T00:00:00Z";

	r = fx_request(fx, fx->admin_token, "GET", fx_str(fx, "%s&group_by=pool", q), NULL);
	assert_status(r, 200);
	wx = find_row(fx_json(r->json, "rows"), "pool", "wx");
	assert_non_null(wx);
	/* 2 GPUs × 10:59:30.25-13:00:20 = 2 × 7249.75 s = 4.027639 h (rounded) */
	assert_string_equal(json_object_to_json_string_ext(fx_json(wx, "allocated_gpu_hours"),
				JSON_C_TO_STRING_PLAIN),
	    "4.027639");
	assert_string_equal(json_object_to_json_string_ext(fx_json(wx, "measured_gpu_hours"),
				JSON_C_TO_STRING_PLAIN),
	    "2.000000");
	assert_string_equal(json_object_to_json_string_ext(fx_json(wx, "idle_gpu_hours"),
				JSON_C_TO_STRING_PLAIN),
	    "1.500000");
	/* (3600 × 0.4 + 3600 × 0) / 7200 */
	assert_string_equal(json_object_to_json_string_ext(fx_json(wx, "average_activity"),
				JSON_C_TO_STRING_PLAIN),
	    "0.200000");
	assert_json_int(wx, "idle_cost_micro", 3750000);
	assert_json_int(wx, "billed_micro",
	    fx_sql_int64(fx,
		"SELECT sum(amount_micro) FROM billing_usage u JOIN pools p ON p.id = u.pool_id "
		"WHERE p.name = 'wx' AND u.kind = 'usage' AND u.hour >= '2026-03-02' AND u.hour < "
		"'2026-03-03'"));
	assert_json_str(wx, "currency", "EUR");

	/* by project: acme holds wx */
	r = fx_request(fx, fx->admin_token, "GET", q, NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "group_by", "project");
	acme = find_row(fx_json(r->json, "rows"), "project", "acme");
	assert_non_null(acme);
	assert_json_int(acme, "idle_cost_micro", 3750000);
	assert_json_absent(acme, "pool");

	/* a project user sees only their projects; another project's is 404 */
	r = fx_request(fx, user, "GET", q, NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "rows"), 0);
	assert_problem(fx_request(fx, user, "GET", fx_str(fx, "%s&project=acme", q), NULL), 404,
	    "not_found");
	assert_status(fx_request(fx, fx->admin_token, "PUT", "/v1/projects/acme/members/uo",
			  "{\"role\":\"viewer\"}"),
	    201);
	r = fx_request(fx, user, "GET", q, NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "rows"), 1);
	assert_non_null(find_row(fx_json(r->json, "rows"), "project", "acme"));
	assert_problem(fx_request(fx, user, "GET", fx_str(fx, "%s&project=other", q), NULL), 404,
	    "not_found");

	/* bad input */
	assert_problem(fx_request(fx, fx->admin_token, "GET", "/v1/reports/utilization", NULL), 422,
	    "validation_failed");
	assert_problem(fx_request(fx, fx->admin_token, "GET", fx_str(fx, "%s&group_by=spec", q),
			   NULL),
	    422, "validation_failed");
	assert_problem(fx_request(fx, fx->admin_token, "GET",
			   "/v1/reports/utilization?from=2026-03-03T00:00:00Z&to=2026-03-02T00:00:00Z",
			   NULL),
	    422, "validation_failed");
	assert_problem(fx_request(fx, fx->admin_token, "GET",
			   "/v1/reports/utilization?from=yesterday&to=2026-03-02T00:00:00Z", NULL),
	    422, "validation_failed");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_focus_conformance),
		cmocka_unit_test(test_utilization),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
