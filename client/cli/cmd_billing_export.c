/*
 * cmd_billing_export.c - gpupool billing export (queue an export job,
 * wait for it with progress on a terminal, stream the file to disk and
 * check its SHA-256 against the job's; a mismatch exits non-zero and
 * leaves no file) and gpupool reports utilization.
 */
#include "cmd_billing_export.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crypto/digest.h"
#include "output.h"

#define EXPORT_PATH_MAX 2048

const struct cli_option cmd_billing_export_options[] = {
	{ "period", "YYYY-MM", "the UTC month to export", false },
	{ "from", "TIME", "or a range of whole UTC hours: from (RFC 3339)", false },
	{ "to", "TIME", "... to (exclusive)", false },
	{ "format", "F", "csv, jsonl or focus (FinOps FOCUS 1.4 CSV)", false },
	{ "output-file", "FILE", "where to write the file (also -o FILE; '-' for stdout)", false },
	{ "id", "N", "download export job N instead of creating one", false },
	{ "timeout", "S", "give up waiting after S seconds (default 3600)", false },
	{ NULL, NULL, NULL, false },
};

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

struct sink {
	FILE *f;
	struct digest_sha256 *sha;
	uint64_t bytes;
};

static int
sink_write(const char *data, size_t len, void *arg)
{
	struct sink *s = arg;

	digest_sha256_update(s->sha, data, len);
	s->bytes += len;
	return fwrite(data, 1, len, s->f) == len ? 0 : -1;
}

static const char *
str(struct json_object *o, const char *key)
{
	struct json_object *v = gp_client_json_get(o, key);

	return v != NULL && json_object_is_type(v, json_type_string) ? json_object_get_string(v)
								     : NULL;
}

