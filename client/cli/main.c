/*
 * main.c - the gpupool command-line client: global options, the config
 * file, and the top-level command table assembled from the command
 * group files (cmd_*.c). To add a command group, write cmd_<group>.c
 * exporting a table and list it in command_groups below.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "output.h"
#include "cmd_agents.h"
#include "cmd_audit.h"
#include "cmd_auth.h"
#include "cmd_billing.h"
#include "cmd_billing_export.h"
#include "cmd_capacity.h"
#include "cmd_catalog.h"
#include "cmd_gpus.h"
#include "cmd_nodes.h"
#include "cmd_pools.h"
#include "cmd_projects.h"
#include "cmd_requests.h"
#include "cmd_tokens.h"
#include "cmd_users.h"

#define MAIN_MAX_COMMANDS 64
#define MAIN_VERSION "0.1.0"

static const struct cli_command *const command_groups[] = {
	cmd_auth_commands,
	cmd_projects_commands,
	cmd_tokens_commands,
	cmd_users_commands,
	cmd_nodes_commands,
	cmd_gpus_commands,
	cmd_catalog_commands,
	cmd_capacity_commands,
	cmd_pools_commands,
	cmd_requests_commands,
	cmd_billing_commands,
	cmd_agents_commands,
	cmd_reports_commands,
	cmd_audit_commands,
	NULL,
};

static int main_completion_cmd(struct cli *cli, const struct cli_command *cmd,
    const struct cli_args *args);

static const struct cli_command completion_command = {
	.name = "completion",
	.usage = "bash|zsh|fish",
	.summary = "print a shell completion script",
	.help = "Print a completion script for bash, zsh or fish, built from the command\n"
		"table (every command, subcommand and option):\n"
		"  bash: source <(gpupool completion bash)\n"
		"  zsh:  source <(gpupool completion zsh)\n"
		"  fish: gpupool completion fish | source",
	.min_args = 1,
	.max_args = 1,
	.run = main_completion_cmd,
};

static struct cli_command commands[MAIN_MAX_COMMANDS + 1];

static void
main_build_table(void)
{
	size_t n = 0;

	for (size_t g = 0; command_groups[g] != NULL; g++) {
		for (const struct cli_command *c = command_groups[g]; c->name != NULL; c++) {
			if (n < MAIN_MAX_COMMANDS)
				commands[n++] = *c;
		}
	}
	if (n < MAIN_MAX_COMMANDS)
		commands[n++] = completion_command;
	commands[n].name = NULL;
}

static void
main_help(FILE *out)
{
	cli_print_table_help(commands, "gpupool", out == stderr);
	fprintf(out,
	    "\nglobal options (anywhere on the command line):\n"
	    "  -o, --output FORMAT       table (default), wide (a table with more columns),\n"
	    "                            json, yaml, or name (the first column only)\n"
	    "  --no-headers              tables without their header line\n"
	    "  --server URL              the gpupool server, e.g. http://127.0.0.1:8080\n"
	    "  -h, --help                this help; after a command, that command's help\n"
	    "  --version                 print the version\n"
	    "\nenvironment: GPUPOOL_SERVER, GPUPOOL_TOKEN override the config file\n"
	    "config file: $GPUPOOL_CONFIG, else $XDG_CONFIG_HOME/gpupool/config or\n"
	    "             ~/.config/gpupool/config\n"
	    "exit status: 0 success, 1 the server or the network failed, 2 usage error\n"
	    "             (capacity simulate: 7 when the items do not fit; capacity\n"
	    "             defrag apply --wait, get --watch: 8 when the plan ends other\n"
	    "             than applied)\n");
}

static int
main_set_output(struct cli *cli, const char *v)
{
	/* yaml renders what json would; name prints a table's first column only */
	if (strcmp(v, "table") == 0) {
		cli->output = CLI_OUTPUT_TABLE;
		output_set_format(OUTPUT_PLAIN);
	} else if (strcmp(v, "json") == 0) {
		cli->output = CLI_OUTPUT_JSON;
		output_set_format(OUTPUT_PLAIN);
	} else if (strcmp(v, "yaml") == 0) {
		cli->output = CLI_OUTPUT_JSON;
		output_set_format(OUTPUT_YAML);
	} else if (strcmp(v, "wide") == 0) {
		cli->output = CLI_OUTPUT_TABLE;
		output_set_format(OUTPUT_WIDE_TABLE);
	} else if (strcmp(v, "name") == 0) {
		cli->output = CLI_OUTPUT_TABLE;
		output_set_format(OUTPUT_NAME);
	} else {
		fprintf(stderr,
		    "gpupool: unknown output format \"%s\" (expected table, wide, json, yaml or "
		    "name)\n",
		    v);
		return -1;
	}
	return 0;
}

