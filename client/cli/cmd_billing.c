/*
 * cmd_billing.c - gpupool billing: rates (list, set), usage, periods
 * (list, close), adjust and accrue, over the /v1/billing endpoints (docs/billing.md).
 * Money is integer micro-units on the wire; tables also show it as a
 * decimal with six places. -o json prints the server's answer unchanged.
 */
#include "cmd_billing.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_billing_export.h"
#include "output.h"

#define BILLING_PATH_MAX 2048

static const struct output_column rate_columns[] = {
	{ "MODEL", "model" },
	{ "PROFILE", "profile" },
	{ "PRICE/H", "price" },
	{ "CURRENCY", "currency" },
	{ "FROM", "effective_from" },
	{ "TO", "effective_to" },
	{ "DERIVED", "derived" },
	{ "ID", "id" },
	{ NULL, NULL },
};

static const struct output_column usage_columns[] = {
	{ "ID", "id" },
	{ "KIND", "kind" },
	{ "PROJECT", "project" },
	{ "POOL", "pool" },
	{ "MODEL", "model" },
	{ "PROFILE", "profile" },
	{ "HOUR", "hour" },
	{ "SECONDS", "seconds" },
	{ "COUNT", "count" },
	{ "AMOUNT", "amount" },
	{ "CURRENCY", "currency" },
	{ NULL, NULL },
};

static const struct output_column period_columns[] = {
	{ "PERIOD", "period" },
	{ "STATE", "state" },
	{ "ROWS", "rows" },
	{ "CLOSED", "closed_at" },
	{ "BY", "closed_by" },
	{ NULL, NULL },
};

/* micro-units as a decimal with six places: -1250000 -> "-1.250000" */
static void
money(int64_t micro, char *buf, size_t len)
{
	uint64_t m = micro < 0 ? (uint64_t)0 - (uint64_t)micro : (uint64_t)micro;

	snprintf(buf, len, "%s%" PRIu64 ".%06" PRIu64, micro < 0 ? "-" : "", m / 1000000,
	    m % 1000000);
}

/* Add o[to] = money(o[from]) when from is an integer. */
static void
add_money(struct json_object *o, const char *from, const char *to)
{
	struct json_object *v = gp_client_json_get(o, from);
	char buf[48];

	if (v == NULL || !json_object_is_type(v, json_type_int))
		return;
	money(json_object_get_int64(v), buf, sizeof(buf));
	json_object_object_add(o, to, json_object_new_string(buf));
}

static int
parse_signed(struct cli *cli, const struct cli_command *cmd, const char *option, const char *s,
    long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0)
		return cli_usage_error(cli, cmd, "--%s must be an integer, not \"%s\"", option, s);
	return 0;
}

/* ---- rates ---- */

static int
rates_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	char path[BILLING_PATH_MAX] = "/v1/billing/rates";
	struct gp_client_response r;
	struct json_object *items;
	int rc;

	(void)cmd;
	if (cli_query_add(cli, path, sizeof(path), "model", cli_opt(args, "model")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "profile", cli_opt(args, "profile")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "at", cli_opt(args, "at")) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	items = gp_client_json_get(r.json, "items");
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r.json);
	} else {
		for (size_t i = 0; items != NULL && i < json_object_array_length(items); i++) {
			struct json_object *it = json_object_array_get_idx(items, i);
			struct json_object *d = gp_client_json_get(it, "derived");

			add_money(it, "price_per_hour_micro", "price");
			json_object_object_add(it, "derived",
			    json_object_new_string(
				d != NULL && json_object_get_boolean(d) ? "yes" : "-"));
			if (gp_client_json_get(it, "id") == NULL)
				json_object_object_add(it, "id",
				    json_object_new_string(json_object_to_json_string(
					gp_client_json_get(it, "derived_from"))));
		}
		output_table(stdout, items, rate_columns);
	}
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
rates_set(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *price = cli_opt(args, "price-micro"), *currency = cli_opt(args, "currency");
	const char *from = cli_opt(args, "from");
	struct gp_client_response r;
	struct json_object *body;
	long long p;
	int rc;

	if (price == NULL || currency == NULL || from == NULL)
		return cli_usage_error(cli, cmd,
		    "--price-micro, --currency and --from are required");
	if (cli_parse_int64(cli, cmd, "price-micro", price, 0, 1000000000000000LL, &p) != 0)
		return CLI_EXIT_USAGE;
	body = json_object_new_object();
	if (body == NULL)
		return cli_fail(cli, "out of memory");
	json_object_object_add(body, "model", json_object_new_string(args->pos[0]));
	json_object_object_add(body, "profile", json_object_new_string(args->pos[1]));
	json_object_object_add(body, "currency", json_object_new_string(currency));
	json_object_object_add(body, "price_per_hour_micro", json_object_new_int64(p));
	json_object_object_add(body, "effective_from", json_object_new_string(from));
	rc = cli_call(cli, "POST", "/v1/billing/rates", body, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r.json);
	} else {
		add_money(r.json, "price_per_hour_micro", "price");
		json_object_object_add(r.json, "derived", json_object_new_string("-"));
		output_row(stdout, r.json, rate_columns);
	}
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

