/* ftvmctl: drives a local ftvm node through libftvm (INTERFACES.md, ftvmctl).
 *
 *   ftvmctl [--config FILE | --socket PATH] [--json] COMMAND [ARGS]
 *
 * Exit codes are an interface: 0 done; 1 refused or failed, with the reason on
 * stderr; 2 usage error; 3 the node cannot be reached. --json output is built
 * with json-c only, and its keys are what outside scripts rely on. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "config.h"
#include "ftvm.h"
#include "ftvm_build.h"

enum {
	EXIT_DONE = 0,
	EXIT_FAILED = 1,
	EXIT_USAGE = 2,
	EXIT_UNREACHABLE = 3,
};

struct ctl {
	const char *config_path;
	const char *socket_path; /* --socket, or $FTVM_SOCKET */
	char *socket_from_config;
	bool json;
};

struct command {
	const char *name;
	const char *args;    /* after the name, for usage lines */
	const char *summary; /* one line for the command list */
	const char *help;    /* the rest of `ftvmctl COMMAND --help` */
	int (*run)(struct ctl *ctl, int argc, char **argv);
};

static void print_commands(FILE *f);

static void usage(FILE *f)
{
	fprintf(f, "Usage: ftvmctl [--config FILE | --socket PATH] [--json] COMMAND [ARGS]\n"
		   "\n"
		   "Drives the local ftvm node through its client socket.\n"
		   "\n"
		   "Options:\n"
		   "  -c, --config FILE   the node's configuration file; its socket is used\n"
		   "  -s, --socket PATH   the node's client socket (default: $FTVM_SOCKET)\n"
		   "  -j, --json          print the result as JSON\n"
		   "  -h, --help          show this help; COMMAND --help shows a command's\n"
		   "  -V, --version       show the version\n"
		   "\n");
	print_commands(f);
	fprintf(f, "\n"
		   "Exit status: 0 done, 1 refused or failed (reason on stderr), 2 usage error,\n"
		   "3 the node cannot be reached.\n");
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("ftvmctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'ftvmctl --help'.\n", stderr);
	return EXIT_USAGE;
}

/* getopt_long with opterr off: names what was wrong in our own words. */
static int bad_option(int c, char **argv)
{
	if (c == ':')
		return usage_error("option '%s' needs an argument", argv[optind - 1]);
	if (optopt)
		return usage_error("unknown option '-%c'", optopt);
	return usage_error("unknown option '%s'", argv[optind - 1]);
}

/* Where the node is: --config's socket, --socket, or $FTVM_SOCKET. */
static int resolve_socket(struct ctl *ctl, const char **ret)
{
	struct ftvm_config *cfg;
	char err[512];
	int r;

	if (ctl->config_path) {
		r = config_load(ctl->config_path, &cfg, err, sizeof(err));
		if (r < 0) {
			fprintf(stderr, "ftvmctl: %s\n", err[0] ? err : strerror(-r));
			return EXIT_USAGE;
		}
		ctl->socket_from_config = strdup(cfg->socket_path);
		config_free(cfg);
		if (!ctl->socket_from_config) {
			fprintf(stderr, "ftvmctl: out of memory\n");
			return EXIT_FAILED;
		}
		*ret = ctl->socket_from_config;
		return EXIT_DONE;
	}
	if (ctl->socket_path) {
		*ret = ctl->socket_path;
		return EXIT_DONE;
	}
	return usage_error("which node? give --config FILE or --socket PATH (or set FTVM_SOCKET)");
}

static int ctl_connect(struct ctl *ctl, struct ftvm_client **ret, const char **ret_path)
{
	const char *path = NULL;
	int r;

	r = resolve_socket(ctl, &path);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_connect(path, ret);
	if (r < 0) {
		fprintf(stderr, "ftvmctl: cannot reach the node at %s: %s\n", path, strerror(-r));
		return EXIT_UNREACHABLE;
	}
	*ret_path = path;
	return EXIT_DONE;
}

/* Exit code and message for a failed call: the node's refusal is 1, a node
 * that went away or stopped answering is 3. */