/*
 * Take the global options out of argv, leaving the command and its own
 * arguments in rest. Returns 0 to go on, or -1 to end now (help,
 * version, usage error) with the exit status in *status.
 */
/*
 * -o names a file, not a format, for "gpupool billing export" (the
 * issue's fixed form "... --format focus -o nov.csv") when its value is
 * not an output format.
 */
static bool
main_output_file(char **rest, int nrest, const char *opt, const char *val)
{
	(void)opt;
	if (strcmp(val, "table") == 0 || strcmp(val, "wide") == 0 || strcmp(val, "json") == 0 ||
	    strcmp(val, "yaml") == 0 || strcmp(val, "name") == 0)
		return false;
	return nrest >= 2 && strcmp(rest[0], "billing") == 0 && strcmp(rest[1], "export") == 0;
}

/* "--output-file=VAL" (kept until exit) */
static char *
main_output_file_arg(const char *val)
{
	static const char pre[] = "--output-file=";
	size_t n = sizeof(pre) + strlen(val);
	char *s = malloc(n);

	if (s != NULL)
		snprintf(s, n, "%s%s", pre, val);
	return s != NULL ? s : (char *)"--output-file";
}

static int
main_parse_globals(struct cli *cli, int argc, char **argv, char **rest, int *nrest, int *status)
{
	bool have_command = false, dashdash = false;

	*nrest = 0;
	*status = CLI_EXIT_USAGE;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = NULL;

		if (dashdash) {
			rest[(*nrest)++] = argv[i];
			continue;
		}
		if (strcmp(a, "--") == 0) {
			dashdash = true;
			rest[(*nrest)++] = argv[i];
			continue;
		}
		if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0 ||
		    strcmp(a, "--server") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr, "gpupool: option %s needs a value\n", a);
				return -1;
			}
			val = argv[++i];
		} else if (strncmp(a, "--output=", 9) == 0) {
			val = a + 9;
		} else if (strncmp(a, "-o", 2) == 0 && a[2] != '\0') {
			val = a + 2;
		} else if (strncmp(a, "--server=", 9) == 0) {
			val = a + 9;
		}
		if (val != NULL) {
			if ((a[1] == 'o' || strncmp(a, "--output", 8) == 0) &&
			    main_output_file(rest, *nrest, a, val)) {
				/* gpupool billing export ... -o FILE: the file to write */
				if (val == argv[i]) {
					rest[(*nrest)++] = "--output-file";
					rest[(*nrest)++] = argv[i];
				} else {
					rest[(*nrest)++] = main_output_file_arg(val);
				}
			} else if (a[1] == 'o' || strncmp(a, "--output", 8) == 0) {
				if (main_set_output(cli, val) != 0)
					return -1;
			} else {
				cli->server_flag = val;
			}
			continue;
		}
		if (!have_command && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
			main_help(stdout);
			*status = CLI_EXIT_OK;
			return -1;
		}
		if (strcmp(a, "--no-headers") == 0) {
			output_set_no_headers(true);
			continue;
		}
		if (!have_command && strcmp(a, "--version") == 0) {
			printf("gpupool %s\n", MAIN_VERSION);
			*status = CLI_EXIT_OK;
			return -1;
		}
		if (!have_command && a[0] == '-') {
			fprintf(stderr, "gpupool: unknown option %s\n", a);
			return -1;
		}
		have_command = true;
		rest[(*nrest)++] = argv[i];
	}
	return 0;
}

/* The words that may follow a command: its subcommands and its options. */
static void
main_words(const struct cli_command *c, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (const struct cli_command *sc = c->subcommands; sc != NULL && sc->name != NULL; sc++)
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%s ", sc->name);
	for (const struct cli_option *o = c->options; o != NULL && o->name != NULL; o++)
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "--%s ", o->name);
	if (off >= len && len > 0)
		buf[len - 1] = '\0';
}

/* s for the inside of a single-quoted shell word ('\'' for bash, \' for fish). */
static void
main_quoted(const char *s, bool fish)
{
	for (; s != NULL && *s != '\0'; s++) {
		if (*s == '\'')
			fputs(fish ? "\\'" : "'\\''", stdout);
		else
			putchar(*s);
	}
}

/*
 * bash: one case per command path, deepest first (children before their
 * parent), so that "billing rates list" wins over "billing rates".
 */