/* ---- usage ---- */

static void
print_totals(struct json_object *doc)
{
	struct json_object *cur = gp_client_json_get(doc, "totals.currencies");
	struct json_object *rows = gp_client_json_get(doc, "totals.rows");

	printf("\n%" PRId64 " rows", rows != NULL ? json_object_get_int64(rows) : 0);
	for (size_t i = 0; cur != NULL && i < json_object_array_length(cur); i++) {
		struct json_object *c = json_object_array_get_idx(cur, i);
		static const char *const keys[] = { "usage_micro", "credit_micro",
			"adjustment_micro", "amount_micro" };
		static const char *const names[] = { "usage", "credits", "adjustments", "total" };
		struct json_object *name = gp_client_json_get(c, "currency");

		printf("\n%s:", name != NULL ? json_object_get_string(name) : "?");
		for (int k = 0; k < 4; k++) {
			struct json_object *v = gp_client_json_get(c, keys[k]);
			char buf[48];

			money(v != NULL ? json_object_get_int64(v) : 0, buf, sizeof(buf));
			printf("  %s %s", names[k], buf);
		}
	}
	putchar('\n');
}

static int
usage_show(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	char path[BILLING_PATH_MAX] = "/v1/billing/usage";
	const char *group = cli_opt(args, "group-by");
	struct gp_client_response r;
	struct json_object *rows;
	int rc;

	(void)cmd;
	if (cli_query_add(cli, path, sizeof(path), "project", cli_opt(args, "project")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "from", cli_opt(args, "from")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "to", cli_opt(args, "to")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "group_by", group) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "limit", cli_opt(args, "limit")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "cursor", cli_opt(args, "cursor")) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	rows = gp_client_json_get(r.json, "rows");
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r.json);
	} else {
		static const struct output_column group_columns[] = {
			{ "PROJECT", "project" },
			{ "POOL", "pool" },
			{ "MODEL", "model" },
			{ "PROFILE", "profile" },
			{ "DAY", "day" },
			{ "PERIOD", "period" },
			{ "KIND", "kind" },
			{ "INSTANCE-S", "instance_seconds" },
			{ "AMOUNT", "amount" },
			{ "CURRENCY", "currency" },
			{ NULL, NULL },
		};
		struct output_column cols[12];
		int n = 0;

		for (size_t i = 0; rows != NULL && i < json_object_array_length(rows); i++)
			add_money(json_object_array_get_idx(rows, i), "amount_micro", "amount");
		if (group == NULL) {
			output_table(stdout, rows, usage_columns);
		} else {
			/* only the columns of the grouping */
			struct json_object *first =
			    rows != NULL && json_object_array_length(rows) > 0
			    ? json_object_array_get_idx(rows, 0)
			    : NULL;

			for (int c = 0; group_columns[c].header != NULL; c++) {
				bool key = c < 6;

				if (!key ||
				    (first != NULL &&
					json_object_object_get_ex(first, group_columns[c].path,
					    NULL)))
					cols[n++] = group_columns[c];
			}
			cols[n] = (struct output_column){ NULL, NULL };
			output_table(stdout, rows, cols);
		}
		print_totals(r.json);
		if (gp_client_json_get(r.json, "next_cursor") != NULL)
			printf("more: --cursor %s\n",
			    json_object_get_string(gp_client_json_get(r.json, "next_cursor")));
	}
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