int
cmd_billing_export(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *period = cli_opt(args, "period"), *from = cli_opt(args, "from");
	const char *to = cli_opt(args, "to"), *format = cli_opt(args, "format");
	const char *file = cli_opt(args, "output-file"), *idopt = cli_opt(args, "id");
	const char *sha, *state;
	char path[EXPORT_PATH_MAX], part[4096], hex[DIGEST_SHA256_HEX_LEN];
	struct gp_client_response r;
	struct gp_client *c;
	struct json_object *job = NULL;
	bool tty = isatty(STDERR_FILENO) != 0, to_stdout, have_r;
	long long id = 0, timeout = 3600;
	struct sink s;
	time_t start = time(NULL);
	int64_t bytes;
	int rc;

	if (file == NULL)
		return cli_usage_error(cli, cmd, "-o FILE (or --output-file) is required");
	to_stdout = strcmp(file, "-") == 0;
	if (cli_opt(args, "timeout") != NULL &&
	    cli_parse_int64(cli, cmd, "timeout", cli_opt(args, "timeout"), 1, 86400 * 7,
		&timeout) != 0)
		return CLI_EXIT_USAGE;
	if (idopt != NULL) {
		if (cli_parse_int64(cli, cmd, "id", idopt, 1, INT64_MAX, &id) != 0)
			return CLI_EXIT_USAGE;
		if (period != NULL || from != NULL || to != NULL || format != NULL)
			return cli_usage_error(cli, cmd,
			    "--id downloads an existing job: no --period, --from, --to, --format");
	} else {
		struct json_object *body;

		/* check before building the body: a usage error must not leak it */
		if (format == NULL)
			return cli_usage_error(cli, cmd,
			    "--format is required (csv, jsonl, focus)");
		if (period == NULL && (from == NULL || to == NULL))
			return cli_usage_error(cli, cmd,
			    "give --period YYYY-MM or --from and --to");
		body = json_object_new_object();
		json_object_object_add(body, "format", json_object_new_string(format));
		if (period != NULL)
			json_object_object_add(body, "period", json_object_new_string(period));
		if (from != NULL)
			json_object_object_add(body, "from", json_object_new_string(from));
		if (to != NULL)
			json_object_object_add(body, "to", json_object_new_string(to));
		rc = cli_call(cli, "POST", "/v1/billing/exports", body, &r);
		json_object_put(body);
		if (rc != CLI_EXIT_OK)
			return rc;
		id = json_object_get_int64(gp_client_json_get(r.json, "id"));
		gp_client_response_free(&r);
	}
	/* wait */
	snprintf(path, sizeof(path), "/v1/billing/exports/%lld", id);
	for (;;) {
		rc = cli_call(cli, "GET", path, NULL, &r);
		if (rc != CLI_EXIT_OK)
			return rc;
		state = str(r.json, "state");
		if (state != NULL && (strcmp(state, "done") == 0 || strcmp(state, "failed") == 0)) {
			job = json_object_get(r.json);
			gp_client_response_free(&r);
			break;
		}
		if (tty)
			fprintf(stderr, "\rexport %lld: %s, %lds ", id, state != NULL ? state : "?",
			    (long)(time(NULL) - start));
		gp_client_response_free(&r);
		if (time(NULL) - start > timeout) {
			if (tty)
				fputc('\n', stderr);
			return cli_fail(cli, "export %lld not done after %lld s", id, timeout);
		}
		sleep_ms(300);
	}
	if (tty)
		fprintf(stderr, "\rexport %lld: %s, %lds\n", id, str(job, "state"),
		    (long)(time(NULL) - start));
	if (strcmp(str(job, "state"), "failed") == 0) {
		rc = cli_fail(cli, "export %lld failed: %s", id,
		    str(job, "error") != NULL ? str(job, "error") : "unknown error");
		json_object_put(job);
		return rc;
	}
	sha = str(job, "sha256");
	bytes = json_object_get_int64(gp_client_json_get(job, "bytes"));

	/* download into FILE.part, hashing as it goes; renamed once verified */
	memset(&s, 0, sizeof(s));
	s.sha = digest_sha256_new();
	if (s.sha == NULL) {
		json_object_put(job);
		return cli_fail(cli, "could not start a SHA-256 digest");
	}
	if (to_stdout) {
		s.f = stdout;
	} else {
		snprintf(part, sizeof(part), "%s.part", file);
		s.f = fopen(part, "wb");
		if (s.f == NULL) {
			rc = cli_fail(cli, "could not create %s: %s", part, strerror(errno));
			digest_sha256_free(s.sha);
			json_object_put(job);
			return rc;
		}
	}
	c = cli_client(cli);
	snprintf(path, sizeof(path), "/v1/billing/exports/%lld/download", id);
	if (c == NULL) {
		rc = gp_client_download(NULL, path, NULL, sink_write, &s, &r); /* sets r.error */
		rc = CLI_EXIT_FAIL;
		gp_client_response_free(&r);
		have_r = false;
	} else {
		rc = gp_client_download(c, path, NULL, sink_write, &s, &r);
		rc = cli_check_response(cli, rc, &r);
		have_r = rc == CLI_EXIT_OK;
	}
	if (!to_stdout && fclose(s.f) != 0 && rc == CLI_EXIT_OK)
		rc = cli_fail(cli, "could not write %s: %s", part, strerror(errno));
	digest_sha256_final(s.sha, hex);
	if (rc == CLI_EXIT_OK &&
	    (sha == NULL || strcmp(hex, sha) != 0 || (int64_t)s.bytes != bytes))
		rc = cli_fail(cli,
		    "checksum mismatch for export %lld: got %" PRIu64 " bytes with SHA-256 %s, "
		    "the server stored %" PRId64 " bytes with SHA-256 %s",
		    id, s.bytes, hex, bytes, sha != NULL ? sha : "(none)");
	if (rc == CLI_EXIT_OK && r.etag[0] != '\0' &&
	    (strlen(r.etag) != 66 || strncmp(r.etag + 1, hex, 64) != 0))
		rc = cli_fail(cli, "checksum mismatch: ETag %s, file %s", r.etag, hex);
	if (have_r)
		gp_client_response_free(&r);
	if (!to_stdout) {
		if (rc == CLI_EXIT_OK && rename(part, file) != 0)
			rc = cli_fail(cli, "could not rename %s to %s: %s", part, file,
			    strerror(errno));
		if (rc != CLI_EXIT_OK)
			unlink(part);
	}
	if (rc == CLI_EXIT_OK) {
		FILE *out = to_stdout ? stderr : stdout;

		if (cli->output == CLI_OUTPUT_JSON && !to_stdout)
			output_json(stdout, job);
		else
			fprintf(out, "export %lld: %s, %s rows, %" PRIu64 " bytes, sha256 %s\n", id,
			    to_stdout ? "written to stdout" : file,
			    json_object_to_json_string(gp_client_json_get(job, "rows")), s.bytes,
			    hex);
	}
	json_object_put(job);
	return rc;
}

/* ---- export jobs ---- */