static void
main_bash_cases(const struct cli_command *table, const char *path)
{
	char words[4096], sub[256];

	for (const struct cli_command *c = table; c->name != NULL; c++) {
		snprintf(sub, sizeof(sub), "%s %s", path, c->name);
		if (c->subcommands != NULL)
			main_bash_cases(c->subcommands, sub);
		if (c->run == NULL && c->subcommands == NULL)
			continue;
		main_words(c, words, sizeof(words));
		if (strcmp(sub, " completion") == 0)
			snprintf(words, sizeof(words), "bash zsh fish");
		printf("\t\"%s\"|\"%s \"*) words=\"%s\" ;;\n", sub, sub, words);
	}
}

/* fish: per command path, its subcommands and its options. */
static void
main_fish(const struct cli_command *table, const char *cond)
{
	char next[1024], names[2048];
	size_t off = 0;

	names[0] = '\0';
	for (const struct cli_command *c = table; c->name != NULL; c++)
		off += (size_t)snprintf(names + off, off < sizeof(names) ? sizeof(names) - off : 0,
		    "%s%s", off ? " " : "", c->name);
	for (const struct cli_command *c = table; c->name != NULL; c++) {
		if (cond[0] == '\0')
			printf("complete -c gpupool -f -n '__fish_use_subcommand' -a '%s' -d '",
			    c->name);
		else
			printf("complete -c gpupool -f -n '%s; and not __fish_seen_subcommand_from "
			       "%s' -a '%s' -d '",
			    cond, names, c->name);
		main_quoted(c->summary, true);
		printf("'\n");
		snprintf(next, sizeof(next), "%s%s__fish_seen_subcommand_from %s", cond,
		    cond[0] ? "; and " : "", c->name);
		for (const struct cli_option *o = c->options; o != NULL && o->name != NULL; o++) {
			printf("complete -c gpupool -f -n '%s' -l '%s'%s -d '", next, o->name,
			    o->arg != NULL ? " -r" : "");
			main_quoted(o->help, true);
			printf("'\n");
		}
		if (strcmp(c->name, "completion") == 0 && cond[0] == '\0')
			printf("complete -c gpupool -f -n '%s' -a 'bash zsh fish'\n", next);
		if (c->subcommands != NULL)
			main_fish(c->subcommands, next);
	}
}

/*
 * gpupool completion bash|zsh|fish: a completion script built from the
 * command table, every level of it (so a new command completes without
 * touching this).
 */
