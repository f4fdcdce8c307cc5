/*
 * main.c - gpupool-agent: flags, then the agent loop (agent.c) or a
 * one-shot read-only discovery (--discover).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "report.h"

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: gpupool-agent --server URL --enroll-token T --node-name NAME --state-dir DIR\n"
	    "         --backend fake|nvidia-smi|nvml [--fake-gpus FILE] [--listen HOST:PORT]\n"
	    "         [--poll-interval S] [--metrics-interval S]\n"
	    "       gpupool-agent --discover --backend B [--node-name N --state-dir D ...]\n");
}

int
main(int argc, char **argv)
{
	struct ag_backend_config bc = { 0 };
	const char *backend = NULL;
	bool discover = false;
	static const struct option opts[] = {
		{ "backend", required_argument, NULL, 'b' },
		{ "node-name", required_argument, NULL, 'n' },
		{ "state-dir", required_argument, NULL, 'd' },
		{ "fake-gpus", required_argument, NULL, 'f' },
		{ "discover", no_argument, NULL, 'D' },
		{ "dry-run", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			backend = optarg;
			break;
		case 'n':
			bc.node_name = optarg;
			break;
		case 'd':
			bc.state_dir = optarg;
			break;
		case 'f':
			bc.fake_gpus = optarg;
			break;
		case 'D':
			discover = true;
			break;
		case 'r':
			bc.dry_run = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (backend == NULL || !discover) {
		usage(stderr);
		return 2;
	}
	if (bc.node_name == NULL)
		bc.node_name = "node";
	if (bc.state_dir == NULL)
		bc.state_dir = ".";
	char err[256];
	struct ag_backend *b = ag_backend_open(backend, &bc, err, sizeof(err));
	if (b == NULL) {
		fprintf(stderr, "gpupool-agent: %s\n", err);
		return 1;
	}
	struct ag_node node;
	if (b->ops->discover(b, &node, err, sizeof(err)) != 0) {
		fprintf(stderr, "gpupool-agent: %s\n", err);
		ag_backend_close(b);
		return 1;
	}
	struct json_object *o = report_discovery(&node);
	printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
	json_object_put(o);
	ag_backend_close(b);
	return 0;
}