/* ---- periods ---- */

static int
periods_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	int rc;

	(void)cmd;
	(void)args;
	rc = cli_call(cli, "GET", "/v1/billing/periods", NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r.json);
	else
		output_table(stdout, gp_client_json_get(r.json, "items"), period_columns);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
periods_close(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	char path[BILLING_PATH_MAX], esc[256];
	struct gp_client_response r;
	int rc;

	(void)cmd;
	if (cli_escape(cli, args->pos[0], esc, sizeof(esc)) != 0)
		return CLI_EXIT_FAIL;
	snprintf(path, sizeof(path), "/v1/billing/periods/%s/close", esc);
	rc = cli_call(cli, "POST", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r.json);
	else
		output_row(stdout, r.json, period_columns);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

/* ---- adjust, accrue ---- */

static int
adjust(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *amount = cli_opt(args, "amount-micro"), *note = cli_opt(args, "note");
	struct gp_client_response r;
	struct json_object *body;
	long long id, a;
	int rc;

	if (amount == NULL || note == NULL)
		return cli_usage_error(cli, cmd, "--amount-micro and --note are required");
	if (cli_parse_int64(cli, cmd, "ROW", args->pos[0], 1, INT64_MAX, &id) != 0 ||
	    parse_signed(cli, cmd, "amount-micro", amount, &a) != 0)
		return CLI_EXIT_USAGE;
	body = json_object_new_object();
	if (body == NULL)
		return cli_fail(cli, "out of memory");
	json_object_object_add(body, "adjusts", json_object_new_int64(id));
	json_object_object_add(body, "amount_micro", json_object_new_int64(a));
	json_object_object_add(body, "note", json_object_new_string(note));
	rc = cli_call(cli, "POST", "/v1/billing/adjustments", body, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r.json);
	} else {
		add_money(r.json, "amount_micro", "amount");
		output_row(stdout, r.json, usage_columns);
	}
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
accrue(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	static const struct output_column cols[] = {
		{ "FROM", "from" },
		{ "UNTIL", "until" },
		{ "UPSERTED", "upserted" },
		{ "DELETED", "deleted" },
		{ "FINAL-BEFORE", "final_before" },
		{ NULL, NULL },
	};
	struct gp_client_response r;
	int rc;

	(void)cmd;
	(void)args;
	rc = cli_call(cli, "POST", "/v1/billing/accrual/run", NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r.json);
	else
		output_row(stdout, r.json, cols);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static const struct cli_option rates_list_options[] = {
	{ "model", "M", "only this GPU model", false },
	{ "profile", "P", "only this profile (full or a MIG profile)", false },
	{ "at", "TIME", "only the versions in effect at this RFC 3339 time", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_option rates_set_options[] = {
	{ "price-micro", "N", "list price per hour in micro-units (required)", false },
	{ "currency", "CUR", "ISO 4217 code, e.g. EUR (required)", false },
	{ "from", "TIME", "RFC 3339 start, a whole second (required)", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_option usage_options[] = {
	{ "project", "P", "only this project", false },
	{ "from", "TIME", "hours from this RFC 3339 time", false },
	{ "to", "TIME", "hours before this RFC 3339 time", false },
	{ "group-by", "G", "project, pool, spec, day or month", false },
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option adjust_options[] = {
	{ "amount-micro", "N", "signed amount in micro-units (required)", false },
	{ "note", "TEXT", "why (required)", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_command rates_subcommands[] = {
	{
	    .name = "list",
	    .usage = "[--model M] [--profile P] [--at TIME]",
	    .summary = "list rate versions, stored and derived",
	    .max_args = 0,
	    .options = rates_list_options,
	    .run = rates_list,
	},
	{
	    .name = "set",
	    .usage = "MODEL PROFILE --price-micro N --currency CUR --from TIME",
	    .summary = "add a rate version (admin)",
	    .help = "A version is never edited: a new price is a new version from --from.\n"
		    "A MIG profile without a rate of its own costs the model's full rate\n"
		    "times its compute slices / 7 (A30: / 4), rounded half to even.",
	    .min_args = 2,
	    .max_args = 2,
	    .options = rates_set_options,
	    .run = rates_set,
	},
	{ .name = NULL },
};

static const struct cli_command periods_subcommands[] = {
	{
	    .name = "list",
	    .summary = "list billing periods (UTC months) and their state",
	    .max_args = 0,
	    .run = periods_list,
	},
	{
	    .name = "close",
	    .usage = "YYYY-MM",
	    .summary = "close a month after its end plus the grace time (billing, admin)",
	    .min_args = 1,
	    .max_args = 1,
	    .run = periods_close,
	},
	{ .name = NULL },
};

static const struct cli_option exports_list_options[] = {
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

static const struct cli_command exports_subcommands[] = {
	{
	    .name = "list",
	    .usage = "[--limit N] [--cursor C]",
	    .summary = "list export jobs, newest first (admin, operator, billing)",
	    .max_args = 0,
	    .options = exports_list_options,
	    .run = cmd_billing_exports_list,
	},
	{
	    .name = "get",
	    .usage = "ID",
	    .summary = "get an export job: state, rows, bytes, SHA-256 (admin, operator, billing)",
	    .help = "Show an export job. 'gpupool billing export --id ID -o FILE' downloads\n"
		    "its file.",
	    .min_args = 1,
	    .max_args = 1,
	    .run = cmd_billing_exports_get,
	},
	{ .name = NULL },
};

static const struct cli_command billing_subcommands[] = {
	{
	    .name = "rates",
	    .usage = "[--model M] [--profile P] [--at TIME]",
	    .summary = "list and set hourly rates",
	    .max_args = 0,
	    .options = rates_list_options,
	    .run = rates_list,
	    .subcommands = rates_subcommands,
	},
	{
	    .name = "usage",
	    .usage = "[--project P] [--from T] [--to T] [--group-by G] [--limit N] [--cursor C]",
	    .summary = "billed hourly rows (usage, credits, adjustments) with totals",
	    .max_args = 0,
	    .options = usage_options,
	    .run = usage_show,
	},
	{
	    .name = "periods",
	    .usage = "",
	    .summary = "list and close billing periods",
	    .max_args = 0,
	    .run = periods_list,
	    .subcommands = periods_subcommands,
	},
	{
	    .name = "adjust",
	    .usage = "ROW --amount-micro N --note TEXT",
	    .summary =
		"correct a billed row with an adjustment in the open period (billing, admin)",
	    .min_args = 1,
	    .max_args = 1,
	    .options = adjust_options,
	    .run = adjust,
	},
	{
	    .name = "accrue",
	    .summary = "accrue the usage ledger now (admin)",
	    .max_args = 0,
	    .run = accrue,
	},
	{
	    .name = "export",
	    .usage = "--period YYYY-MM|--from T --to T --format csv|jsonl|focus -o FILE [--id N] "
		     "[--timeout S]",
	    .summary = "export billed rows to a file, checked by SHA-256 (billing, admin)",
	    .help = "Creates an export job, waits for it (progress on a terminal), downloads\n"
		    "the file and checks its SHA-256 against the server's; a mismatch exits\n"
		    "non-zero and leaves no file. --id N downloads an existing job.",
	    .max_args = 0,
	    .options = cmd_billing_export_options,
	    .run = cmd_billing_export,
	},
	{
	    .name = "exports",
	    .summary = "list and get export jobs",
	    .subcommands = exports_subcommands,
	},
	{ .name = NULL },
};

const struct cli_command cmd_billing_commands[] = {
	{
	    .name = "billing",
	    .summary = "rates, billed usage, periods and adjustments",
	    .subcommands = billing_subcommands,
	},
	/* the short forms: gpupool rates list|set, gpupool usage */
	{
	    .name = "rates",
	    .usage = "[--model M] [--profile P] [--at TIME]",
	    .summary = "list and set hourly rates (as gpupool billing rates)",
	    .max_args = 0,
	    .options = rates_list_options,
	    .run = rates_list,
	    .subcommands = rates_subcommands,
	},
	{
	    .name = "usage",
	    .usage = "[--project P] [--from T] [--to T] [--group-by G] [--limit N] [--cursor C]",
	    .summary = "billed usage with totals (as gpupool billing usage)",
	    .max_args = 0,
	    .options = usage_options,
	    .run = usage_show,
	},
	{ .name = NULL },
};