static int call_failed(struct ftvm_client *c, const char *path, const char *what, int r)
{
	if (!ftvm_last_error_from_node(c) &&
	    (r == -ETIMEDOUT || r == -ECONNRESET || r == -ENOTCONN || r == -EPIPE)) {
		fprintf(stderr, "ftvmctl: cannot reach the node at %s: %s\n", path,
			ftvm_last_error(c)[0] ? ftvm_last_error(c) : strerror(-r));
		return EXIT_UNREACHABLE;
	}
	fprintf(stderr, "ftvmctl: %s: %s\n", what,
		ftvm_last_error(c)[0] ? ftvm_last_error(c) : strerror(-r));
	return EXIT_FAILED;
}

static void print_json(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
						       JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* Options every command takes: --help, and --json after the command too. */
static int parse_command_options(struct ctl *ctl, const struct command *cmd, int argc, char **argv)
{
	static const struct option options[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "json", no_argument, NULL, 'j' },
		{},
	};
	int c;

	optind = 0; /* GNU: start over on the command's own argv */
	while ((c = getopt_long(argc, argv, "+:hj", options, NULL)) != -1) {
		switch (c) {
		case 'h':
			printf("Usage: ftvmctl [--config FILE | --socket PATH] [--json] %s%s%s\n\n%s",
			       cmd->name, cmd->args[0] ? " " : "", cmd->args, cmd->help);
			return -1;
		case 'j':
			ctl->json = true;
			break;
		default:
			return bad_option(c, argv);
		}
	}
	return EXIT_DONE;
}

static void format_ago(char *buf, size_t len, uint64_t ms)
{
	if (ms < 1000)
		snprintf(buf, len, "%" PRIu64 " ms", ms);
	else if (ms < 60 * 1000)
		snprintf(buf, len, "%.1f s", (double)ms / 1000);
	else if (ms < 3600 * 1000)
		snprintf(buf, len, "%" PRIu64 " min %" PRIu64 " s", ms / 60000, ms / 1000 % 60);
	else
		snprintf(buf, len, "%" PRIu64 " h %" PRIu64 " min", ms / 3600000, ms / 60000 % 60);
}

static const char *or_unknown(const char *s)
{
	return s[0] ? s : "unknown";
}

static void status_print_text(const struct ftvm_node_status *st)
{
	bool up = strcmp(st->partner_link, "up") == 0;
	char ago[64];

	printf("node %s: %s, epoch %" PRIu64 "\n", st->node, or_unknown(st->state), st->epoch);
	if (st->transport_reason[0])
		printf("transport: %s (%s)\n", or_unknown(st->transport), st->transport_reason);
	else
		printf("transport: %s\n", or_unknown(st->transport));
	printf("partner %s: link %s, state %s, endpoint %s",
	       st->partner_id[0] ? st->partner_id : "(not yet seen)",
	       st->partner_link[0] ? st->partner_link : "down", or_unknown(st->partner_state),
	       st->partner_endpoint[0] ? st->partner_endpoint : "-");
	if (!up) {
		if (st->partner_id[0]) {
			format_ago(ago, sizeof(ago), st->partner_last_seen_ms);
			printf(", last seen %s ago", ago);
		} else {
			printf(", never seen");
		}
	}
	printf("\n");
	printf("frames: %" PRIu64 " total, %" PRIu64 " free (page size %" PRIu32 ")\n",
	       st->frames_total, st->frames_free, st->page_size);
	printf("allocations: %" PRIu64 " own, %" PRIu64 " partner\n", st->allocations_own,
	       st->allocations_partner);
}

static int status_print_json(const struct ftvm_node_status *st)
{
	json_object *o = json_object_new_object();
	json_object *partner = json_object_new_object();
	json_object *frames = json_object_new_object();
	json_object *allocations = json_object_new_object();

	if (!o || !partner || !frames || !allocations) {
		json_object_put(o);
		json_object_put(partner);
		json_object_put(frames);
		json_object_put(allocations);
		fprintf(stderr, "ftvmctl: out of memory\n");
		return EXIT_FAILED;
	}
	json_object_object_add(o, "node", json_object_new_string(st->node));
	json_object_object_add(o, "state", json_object_new_string(st->state));
	json_object_object_add(o, "epoch", json_object_new_uint64(st->epoch));
	json_object_object_add(o, "transport", json_object_new_string(st->transport));
	json_object_object_add(o, "transport_reason", json_object_new_string(st->transport_reason));
	json_object_object_add(o, "pid", json_object_new_int64(st->pid));
	json_object_object_add(o, "page_size", json_object_new_uint64(st->page_size));

	json_object_object_add(partner, "id", json_object_new_string(st->partner_id));
	json_object_object_add(partner, "link", json_object_new_string(st->partner_link));
	json_object_object_add(partner, "state", json_object_new_string(st->partner_state));
	json_object_object_add(partner, "endpoint", json_object_new_string(st->partner_endpoint));
	json_object_object_add(partner, "link_changes",
			       json_object_new_uint64(st->partner_link_changes));
	json_object_object_add(partner, "last_seen_ms",
			       json_object_new_uint64(st->partner_last_seen_ms));
	json_object_object_add(o, "partner", partner);

	json_object_object_add(frames, "total", json_object_new_uint64(st->frames_total));
	json_object_object_add(frames, "free", json_object_new_uint64(st->frames_free));
	json_object_object_add(o, "frames", frames);

	json_object_object_add(allocations, "own", json_object_new_uint64(st->allocations_own));
	json_object_object_add(allocations, "partner",
			       json_object_new_uint64(st->allocations_partner));
	json_object_object_add(o, "allocations", allocations);

	print_json(o);
	json_object_put(o);
	return EXIT_DONE;
}