static const struct output_column job_columns[] = {
	{ "ID", "id" },
	{ "STATE", "state" },
	{ "FORMAT", "format" },
	{ "PERIOD", "period" },
	{ "FROM", "from" },
	{ "TO", "to" },
	{ "ROWS", "rows" },
	{ "BYTES", "bytes" },
	{ "CREATED", "created_at" },
	OUTPUT_WIDE,
	{ "BY", "created_by" },
	{ "ATTEMPTS", "attempts" },
	{ "FINISHED", "finished_at" },
	{ "SHA256", "sha256" },
	{ "ERROR", "error" },
	{ NULL, NULL },
};

int
cmd_billing_exports_list(struct cli *cli, const struct cli_command *cmd,
    const struct cli_args *args)
{
	struct json_object *doc;
	int rc;

	(void)cmd;
	rc = cli_list(cli, "/v1/billing/exports", args, &doc);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, doc);
	else
		output_table(stdout, gp_client_json_get(doc, "items"), job_columns);
	json_object_put(doc);
	return CLI_EXIT_OK;
}

int
cmd_billing_exports_get(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[EXPORT_PATH_MAX];
	long long id;
	int rc;

	if (cli_parse_int64(cli, cmd, "ID", args->pos[0], 1, INT64_MAX, &id) != 0)
		return CLI_EXIT_USAGE;
	snprintf(path, sizeof(path), "/v1/billing/exports/%lld", id);
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r.json);
	else
		output_row(stdout, r.json, job_columns);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

/* ---- reports ---- */

static const struct output_column util_columns[] = {
	{ "PROJECT", "project" },
	{ "POOL", "pool" },
	{ "GPU-HOURS", "allocated_gpu_hours" },
	{ "MEASURED", "measured_gpu_hours" },
	{ "IDLE", "idle_gpu_hours" },
	{ "ACTIVITY", "average_activity" },
	{ "BILLED", "billed" },
	{ "IDLE COST", "idle_cost" },
	{ "CURRENCY", "currency" },
	{ NULL, NULL },
};

static void
money(struct json_object *o, const char *from, const char *to)
{
	struct json_object *v = gp_client_json_get(o, from);
	char buf[48];
	int64_t m;
	uint64_t a;

	if (v == NULL || !json_object_is_type(v, json_type_int))
		return;
	m = json_object_get_int64(v);
	a = m < 0 ? (uint64_t)0 - (uint64_t)m : (uint64_t)m;
	snprintf(buf, sizeof(buf), "%s%" PRIu64 ".%06" PRIu64, m < 0 ? "-" : "", a / 1000000,
	    a % 1000000);
	json_object_object_add(o, to, json_object_new_string(buf));
}

static int
reports_utilization(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	char path[EXPORT_PATH_MAX] = "/v1/reports/utilization";
	struct gp_client_response r;
	struct json_object *rows;
	int rc;

	if (cli_opt(args, "from") == NULL || cli_opt(args, "to") == NULL)
		return cli_usage_error(cli, cmd, "--from and --to are required");
	if (cli_query_add(cli, path, sizeof(path), "from", cli_opt(args, "from")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "to", cli_opt(args, "to")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "group_by", cli_opt(args, "group-by")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "project", cli_opt(args, "project")) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r.json);
	} else {
		rows = gp_client_json_get(r.json, "rows");
		for (size_t i = 0; rows != NULL && i < json_object_array_length(rows); i++) {
			struct json_object *it = json_object_array_get_idx(rows, i);

			money(it, "billed_micro", "billed");
			money(it, "idle_cost_micro", "idle_cost");
		}
		output_table(stdout, rows, util_columns);
	}
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static const struct cli_option util_options[] = {
	{ "from", "TIME", "RFC 3339 start (required)", false },
	{ "to", "TIME", "RFC 3339 end (required)", false },
	{ "group-by", "G", "project (default) or pool", false },
	{ "project", "P", "only this project", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_command reports_subcommands[] = {
	{
	    .name = "utilization",
	    .usage = "--from TIME --to TIME [--group-by project|pool] [--project P]",
	    .summary = "allocated versus used GPU-hours, idle hours and idle cost",
	    .help = "GPU-hours are whole-GPU equivalents (a MIG instance counts its compute\n"
		    "slices / 7, A30 / 4). Idle: no workload on the device, or SM activity\n"
		    "below the idle threshold. IDLE COST is the billed share that was idle.",
	    .max_args = 0,
	    .options = util_options,
	    .run = reports_utilization,
	},
	{ .name = NULL },
};

const struct cli_command cmd_reports_commands[] = {
	{
	    .name = "reports",
	    .summary = "reports: utilization and idle cost",
	    .subcommands = reports_subcommands,
	},
	{ .name = NULL },
};