static int
main_completion(const char *shell)
{
	char words[4096];

	if (shell == NULL ||
	    (strcmp(shell, "bash") != 0 && strcmp(shell, "zsh") != 0 &&
		strcmp(shell, "fish") != 0)) {
		fprintf(stderr,
		    "usage: gpupool completion bash|zsh|fish\n"
		    "  bash: source <(gpupool completion bash)\n"
		    "  zsh:  source <(gpupool completion zsh)\n"
		    "  fish: gpupool completion fish | source\n");
		return CLI_EXIT_USAGE;
	}
	if (strcmp(shell, "fish") == 0) {
		main_fish(commands, "");
		printf(
		    "complete -c gpupool -s o -l output -x -a 'table wide json yaml name'\n"
		    "complete -c gpupool -l server -r\n"
		    "complete -c gpupool -l no-headers\n"
		    "complete -c gpupool -l model -x -a '(gpupool catalog -o name 2>/dev/null)'\n"
		    "complete -c gpupool -l project -x -a '(gpupool projects list -o name "
		    "2>/dev/null)'\n"
		    "complete -c gpupool -l cluster -x -a '(gpupool clusters list -o name "
		    "2>/dev/null)'\n"
		    "complete -c gpupool -l node -x -a '(gpupool nodes list -o name 2>/dev/null)'\n"
		    "complete -c gpupool -l profile -x -a '(gpupool catalog get (gpupool catalog -o "
		    "name 2>/dev/null) -o name 2>/dev/null | string replace -r \".*/\" \"\")'\n");
		return CLI_EXIT_OK;
	}
	if (strcmp(shell, "zsh") == 0)
		printf("autoload -U +X bashcompinit && bashcompinit\n");
	/*
	 * Option values and items first: -o's formats, and the server's own
	 * models, MIG profiles, projects, clusters and nodes (asked with the
	 * --server of the line, quietly: no answer completes nothing); after a
	 * "/" the model's MODEL/PROFILE specs (request create, capacity
	 * simulate, quota set ...). The gpupool they call is the user's (an
	 * alias is expanded where this script is sourced).
	 */
	printf(
	    "_gpupool_values() {\n"
	    "\tlocal prev=\"$1\" cur=\"$2\" srv=() m i\n"
	    "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n"
	    "\t\t[ \"${COMP_WORDS[i]}\" = --server ] && srv=(--server \"${COMP_WORDS[i + 1]}\")\n"
	    "\t\t[ \"${COMP_WORDS[i]}\" = --model ] && m=\"${COMP_WORDS[i + 1]}\"\n"
	    "\tdone\n"
	    "\tcase \"$prev\" in\n"
	    "\t-o | --output) echo \"table wide json yaml name\" ;;\n"
	    "\t--model) gpupool \"${srv[@]}\" catalog -o name 2>/dev/null ;;\n"
	    "\t--project) gpupool \"${srv[@]}\" projects list -o name 2>/dev/null ;;\n"
	    "\t--cluster) gpupool \"${srv[@]}\" clusters list -o name 2>/dev/null ;;\n"
	    "\t--node) gpupool \"${srv[@]}\" nodes list -o name 2>/dev/null ;;\n"
	    "\t--profile)\n"
	    "\t\t[ -n \"$m\" ] || m=$(gpupool \"${srv[@]}\" catalog -o name 2>/dev/null)\n"
	    "\t\tfor i in $m; do gpupool \"${srv[@]}\" catalog get \"$i\" -o name 2>/dev/null; "
	    "done | sed 's|.*/||' | sort -u ;;\n"
	    "\t*)\n"
	    "\t\tcase \"$cur\" in\n"
	    "\t\t-*) return 1 ;;\n"
	    "\t\t*/*) gpupool \"${srv[@]}\" catalog get \"${cur%%%%/*}\" -o name 2>/dev/null ;;\n"
	    "\t\t*) return 1 ;;\n"
	    "\t\tesac ;;\n"
	    "\tesac\n"
	    "}\n");
	printf("_gpupool() {\n"
	       "\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" path=\"\" words=\"\" i v\n"
	       "\tif v=$(_gpupool_values \"${COMP_WORDS[COMP_CWORD - 1]}\" \"$cur\"); then\n"
	       "\t\tCOMPREPLY=($(compgen -W \"$v\" -- \"$cur\"))\n"
	       "\t\treturn\n"
	       "\tfi\n"
	       "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n"
	       "\t\tcase \"${COMP_WORDS[i]}\" in\n"
	       "\t\t-o | --output | --server) i=$((i + 1)) ;;\n"
	       "\t\t-*) ;;\n"
	       "\t\t*) path=\"$path ${COMP_WORDS[i]}\" ;;\n"
	       "\t\tesac\n"
	       "\tdone\n"
	       "\tcase \"$path\" in\n");
	main_bash_cases(commands, "");
	words[0] = '\0';
	for (const struct cli_command *c = commands; c->name != NULL; c++) {
		size_t off = strlen(words);

		snprintf(words + off, sizeof(words) - off, "%s%s", off ? " " : "", c->name);
	}
	printf("\t*) words=\"%s\" ;;\n", words);
	printf("\tesac\n"
	       "\tCOMPREPLY=($(compgen -W \"$words --output --server --no-headers --help\" -- "
	       "\"$cur\"))\n"
	       "}\n"
	       "complete -F _gpupool gpupool\n");
	return CLI_EXIT_OK;
}

static int
main_completion_cmd(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	(void)cli;
	(void)cmd;
	return main_completion(args->pos[0]);
}

int
main(int argc, char **argv)
{
	struct cli cli;
	char errbuf[512];
	char **rest = NULL;
	int nrest, rc;

	memset(&cli, 0, sizeof(cli));
	cli.prog = "gpupool";
	cli.output = CLI_OUTPUT_TABLE;
	main_build_table();
	rest = calloc((size_t)argc + 1, sizeof(*rest));
	if (rest == NULL) {
		fputs("gpupool: out of memory\n", stderr);
		return CLI_EXIT_FAIL;
	}
	if (main_parse_globals(&cli, argc, argv, rest, &nrest, &rc) != 0)
		goto done;
	if (nrest == 0) {
		main_help(stderr);
		rc = CLI_EXIT_USAGE;
		goto done;
	}
	/* completion needs no config file */
	if (strcmp(rest[0], "completion") == 0 && nrest == 2 && rest[1][0] != '-') {
		rc = main_completion(rest[1]);
		goto done;
	}
	if (config_load(&cli.config, errbuf, sizeof(errbuf)) != 0) {
		rc = cli_fail(&cli, "%s", errbuf);
		goto done;
	}
	cli.root = commands;
	rc = cli_dispatch(&cli, commands, "gpupool", nrest, rest);
done:
	if (fflush(stdout) != 0 && rc == CLI_EXIT_OK)
		rc = cli_fail(&cli, "could not write the output");
	gp_client_destroy(cli.client);
	config_free(&cli.config);
	free(rest);
	return rc;
}