static int cmd_status(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_node_status st;
	struct ftvm_client *c;
	const char *path = NULL;
	int r;

	if (argc > 0)
		return usage_error("status takes no arguments (got '%s')", argv[0]);
	r = ctl_connect(ctl, &c, &path);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_status(c, &st);
	if (r < 0) {
		r = call_failed(c, path, "status", r);
		goto out;
	}
	if (ctl->json) {
		r = status_print_json(&st);
	} else {
		status_print_text(&st);
		r = EXIT_DONE;
	}
out:
	ftvm_disconnect(c);
	return r;
}

static const struct command commands[] = {
	{
		.name = "status",
		.args = "",
		.summary = "node and partner state",
		.help = "Shows the node's state and epoch, its partner channel and link, and its\n"
			"frame and allocation counts.\n"
			"\n"
			"With --json prints one object:\n"
			"  {\"node\",\"state\",\"epoch\",\"transport\",\"transport_reason\",\"pid\",\n"
			"   \"page_size\",\"partner\":{\"id\",\"link\",\"state\",\"endpoint\",\n"
			"   \"link_changes\",\"last_seen_ms\"},\"frames\":{\"total\",\"free\"},\n"
			"   \"allocations\":{\"own\",\"partner\"}}\n"
			"state is one of starting, active, solo, resyncing, fenced.\n",
		.run = cmd_status,
	},
};

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void print_commands(FILE *f)
{
	fprintf(f, "Commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-18s  %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{},
	};
	struct ctl ctl = { 0 };
	const struct command *cmd;
	const char *env;
	int c, r;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:c:s:jhV", options, NULL)) != -1) {
		switch (c) {
		case 'c':
			ctl.config_path = optarg;
			break;
		case 's':
			ctl.socket_path = optarg;
			break;
		case 'j':
			ctl.json = true;
			break;
		case 'h':
			usage(stdout);
			return EXIT_DONE;
		case 'V':
			printf("ftvmctl %s\n", FTVM_VERSION);
			return EXIT_DONE;
		default:
			return bad_option(c, argv);
		}
	}
	if (ctl.config_path && ctl.socket_path)
		return usage_error("give --config or --socket, not both");
	if (!ctl.config_path && !ctl.socket_path) {
		env = getenv("FTVM_SOCKET");
		if (env && env[0])
			ctl.socket_path = env;
	}
	if (optind >= argc) {
		fprintf(stderr, "ftvmctl: no command given\n");
		print_commands(stderr);
		fputs("Try 'ftvmctl --help'.\n", stderr);
		return EXIT_USAGE;
	}
	cmd = find_command(argv[optind]);
	if (!cmd) {
		fprintf(stderr, "ftvmctl: unknown command '%s'\n", argv[optind]);
		print_commands(stderr);
		fputs("Try 'ftvmctl --help'.\n", stderr);
		return EXIT_USAGE;
	}

	argc -= optind;
	argv += optind;
	r = parse_command_options(&ctl, cmd, argc, argv);
	if (r < 0)
		return EXIT_DONE; /* --help was shown */
	if (r != EXIT_DONE)
		return r;
	r = cmd->run(&ctl, argc - optind, argv + optind);
	free(ctl.socket_from_config);
	/* Output a script did not get is a failure, not success. */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "ftvmctl: cannot write the output: %s\n", strerror(errno));
		if (r == EXIT_DONE)
			r = EXIT_FAILED;
	}
	return r;
}
