/* ftvmctl: drives a local ftvm node through libftvm (INTERFACES.md, ftvmctl).
 *
 *   ftvmctl [--config FILE | --socket PATH] [--json] COMMAND [ARGS]
 *
 * Exit codes are an interface: 0 done; 1 refused or failed, with the reason on
 * stderr; 2 usage error; 3 the node cannot be reached. --json output is built
 * with json-c only, and its keys are what outside scripts rely on. */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "build_info.h"
#include "config.h"
#include "drill.h"
#include "ftvm.h"
#include "keyfile.h"
#include "metrics_text.h"
#include "store_admin.h"
#include "trace_dump.h"
#include "trace_replay.h"
#include "trace_text.h"

#define FAILBACK_TRIES 300 /* of 100 ms */

enum {
	EXIT_DONE = 0,
	EXIT_FAILED = 1,
	EXIT_USAGE = 2,
	EXIT_UNREACHABLE = 3,
};

/* Options of single commands: getopt_long values above any character. */
enum {
	OPT_SIZE = 0x100,
	OPT_POLICY,
	OPT_IMMEDIATE,
	OPT_HEADER_FILE,
	OPT_FILE,
	OPT_WAIT,
	OPT_PARTNER_CONFIG,
	OPT_FTVMD,
	OPT_PAGES,
	OPT_TIMEOUT,
	OPT_CHANNELS,
	OPT_KEEP,
	OPT_FORCE,
	OPT_YES,
	OPT_PAGE_SIZE,
	OPT_PARTITION,
	OPT_ACCESS,
	OPT_NAME,
	OPT_SESSION,
	OPT_HOME,
	OPT_VOLUME,
	OPT_NOW,
	OPT_COUNT,
};

/* The most --partition and --access a command takes. */
#define SETTINGS_MAX 16

struct ctl {
	const char *config_path;
	const char *socket_path; /* --socket, or $FTVM_SOCKET */
	char *socket_from_config;
	bool json;
	/* The command's own options, as given (NULL: not given). */
	const char *size;
	const char *policy;
	bool immediate;
	const char *header_file;
	const char *file;
	bool wait;
	const char *partner_config;
	const char *ftvmd;
	const char *pages;
	const char *timeout;
	const char *channels;
	bool keep;
	bool force;
	bool yes;
	const char *page_size;
	const char *name;   /* alloc --name: the client name the allocation is made for */
	bool session;	    /* alloc --session */
	const char *home;   /* volume create --home */
	const char *volume; /* drill --volume */
	bool now;	    /* events --now */
	const char *count;  /* events --count */
	const char *partitions[SETTINGS_MAX];
	size_t n_partitions;
	const char *access[SETTINGS_MAX];
	size_t n_access;
};

struct command {
	const char *name;
	const char *args;    /* after the name, for usage lines */
	const char *summary; /* one line for the command list */
	const char *help;    /* the rest of `ftvmctl COMMAND --help` */
	/* Options beyond --help and --json, ending with a zeroed entry; NULL for none. */
	const struct option *options;
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
		   "  -V, --version       show the version and the features built in\n"
		   "\n");
	print_commands(f);
	fprintf(f, "\n"
		   "Exit status: 0 done, 1 refused or failed (reason on stderr), 2 usage error,\n"
		   "3 the node cannot be reached.\n");
}

static int vusage_error(const char *cmd, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static int vusage_error(const char *cmd, const char *fmt, va_list ap)
{
	fputs("ftvmctl: ", stderr);
	vfprintf(stderr, fmt, ap);
	if (cmd)
		fprintf(stderr, "\nTry 'ftvmctl %s --help'.\n", cmd);
	else
		fputs("\nTry 'ftvmctl --help'.\n", stderr);
	return EXIT_USAGE;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vusage_error(NULL, fmt, ap);
	va_end(ap);
	return r;
}

/* A usage error in a command's arguments points at the command's --help. */
static int command_usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int command_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vusage_error(cmd, fmt, ap);
	va_end(ap);
	return r;
}

/* getopt_long with opterr off: names what was wrong in our own words. cmd is
 * the command whose options these are, or NULL for ftvmctl's own. */
static int bad_option(int c, char **argv, const char *cmd)
{
	if (c == ':')
		return command_usage_error(cmd, "option '%s' needs an argument", argv[optind - 1]);
	if (cmd && optopt >= '0' && optopt <= '9')
		return command_usage_error(cmd, "unknown option '-%c' (a PAGE is a number from 0)",
					   optopt);
	if (optopt)
		return command_usage_error(cmd, "unknown option '-%c'", optopt);
	return command_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
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
 * that went away or stopped answering is 3. The message is what failed, the
 * meaning of r, and the details (the node's reason when it refused):
 *   ftvmctl: write a-1 3: page is locked (a-1 page 3 is write-locked by b/77/2) */
static int call_failed(struct ftvm_client *c, const char *path, const char *what, int r)
{
	const char *meaning = ftvm_strerror(r), *detail = ftvm_last_error(c);

	if (!ftvm_last_error_from_node(c) &&
	    (r == -ETIMEDOUT || r == -ECONNRESET || r == -ENOTCONN || r == -EPIPE)) {
		fprintf(stderr, "ftvmctl: cannot reach the node at %s: %s\n", path,
			detail[0] ? detail : meaning);
		return EXIT_UNREACHABLE;
	}
	if (detail[0] && strcmp(detail, meaning) != 0)
		fprintf(stderr, "ftvmctl: %s: %s (%s)\n", what, meaning, detail);
	else
		fprintf(stderr, "ftvmctl: %s: %s\n", what, meaning);
	return EXIT_FAILED;
}

/* A refusal decided here rather than by the node, in the same form. */
static int refused(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int refused(const char *what, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ftvmctl: %s: ", what);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_FAILED;
}

/* o[key] = v: the many counters of status and sense. */
static void add_uint64(json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_uint64(v));
}

/* A new object at the end of array a; NULL when out of memory, a then
 * released with all it holds (the rows' builders give up on it). */
static json_object *append_object(json_object *a)
{
	json_object *o = json_object_new_object();

	if (!o || json_object_array_add(a, o) < 0) {
		json_object_put(o);
		json_object_put(a);
		return NULL;
	}
	return o;
}

static void print_json(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
						       JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* Options every command takes (--help, and --json after the command too)
 * and the command's own. They may come before or after its arguments; the
 * arguments are left at argv[optind...]. "--" ends the options. */
static int parse_command_options(struct ctl *ctl, const struct command *cmd, int argc, char **argv)
{
	struct option options[16] = {
		{ "help", no_argument, NULL, 'h' },
		{ "json", no_argument, NULL, 'j' },
	};
	size_t n = 2;
	int c;

	for (const struct option *o = cmd->options; o && o->name; o++) {
		assert(n + 1 < sizeof(options) / sizeof(options[0]));
		options[n++] = *o;
	}
	optind = 0; /* GNU: start over on the command's own argv */
	while ((c = getopt_long(argc, argv, ":hj", options, NULL)) != -1) {
		switch (c) {
		case 'h':
			printf("Usage: ftvmctl [--config FILE | --socket PATH] [--json] %s%s%s\n\n%s",
			       cmd->name, cmd->args[0] ? " " : "", cmd->args, cmd->help);
			return -1;
		case 'j':
			ctl->json = true;
			break;
		case OPT_SIZE:
			ctl->size = optarg;
			break;
		case OPT_POLICY:
			ctl->policy = optarg;
			break;
		case OPT_IMMEDIATE:
			ctl->immediate = true;
			break;
		case OPT_HEADER_FILE:
			ctl->header_file = optarg;
			break;
		case OPT_FILE:
			ctl->file = optarg;
			break;
		case OPT_WAIT:
			ctl->wait = true;
			break;
		case OPT_PARTNER_CONFIG:
			ctl->partner_config = optarg;
			break;
		case OPT_FTVMD:
			ctl->ftvmd = optarg;
			break;
		case OPT_PAGES:
			ctl->pages = optarg;
			break;
		case OPT_TIMEOUT:
			ctl->timeout = optarg;
			break;
		case OPT_CHANNELS:
			ctl->channels = optarg;
			break;
		case OPT_KEEP:
			ctl->keep = true;
			break;
		case OPT_FORCE:
			ctl->force = true;
			break;
		case OPT_YES:
			ctl->yes = true;
			break;
		case OPT_PAGE_SIZE:
			ctl->page_size = optarg;
			break;
		case OPT_NAME:
			ctl->name = optarg;
			break;
		case OPT_SESSION:
			ctl->session = true;
			break;
		case OPT_HOME:
			ctl->home = optarg;
			break;
		case OPT_VOLUME:
			ctl->volume = optarg;
			break;
		case OPT_NOW:
			ctl->now = true;
			break;
		case OPT_COUNT:
			ctl->count = optarg;
			break;
		case OPT_PARTITION:
			if (ctl->n_partitions == SETTINGS_MAX)
				return command_usage_error(cmd->name, "more than %d --partition",
							   SETTINGS_MAX);
			ctl->partitions[ctl->n_partitions++] = optarg;
			break;
		case OPT_ACCESS:
			if (ctl->n_access == SETTINGS_MAX)
				return command_usage_error(cmd->name, "more than %d --access",
							   SETTINGS_MAX);
			ctl->access[ctl->n_access++] = optarg;
			break;
		default:
			return bad_option(c, argv, cmd->name);
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

/* Colours for a terminal only: never into a pipe or a file, nor when
 * NO_COLOR is set (no-color.org). */
static bool use_colour(void)
{
	const char *no = getenv("NO_COLOR");

	return isatty(STDOUT_FILENO) && !(no && no[0]);
}

/* A state or link word in its colour: green where all is well, yellow
 * where the pair is not whole, cyan on the way, red where the node or link
 * is out. buf holds the result. */
static const char *coloured(const char *word, char *buf, size_t len)
{
	static const struct {
		const char *word, *sgr;
	} colours[] = {
		{ "active", "32" },    { "up", "32" },	   { "solo", "33" }, { "starting", "36" },
		{ "resyncing", "36" }, { "fenced", "31" }, { "down", "31" },
	};

	if (!use_colour())
		return word;
	for (size_t i = 0; i < sizeof(colours) / sizeof(colours[0]); i++)
		if (strcmp(word, colours[i].word) == 0) {
			snprintf(buf, len, "\033[1;%sm%s\033[0m", colours[i].sgr, word);
			return buf;
		}
	return word;
}

/* The newest pages gone back to the store's copy that status shows. */
#define RECOVERY_IN_STATUS 16
/* Pages asked for per call by `ftvmctl recovery` (the node sends 4096). */
#define RECOVERY_BATCH 4096

/* ms since the epoch as UTC, e.g. 2026-11-27T19:40:01.123Z. */
static void format_wall_clock(char *buf, size_t len, uint64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm)) {
		snprintf(buf, len, "%" PRIu64 " ms", ms);
		return;
	}
	snprintf(buf + strlen(buf), len - strlen(buf), ".%03uZ", (unsigned)(ms % 1000));
}

static json_object *recovered_json(const struct ftvm_recovered *rec)
{
	json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	add_uint64(o, "id", rec->id);
	add_uint64(o, "at_ms", rec->at_ms);
	json_object_object_add(o, "guid", json_object_new_string(rec->guid));
	add_uint64(o, "page", rec->page);
	add_uint64(o, "from_version", rec->from_version);
	add_uint64(o, "to_version", rec->to_version);
	json_object_object_add(o, "why", json_object_new_string(rec->why));
	return o;
}

static void recovered_print_text(const struct ftvm_recovered *rec)
{
	char at[64];

	format_wall_clock(at, sizeof(at), rec->at_ms);
	printf("%s %s page %" PRIu64 ": version %" PRIu64 " lost, back to %" PRIu64 " (%s)\n", at,
	       rec->guid, rec->page, rec->from_version, rec->to_version, rec->why);
}

/* status's "recovery" list: the newest few pages gone back to the store's copy. */
static json_object *status_recovery_list(struct ftvm_client *c, const struct ftvm_node_status *st)
{
	struct ftvm_recovered rec[RECOVERY_IN_STATUS];
	json_object *list = json_object_new_array();
	size_t n = 0;

	if (!list)
		return NULL;
	if (st->recovered_pages &&
	    ftvm_recovery_list(c, 0, true, rec, RECOVERY_IN_STATUS, &n, NULL) < 0)
		n = 0;
	for (size_t i = 0; i < n; i++)
		json_object_array_add(list, recovered_json(&rec[i]));
	return list;
}

/* ---- status, from the rows of FTVM_STATUS_FIELDS (ftvm_status.h) ------ */

enum status_kind {
	KIND_U64,
	KIND_U32,
	KIND_I64,
	KIND_BOOL,
	KIND_STR
};
/* How a row shows in the text: not in the lines the table makes (TEXT_HEAD,
 * TEXT_NONE), or as ftvm_status.h's "how" says. */
enum status_how {
	HOW_NOT,
	HOW_NUM,
	HOW_AGO,
	HOW_WALL,
	HOW_FLAG
};

struct status_row {
	size_t offset; /* in struct ftvm_node_status */
	enum status_kind kind;
	unsigned json_slot, json_pos;
	const char *json_group, *json_key;
	unsigned text_line, text_pos; /* 0: not in the lines the table makes */
	enum status_how text_how;
	bool text_if; /* the first of a line shown only when it is not zero */
	const char *text_before, *text_after;
};

/* (Its parameters are short: .kind is a member it sets.) */
#define STATUS_ROW(k, n, w, j, t) \
	{ .offset = offsetof(struct ftvm_node_status, n), .kind = ROW_KIND_##k, ROW_##j, ROW_##t },
#define ROW_KIND_U64 KIND_U64
#define ROW_KIND_U32 KIND_U32
#define ROW_KIND_I64 KIND_I64
#define ROW_KIND_BOOL KIND_BOOL
#define ROW_KIND_STR(n) KIND_STR
#define ROW_JSON(slot, group, pos, key) \
	.json_slot = slot, .json_pos = pos, .json_group = #group, .json_key = key
#define ROW_TEXT(line, pos, how, before, after)                                           \
	.text_line = line, .text_pos = pos, .text_how = HOW_##how, .text_before = before, \
	.text_after = after
#define ROW_TEXT_IF(line, pos, how, before, after) \
	ROW_TEXT(line, pos, how, before, after), .text_if = true
#define ROW_TEXT_HEAD .text_how = HOW_NOT
#define ROW_TEXT_NONE .text_how = HOW_NOT

static const struct status_row status_rows[] = { FTVM_STATUS_FIELDS(STATUS_ROW) };
#define N_STATUS_ROWS (sizeof(status_rows) / sizeof(status_rows[0]))

/* A number row's value; strings are read with status_string(). */
static uint64_t status_number(const struct ftvm_node_status *st, const struct status_row *r)
{
	const char *p = (const char *)st + r->offset;

	switch (r->kind) {
	case KIND_U64:
		return *(const uint64_t *)p;
	case KIND_U32:
		return *(const uint32_t *)p;
	case KIND_I64:
		return (uint64_t) * (const int64_t *)p;
	case KIND_BOOL:
		return *(const bool *)p;
	case KIND_STR:
		break;
	}
	assert(!"a string row read as a number");
	return 0;
}

static const char *status_string(const struct ftvm_node_status *st, const struct status_row *r)
{
	assert(r->kind == KIND_STR);
	return (const char *)st + r->offset;
}

/* Orders by (major, minor): a row's place in the text or the JSON. */
static int place_cmp(unsigned x_major, unsigned x_minor, unsigned y_major, unsigned y_minor)
{
	if (x_major != y_major)
		return x_major < y_major ? -1 : 1;
	return x_minor < y_minor ? -1 : x_minor > y_minor;
}

static int by_text_place(const void *a, const void *b)
{
	const struct status_row *x = *(const struct status_row *const *)a;
	const struct status_row *y = *(const struct status_row *const *)b;

	return place_cmp(x->text_line, x->text_pos, y->text_line, y->text_pos);
}

static int by_json_place(const void *a, const void *b)
{
	const struct status_row *x = *(const struct status_row *const *)a;
	const struct status_row *y = *(const struct status_row *const *)b;

	return place_cmp(x->json_slot, x->json_pos, y->json_slot, y->json_pos);
}

/* The rows, all N_STATUS_ROWS of them, in the order of place. */
static void status_rows_sorted(const struct status_row **ret,
			       int (*place)(const void *, const void *))
{
	for (size_t i = 0; i < N_STATUS_ROWS; i++)
		ret[i] = &status_rows[i];
	qsort(ret, N_STATUS_ROWS, sizeof(*ret), place);
}

static void status_print_fragment(const struct ftvm_node_status *st, const struct status_row *r)
{
	uint64_t v = status_number(st, r);
	char buf[64];

	switch (r->text_how) {
	case HOW_NUM:
		printf("%s%" PRIu64 "%s", r->text_before, v, r->text_after);
		break;
	case HOW_AGO:
		format_ago(buf, sizeof(buf), v);
		printf("%s%s%s", r->text_before, buf, r->text_after);
		break;
	case HOW_WALL:
		format_wall_clock(buf, sizeof(buf), v);
		printf("%s%s%s", r->text_before, buf, r->text_after);
		break;
	case HOW_FLAG:
		if (v)
			printf("%s%s", r->text_before, r->text_after);
		break;
	case HOW_NOT:
		break;
	}
}

static void status_print_text(const struct ftvm_node_status *st)
{
	const struct status_row *sorted[N_STATUS_ROWS];
	unsigned line = 0;
	bool shown = false;
	bool up = strcmp(st->partner_link, "up") == 0;
	char ago[64], state[64], link[64], partner_state[64];

	printf("node %s: %s, epoch %" PRIu64 "\n", st->node,
	       coloured(or_unknown(st->state), state, sizeof(state)), st->epoch);
	if (st->reason[0])
		printf("  %s\n", st->reason);
	if (st->transport_reason[0])
		printf("transport: %s (%s)", or_unknown(st->transport), st->transport_reason);
	else
		printf("transport: %s", or_unknown(st->transport));
	/* An older node does not say. */
	printf(st->ack[0] ? "; acknowledges at %s\n" : "\n", st->ack);
	printf("partner %s: link %s, state %s, endpoint %s",
	       st->partner_id[0] ? st->partner_id : "(not yet seen)",
	       coloured(st->partner_link[0] ? st->partner_link : "down", link, sizeof(link)),
	       coloured(or_unknown(st->partner_state), partner_state, sizeof(partner_state)),
	       st->partner_endpoint[0] ? st->partner_endpoint : "-");
	if (up && st->partner_ack[0])
		printf(", acknowledges at %s%s", st->partner_ack,
		       strcmp(st->partner_ack, st->ack) != 0
			       ? ", not as this node (set [node] ack the same on both)"
			       : "");
	if (!up) {
		if (st->partner_id[0]) {
			format_ago(ago, sizeof(ago), st->partner_last_seen_ms);
			printf(", last seen %s ago", ago);
		} else {
			printf(", never seen");
		}
	}
	printf("\n");
	printf("partner channel: %s", strcmp(st->partner_auth, "key") == 0
					      ? "the partner proves the key_file"
					      : "no key_file (loopback only)");
	if (st->partner_auth_failures || st->partner_address_refused)
		printf("; refused %" PRIu64 " that did not prove it, %" PRIu64
		       " from another address",
		       st->partner_auth_failures, st->partner_address_refused);
	printf("\n");
	format_ago(ago, sizeof(ago), st->partner_store_silent_ms);
	printf("partner in the store: %s, epoch %" PRIu64 ", heartbeat %s ago\n",
	       or_unknown(st->partner_store_state), st->partner_store_epoch, ago);
	if (st->store_error[0])
		printf("fence slots: %s\n", st->store_error);
	/* The lines the table makes, each line's fields in their order. */
	status_rows_sorted(sorted, by_text_place);
	for (size_t i = 0; i < N_STATUS_ROWS; i++) {
		const struct status_row *r = sorted[i];

		if (!r->text_line)
			continue;
		if (r->text_line != line) {
			if (shown)
				printf("\n");
			line = r->text_line;
			shown = !r->text_if || status_number(st, r);
		}
		if (shown)
			status_print_fragment(st, r);
	}
	if (shown)
		printf("\n");
}

/* The object of group in o, made and added on first use; NULL: no memory. */
static json_object *status_json_group(json_object *o, const char *group)
{
	json_object *g;

	if (strcmp(group, "top") == 0)
		return o;
	if (json_object_object_get_ex(o, group, &g))
		return g;
	g = json_object_new_object();
	if (g)
		json_object_object_add(o, group, g);
	return g;
}

static int status_print_json(struct ftvm_client *c, const struct ftvm_node_status *st)
{
	const struct status_row *sorted[N_STATUS_ROWS];
	json_object *o = json_object_new_object(), *g = NULL;

	status_rows_sorted(sorted, by_json_place);
	for (size_t i = 0; o && i < N_STATUS_ROWS; i++) {
		const struct status_row *r = sorted[i];

		g = status_json_group(o, r->json_group);
		if (!g)
			break;
		if (r->kind == KIND_STR)
			json_object_object_add(g, r->json_key,
					       json_object_new_string(status_string(st, r)));
		else if (r->kind == KIND_I64)
			json_object_object_add(
				g, r->json_key,
				json_object_new_int64((int64_t)status_number(st, r)));
		else if (r->kind == KIND_BOOL)
			json_object_object_add(g, r->json_key,
					       json_object_new_boolean(status_number(st, r)));
		else
			add_uint64(g, r->json_key, status_number(st, r));
	}
	if (g)
		g = status_json_group(o, "recovery");
	if (!g) {
		json_object_put(o);
		fprintf(stderr, "ftvmctl: out of memory\n");
		return EXIT_FAILED;
	}
	json_object_object_add(g, "list", status_recovery_list(c, st));
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
		r = status_print_json(c, &st);
	} else {
		status_print_text(&st);
		r = EXIT_DONE;
	}
out:
	ftvm_disconnect(c);
	return r;
}

/* ---- Data commands ---------------------------------------------------- */

/* The GUID and PAGE arguments: exactly the ones cmd wants (want_page). */
static int parse_target(const char *cmd, int argc, char **argv, bool want_page,
			const char **ret_guid, uint64_t *ret_page)
{
	int want = want_page ? 2 : 1;
	const char *s;
	uint64_t page = 0;

	if (argc < want)
		return command_usage_error(cmd, "%s needs %s", cmd,
					   want_page ? "a GUID and a PAGE" : "a GUID");
	if (argc > want)
		return command_usage_error(cmd, "%s takes %s (got also '%s')", cmd,
					   want_page ? "GUID PAGE" : "GUID", argv[want]);
	if (!ftvm_guid_valid(argv[0]))
		return command_usage_error(cmd, "'%s' is not a GUID", argv[0]);
	if (want_page) {
		s = argv[1];
		if (!*s)
			return command_usage_error(cmd,
						   "PAGE is empty (want a page number from 0)");
		for (; *s; s++) {
			unsigned d = (unsigned)(*s - '0');

			if (d > 9 || page > (UINT64_MAX - d) / 10)
				return command_usage_error(
					cmd,
					"PAGE '%s' is not a page number (want a decimal from 0)",
					argv[1]);
			page = page * 10 + d;
		}
	}
	*ret_guid = argv[0];
	*ret_page = page;
	return EXIT_DONE;
}

/* Reads f to its end, or up to max + 1 bytes: *ret_len > max means the input
 * is longer than max. *ret is malloc'ed (at least one byte). -errno on a read
 * error. */
static int read_input(FILE *f, size_t max, uint8_t **ret, size_t *ret_len)
{
	size_t cap = max < 65536 ? max + 1 : 65536, len = 0, n;
	uint8_t *buf = malloc(cap), *p;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (len == cap) {
			if (len > max)
				break;
			cap = cap > max + 1 - cap ? max + 1 : cap * 2;
			p = realloc(buf, cap);
			if (!p) {
				free(buf);
				return -ENOMEM;
			}
			buf = p;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0) {
			if (ferror(f)) {
				free(buf);
				return -EIO;
			}
			break;
		}
	}
	*ret = buf;
	*ret_len = len;
	return 0;
}

static char *to_hex(const uint8_t *data, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	char *s = malloc(2 * len + 1);

	if (!s)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		s[2 * i] = digits[data[i] >> 4];
		s[2 * i + 1] = digits[data[i] & 0xf];
	}
	s[2 * len] = '\0';
	return s;
}

static int out_of_memory(void)
{
	fprintf(stderr, "ftvmctl: out of memory\n");
	return EXIT_FAILED;
}

/* Prints o and drops it; NULL (a failed json_object_new_*) is out of memory. */
static int print_json_put(json_object *o)
{
	if (!o)
		return out_of_memory();
	print_json(o);
	json_object_put(o);
	return EXIT_DONE;
}

/* The allocation's header, and that page is in it: what write and read
 * check before they move a block. */
static int fetch_page_header(struct ftvm_client *c, const char *path, const char *what,
			     const char *guid, uint64_t page, struct ftvm_header *h)
{
	int r = ftvm_header(c, guid, h);

	if (r < 0)
		return call_failed(c, path, what, r);
	if (page >= h->pages)
		return refused(what, "%s (%s has %" PRIu64 " pages, 0 to %" PRIu64 ")",
			       ftvm_strerror(-ENOENT), guid, h->pages,
			       h->pages > 0 ? h->pages - 1 : 0);
	if (h->block_size == 0)
		return refused(what, "the node reports a block size of 0 for %s", guid);
	return EXIT_DONE;
}

static int cmd_alloc(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_alloc_info info;
	struct ftvm_client *c = NULL;
	const char *path = NULL;
	uint8_t *header = NULL;
	size_t header_len = 0;
	uint64_t size;
	json_object *o;
	FILE *f;
	int r;

	if (argc > 0)
		return command_usage_error("alloc", "alloc takes no arguments (got '%s')", argv[0]);
	if (!ctl->size)
		return command_usage_error("alloc", "alloc needs --size N");
	if (config_parse_size(ctl->size, &size) < 0)
		return command_usage_error(
			"alloc",
			"--size '%s' is not a size (want a number with optional K, M or G)",
			ctl->size);
	if (size == 0)
		return command_usage_error("alloc", "--size must be at least 1 byte");
	if (ctl->header_file) {
		f = fopen(ctl->header_file, "rb");
		if (!f)
			return refused("alloc", "cannot open the header file %s: %s",
				       ctl->header_file, strerror(errno));
		r = read_input(f, FTVM_HEADER_MAX, &header, &header_len);
		fclose(f);
		if (r < 0)
			return refused("alloc", "cannot read the header file %s: %s",
				       ctl->header_file, strerror(-r));
		if (header_len > FTVM_HEADER_MAX) {
			r = refused("alloc", "the header file %s is longer than %d bytes",
				    ctl->header_file, FTVM_HEADER_MAX);
			goto out;
		}
	}

	r = ctl_connect(ctl, &c, &path);
	if (r != EXIT_DONE)
		goto out;
	if (ctl->name && ftvm_set_name(c, ctl->name) < 0) {
		r = command_usage_error("alloc", "--name: %s", ftvm_last_error(c));
		goto out;
	}
	r = (ctl->session ? ftvm_alloc_session : ftvm_alloc)(c, size, ctl->policy, ctl->immediate,
							     header, header_len, &info);
	if (r < 0) {
		r = call_failed(c, path, "alloc", r);
		goto out;
	}
	if (ctl->json) {
		o = json_object_new_object();
		if (o) {
			json_object_object_add(o, "guid", json_object_new_string(info.guid));
			add_uint64(o, "pages", info.pages);
			add_uint64(o, "block_size", info.block_size);
		}
		r = print_json_put(o);
	} else {
		printf("%s\n", info.guid);
		r = EXIT_DONE;
	}
out:
	ftvm_disconnect(c);
	free(header);
	return r;
}

static int cmd_write(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_client *c = NULL;
	struct ftvm_header *h = NULL;
	const char *path = NULL, *guid;
	uint8_t *data = NULL;
	size_t len = 0;
	uint64_t page;
	uint32_t crc;
	char what[FTVM_GUID_MAX + 48];
	json_object *o;
	FILE *in = stdin;
	int r;

	r = parse_target("write", argc, argv, true, &guid, &page);
	if (r != EXIT_DONE)
		return r;
	snprintf(what, sizeof(what), "write %s %" PRIu64, guid, page);
	if (ctl->file) {
		in = fopen(ctl->file, "rb");
		if (!in)
			return refused(what, "cannot open %s: %s", ctl->file, strerror(errno));
	}
	h = malloc(sizeof(*h));
	if (!h) {
		r = out_of_memory();
		goto out;
	}

	r = ctl_connect(ctl, &c, &path);
	if (r != EXIT_DONE)
		goto out;
	/* The block size first: the input is read up to one byte past it, so a
	 * longer input is caught here without reading all of it. */
	r = fetch_page_header(c, path, what, guid, page, h);
	if (r != EXIT_DONE)
		goto out;
	r = read_input(in, h->block_size, &data, &len);
	if (r < 0) {
		r = refused(what, "cannot read %s: %s",
			    ctl->file ? ctl->file : "the standard input", strerror(-r));
		goto out;
	}
	if (len > h->block_size) {
		r = refused(what, "the input is longer than the block (%" PRIu32 " bytes)",
			    h->block_size);
		goto out;
	}
	r = ctl->wait ? ftvm_write_page(c, guid, page, data, len, &crc)
		      : ftvm_write_page_try(c, guid, page, data, len, &crc);
	if (r < 0) {
		r = call_failed(c, path, what, r);
		goto out;
	}
	if (ctl->json) {
		o = json_object_new_object();
		if (o) {
			json_object_object_add(o, "guid", json_object_new_string(guid));
			add_uint64(o, "page", page);
			add_uint64(o, "crc32c", crc);
		}
		r = print_json_put(o);
	} else {
		printf("%s page %" PRIu64 ": crc32c 0x%08" PRIx32 "\n", guid, page, crc);
		r = EXIT_DONE;
	}
out:
	ftvm_disconnect(c);
	if (in != stdin)
		fclose(in);
	free(data);
	free(h);
	return r;
}

static int cmd_read(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_client *c = NULL;
	struct ftvm_header *h = NULL;
	const char *path = NULL, *guid;
	uint8_t *block = NULL;
	size_t len = 0;
	uint64_t page;
	uint32_t crc;
	char what[FTVM_GUID_MAX + 48];
	json_object *o;
	FILE *out;
	int r;

	r = parse_target("read", argc, argv, true, &guid, &page);
	if (r != EXIT_DONE)
		return r;
	snprintf(what, sizeof(what), "read %s %" PRIu64, guid, page);
	h = malloc(sizeof(*h));
	if (!h)
		return out_of_memory();

	r = ctl_connect(ctl, &c, &path);
	if (r != EXIT_DONE)
		goto out;
	r = fetch_page_header(c, path, what, guid, page, h);
	if (r != EXIT_DONE)
		goto out;
	block = malloc(h->block_size);
	if (!block) {
		r = out_of_memory();
		goto out;
	}
	r = ctl->wait ? ftvm_read_page(c, guid, page, block, h->block_size, &len, &crc)
		      : ftvm_read_page_try(c, guid, page, block, h->block_size, &len, &crc);
	if (r < 0) {
		r = call_failed(c, path, what, r);
		goto out;
	}

	if (!ctl->file) {
		/* The bytes are the output, with --json too; main() checks that
		 * they were written. */
		fwrite(block, 1, len, stdout);
		r = EXIT_DONE;
		goto out;
	}
	/* Opened only now, so a failed read leaves an existing file alone. */
	out = fopen(ctl->file, "wb");
	if (!out) {
		r = refused(what, "cannot open %s: %s", ctl->file, strerror(errno));
		goto out;
	}
	if (fwrite(block, 1, len, out) != len || fflush(out) != 0 || ferror(out)) {
		r = refused(what, "cannot write %s: %s", ctl->file, strerror(errno));
		fclose(out);
		goto out;
	}
	if (fclose(out) != 0) {
		r = refused(what, "cannot write %s: %s", ctl->file, strerror(errno));
		goto out;
	}
	if (ctl->json) {
		o = json_object_new_object();
		if (o) {
			json_object_object_add(o, "guid", json_object_new_string(guid));
			add_uint64(o, "page", page);
			add_uint64(o, "crc32c", crc);
			add_uint64(o, "bytes", len);
		}
		r = print_json_put(o);
	} else {
		printf("%s page %" PRIu64 ": crc32c 0x%08" PRIx32 ", %zu bytes to %s\n", guid, page,
		       crc, len, ctl->file);
		r = EXIT_DONE;
	}
out:
	ftvm_disconnect(c);
	free(block);
	free(h);
	return r;
}

/* Where the node's copy of guid rests and the partition it takes, from its
 * mapping table (ftvm_mapping); "?" when it lists no such allocation (freed
 * meanwhile). */
static const struct ftvm_mapping *mapping_in(const struct ftvm_mapping *maps, size_t n,
					     const char *guid)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(maps[i].guid, guid) == 0)
			return &maps[i];
	return NULL;
}

static const char *media_in(const struct ftvm_mapping *maps, size_t n, const char *guid)
{
	const struct ftvm_mapping *m = mapping_in(maps, n, guid);

	return m ? m->media : "?";
}

static const char *partition_in(const struct ftvm_mapping *maps, size_t n, const char *guid)
{
	const struct ftvm_mapping *m = mapping_in(maps, n, guid);

	return m ? m->partition : "?";
}

static int cmd_header(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_client *c = NULL;
	struct ftvm_header *h = NULL;
	struct ftvm_mapping map;
	const char *path = NULL, *guid, *media;
	char what[FTVM_GUID_MAX + 16];
	char *hex = NULL;
	uint64_t page;
	json_object *o;
	int r;

	r = parse_target("header", argc, argv, false, &guid, &page);
	if (r != EXIT_DONE)
		return r;
	snprintf(what, sizeof(what), "header %s", guid);
	h = malloc(sizeof(*h));
	if (!h)
		return out_of_memory();

	r = ctl_connect(ctl, &c, &path);
	if (r != EXIT_DONE)
		goto out;
	r = ftvm_header(c, guid, h);
	if (r == 0) {
		r = ftvm_mapping_of(c, guid, &map);
		if (r == -ENOENT) { /* freed since */
			snprintf(map.media, sizeof(map.media), "?");
			snprintf(map.partition, sizeof(map.partition), "?");
		}
		r = r == -ENOENT ? 0 : r;
	}
	if (r < 0) {
		r = call_failed(c, path, what, r);
		goto out;
	}
	media = map.media;
	hex = to_hex(h->header, h->header_len);
	if (!hex) {
		r = out_of_memory();
		goto out;
	}
	if (ctl->json) {
		o = json_object_new_object();
		if (o) {
			json_object_object_add(o, "guid", json_object_new_string(h->guid));
			add_uint64(o, "size", h->size);
			add_uint64(o, "block_size", h->block_size);
			add_uint64(o, "pages", h->pages);
			json_object_object_add(o, "policy", json_object_new_string(h->policy));
			json_object_object_add(o, "home", json_object_new_string(h->home));
			json_object_object_add(o, "owner", json_object_new_string(h->owner));
			add_uint64(o, "uid", h->uid);
			json_object_object_add(o, "media", json_object_new_string(media));
			json_object_object_add(o, "partition",
					       json_object_new_string(map.partition));
			json_object_object_add(o, "header_hex", json_object_new_string(hex));
		}
		r = print_json_put(o);
	} else {
		printf("guid: %s\n", h->guid);
		printf("size: %" PRIu64 "\n", h->size);
		printf("block_size: %" PRIu32 "\n", h->block_size);
		printf("pages: %" PRIu64 "\n", h->pages);
		printf("policy: %s\n", h->policy);
		printf("home: %s\n", h->home);
		printf("owner: %s\n", h->owner);
		printf("uid: %" PRIu32 "\n", h->uid);
		printf("media: %s\n", media);
		printf("partition: %s\n", map.partition);
		printf("header: %zu bytes%s%s\n", h->header_len, h->header_len ? " " : "", hex);
		r = EXIT_DONE;
	}
out:
	ftvm_disconnect(c);
	free(hex);
	free(h);
	return r;
}

static int cmd_free(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_client *c = NULL;
	const char *path = NULL, *guid;
	char what[FTVM_GUID_MAX + 16];
	uint64_t page;
	int r;

	r = parse_target("free", argc, argv, false, &guid, &page);
	if (r != EXIT_DONE)
		return r;
	snprintf(what, sizeof(what), "free %s", guid);

	r = ctl_connect(ctl, &c, &path);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_free(c, guid);
	if (r < 0)
		r = call_failed(c, path, what, r);
	else if (ctl->json)
		r = print_json_put(json_object_new_object());
	else
		r = EXIT_DONE;
	ftvm_disconnect(c);
	return r;
}

static int list_print_json(const struct ftvm_header *hs, size_t n, const struct ftvm_mapping *maps,
			   size_t n_maps)
{
	json_object *a = json_object_new_array(), *o;

	if (!a)
		return out_of_memory();
	for (size_t i = 0; i < n; i++) {
		o = append_object(a);
		if (!o)
			return out_of_memory();
		json_object_object_add(o, "guid", json_object_new_string(hs[i].guid));
		add_uint64(o, "size", hs[i].size);
		add_uint64(o, "block_size", hs[i].block_size);
		add_uint64(o, "pages", hs[i].pages);
		json_object_object_add(o, "policy", json_object_new_string(hs[i].policy));
		json_object_object_add(o, "home", json_object_new_string(hs[i].home));
		json_object_object_add(o, "owner", json_object_new_string(hs[i].owner));
		add_uint64(o, "uid", hs[i].uid);
		json_object_object_add(o, "media",
				       json_object_new_string(media_in(maps, n_maps, hs[i].guid)));
		json_object_object_add(
			o, "partition",
			json_object_new_string(partition_in(maps, n_maps, hs[i].guid)));
	}
	return print_json_put(a);
}

static void list_print_text(const struct ftvm_header *hs, size_t n, const struct ftvm_mapping *maps,
			    size_t n_maps)
{
	int w = (int)strlen("GUID");

	if (n == 0) {
		printf("no allocations\n");
		return;
	}
	for (size_t i = 0; i < n; i++)
		if ((int)strlen(hs[i].guid) > w)
			w = (int)strlen(hs[i].guid);
	printf("%-*s %14s %10s %10s %-12s %-10s %-10s %10s %-6s %s\n", w, "GUID", "SIZE", "BLOCK",
	       "PAGES", "POLICY", "HOME", "OWNER", "UID", "MEDIA", "PARTITION");
	for (size_t i = 0; i < n; i++)
		printf("%-*s %14" PRIu64 " %10" PRIu32 " %10" PRIu64 " %-12s %-10s %-10s %10" PRIu32
		       " %-6s %s\n",
		       w, hs[i].guid, hs[i].size, hs[i].block_size, hs[i].pages, hs[i].policy,
		       hs[i].home, hs[i].owner, hs[i].uid, media_in(maps, n_maps, hs[i].guid),
		       partition_in(maps, n_maps, hs[i].guid));
}

/* A command that takes no arguments, connected to the node: EXIT_DONE, or
 * the exit code of what failed. */
static int connect_no_args(struct ctl *ctl, const char *cmd, int argc, char **argv,
			   struct ftvm_client **ret, const char **ret_path)
{
	if (argc > 0)
		return command_usage_error(cmd, "%s takes no arguments (got '%s')", cmd, argv[0]);
	return ctl_connect(ctl, ret, ret_path);
}

static int cmd_list(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_header *hs = NULL;
	struct ftvm_mapping *maps = NULL;
	struct ftvm_client *c;
	const char *path = NULL;
	size_t n = 0, n_maps = 0;
	int r;

	r = connect_no_args(ctl, "list", argc, argv, &c, &path);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_list(c, &hs, &n);
	if (r == 0)
		r = ftvm_mapping(c, &maps, &n_maps);
	if (r < 0) {
		r = call_failed(c, path, "list", r);
		goto out;
	}
	if (ctl->json) {
		r = list_print_json(hs, n, maps, n_maps);
	} else {
		list_print_text(hs, n, maps, n_maps);
		r = EXIT_DONE;
	}
out:
	free(maps);
	free(hs);
	ftvm_disconnect(c);
	return r;
}

/* The allocate table's rows as a JSON array; NULL when out of memory. */
static json_object *clients_json(const struct ftvm_client_usage *rows, size_t n)
{
	json_object *list = json_object_new_array(), *o;

	for (size_t i = 0; list && i < n; i++) {
		o = append_object(list);
		if (!o)
			return NULL;
		add_uint64(o, "uid", rows[i].uid);
		json_object_object_add(o, "name", json_object_new_string(rows[i].name));
		json_object_object_add(o, "media", json_object_new_string(rows[i].media));
		add_uint64(o, "allocations", rows[i].allocations);
		add_uint64(o, "bytes", rows[i].bytes);
	}
	return list;
}

static void clients_print_text(const struct ftvm_client_usage *rows, size_t n, const char *indent)
{
	printf("%s%-10s  %-32s  %-6s  %11s  %14s\n", indent, "UID", "NAME", "MEDIA", "ALLOCATIONS",
	       "BYTES");
	for (size_t i = 0; i < n; i++)
		printf("%s%-10" PRIu32 "  %-32s  %-6s  %11" PRIu64 "  %14" PRIu64 "\n", indent,
		       rows[i].uid, rows[i].name[0] ? rows[i].name : "-", rows[i].media,
		       rows[i].allocations, rows[i].bytes);
}

static int cmd_clients(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_client_usage *rows = NULL;
	struct ftvm_client *c;
	const char *path = NULL;
	size_t n = 0;
	int r;

	r = connect_no_args(ctl, "clients", argc, argv, &c, &path);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_clients(c, &rows, &n);
	if (r < 0) {
		r = call_failed(c, path, "clients", r);
	} else if (ctl->json) {
		r = print_json_put(clients_json(rows, n));
	} else {
		clients_print_text(rows, n, "");
		r = EXIT_DONE;
	}
	free(rows);
	ftvm_disconnect(c);
	return r;
}

/* The memory partition table's rows as a JSON array: a partition's row has
 * "free", an allocation's range "guid", "uid" and "client" (INTERFACES.md:
 * "client" on every row, "" where the range is no one client's); NULL when
 * out of memory. */
static json_object *partitions_json(const struct ftvm_partition *rows, size_t n)
{
	json_object *list = json_object_new_array(), *o;

	for (size_t i = 0; list && i < n; i++) {
		o = append_object(list);
		if (!o)
			return NULL;
		json_object_object_add(o, "media", json_object_new_string(rows[i].media));
		add_uint64(o, "start", rows[i].start);
		add_uint64(o, "length", rows[i].length);
		json_object_object_add(o, "type", json_object_new_string(rows[i].type));
		json_object_object_add(o, "client", json_object_new_string(rows[i].client));
		if (rows[i].guid[0]) {
			json_object_object_add(o, "guid", json_object_new_string(rows[i].guid));
			add_uint64(o, "uid", rows[i].uid);
		} else {
			add_uint64(o, "free", rows[i].free);
		}
	}
	return list;
}

static void partitions_print_text(const struct ftvm_partition *rows, size_t n, const char *indent)
{
	printf("%s%-6s  %-14s  %16s  %16s  %s\n", indent, "MEDIA", "TYPE", "START", "LENGTH",
	       "FREE, OR WHO HOLDS IT");
	for (size_t i = 0; i < n; i++) {
		const struct ftvm_partition *p = &rows[i];

		printf("%s%-6s  %-14s  %16" PRIu64 "  %16" PRIu64 "  ", indent, p->media, p->type,
		       p->start, p->length);
		if (p->guid[0])
			printf("  %s: uid %" PRIu32 " %s\n", p->guid, p->uid,
			       p->client[0] ? p->client : "-");
		else
			printf("%" PRIu64 " free\n", p->free);
	}
}

/* {"name","size","home","owner","guid","block_size"}; NULL when out of memory. */
static json_object *volume_json(const struct ftvm_volume *vol)
{
	json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "name", json_object_new_string(vol->name));
	add_uint64(o, "size", vol->size);
	json_object_object_add(o, "home", json_object_new_string(vol->home));
	json_object_object_add(o, "owner", json_object_new_string(vol->owner));
	json_object_object_add(o, "guid", json_object_new_string(vol->guid));
	add_uint64(o, "block_size", vol->block_size);
	return o;
}

static int volume_list(struct ctl *ctl, struct ftvm_client *c, const char *path)
{
	struct ftvm_volume *vols = NULL;
	json_object *a;
	size_t n = 0;
	int r = ftvm_volume_list(c, &vols, &n);

	if (r < 0)
		return call_failed(c, path, "volume list", r);
	if (ctl->json) {
		a = json_object_new_array();
		for (size_t i = 0; a && i < n; i++)
			if (json_object_array_add(a, volume_json(&vols[i])) < 0)
				break;
		r = print_json_put(a);
	} else if (n == 0) {
		printf("no volumes\n");
		r = EXIT_DONE;
	} else {
		printf("%-24s %14s %-10s %-10s %s\n", "NAME", "SIZE", "HOME", "OWNER", "GUID");
		for (size_t i = 0; i < n; i++)
			printf("%-24s %14" PRIu64 " %-10s %-10s %s\n", vols[i].name, vols[i].size,
			       vols[i].home, vols[i].owner, vols[i].guid);
		r = EXIT_DONE;
	}
	free(vols);
	return r;
}

static int volume_create(struct ctl *ctl, struct ftvm_client *c, const char *path, const char *name,
			 uint64_t size)
{
	struct ftvm_alloc_info info;
	struct ftvm_volume vol = { 0 };
	struct ftvm_mapping m;
	char what[FTVM_CLIENT_NAME_MAX + 32];
	int r;

	snprintf(what, sizeof(what), "volume create %s", name);
	r = ftvm_volume_create(c, name, size, ctl->home, &info);
	if (r == 0)
		r = ftvm_mapping_of(c, info.guid, &m);
	if (r < 0)
		return call_failed(c, path, what, r);
	snprintf(vol.name, sizeof(vol.name), "%s", name);
	snprintf(vol.guid, sizeof(vol.guid), "%s", info.guid);
	vol.size = size;
	vol.block_size = info.block_size;
	snprintf(vol.home, sizeof(vol.home), "%s", m.home);
	snprintf(vol.owner, sizeof(vol.owner), "%s", m.owner);
	if (ctl->json)
		return print_json_put(volume_json(&vol));
	printf("%s\n", vol.name);
	return EXIT_DONE;
}

static int cmd_volume(struct ctl *ctl, int argc, char **argv)
{
	const char *verb = argc > 0 ? argv[0] : "", *path = NULL;
	struct ftvm_client *c = NULL;
	char what[FTVM_CLIENT_NAME_MAX + 32];
	uint64_t size = 0;
	int r;

	if (strcmp(verb, "list") == 0 && argc != 1)
		return command_usage_error("volume", "volume list takes no arguments");
	if ((strcmp(verb, "create") == 0 || strcmp(verb, "delete") == 0) && argc != 2)
		return command_usage_error("volume", "volume %s takes one NAME", verb);
	if (strcmp(verb, "list") != 0 && strcmp(verb, "create") != 0 && strcmp(verb, "delete") != 0)
		return command_usage_error("volume", "want create NAME, list or delete NAME");
	if (strcmp(verb, "create") != 0 && (ctl->size || ctl->home))
		return command_usage_error("volume", "--size and --home are for create");
	if (strcmp(verb, "create") == 0) {
		if (!ctl->size)
			return command_usage_error("volume", "volume create needs --size N");
		if (config_parse_size(ctl->size, &size) < 0 || size == 0)
			return command_usage_error("volume",
						   "--size '%s' is not a size of at least 1 byte "
						   "(a number with optional K, M or G)",
						   ctl->size);
	}
	r = ctl_connect(ctl, &c, &path);
	if (r != EXIT_DONE)
		return r;
	if (strcmp(verb, "list") == 0) {
		r = volume_list(ctl, c, path);
	} else if (strcmp(verb, "create") == 0) {
		r = volume_create(ctl, c, path, argv[1], size);
	} else {
		snprintf(what, sizeof(what), "volume delete %s", argv[1]);
		r = ftvm_volume_delete(c, argv[1]);
		if (r < 0)
			r = call_failed(c, path, what, r);
		else
			r = ctl->json ? print_json_put(json_object_new_object()) : EXIT_DONE;
	}
	ftvm_disconnect(c);
	return r;
}

static int cmd_partitions(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_partition *rows = NULL;
	struct ftvm_client *c;
	const char *path = NULL;
	size_t n = 0;
	int r;

	r = connect_no_args(ctl, "partitions", argc, argv, &c, &path);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_partitions(c, &rows, &n);
	if (r < 0) {
		r = call_failed(c, path, "partitions", r);
	} else if (ctl->json) {
		r = print_json_put(partitions_json(rows, n));
	} else {
		partitions_print_text(rows, n, "");
		r = EXIT_DONE;
	}
	free(rows);
	ftvm_disconnect(c);
	return r;
}

/* [{"type","capacity","free"}] of n media; NULL when out of memory. */
static json_object *media_json(const struct ftvm_media *media, size_t n)
{
	json_object *a = json_object_new_array(), *m;

	for (size_t i = 0; a && i < n; i++) {
		m = append_object(a);
		if (!m)
			return NULL;
		json_object_object_add(m, "type", json_object_new_string(media[i].type));
		add_uint64(m, "capacity", media[i].capacity);
		add_uint64(m, "free", media[i].free);
	}
	return a;
}

static int sense_print_json(const struct ftvm_sense *s)
{
	json_object *o = json_object_new_object(), *media = media_json(s->media, s->n_media),
		    *cache = media_json(s->cache, s->n_cache), *queues = json_object_new_object();

	if (!o || !media || !cache || !queues) {
		json_object_put(o);
		json_object_put(media);
		json_object_put(cache);
		json_object_put(queues);
		return out_of_memory();
	}
	json_object_object_add(o, "media", media);
	json_object_object_add(o, "cache", cache);
	json_object_object_add(o, "queues", queues);
	add_uint64(queues, "paging", s->paging_queue);
	add_uint64(queues, "destage", s->destage_queue);
	add_uint64(queues, "replacement", s->replacement_queue);
	return print_json_put(o);
}

static int cmd_sense(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_client *c;
	struct ftvm_sense s;
	const char *path = NULL;
	int r;

	r = connect_no_args(ctl, "sense", argc, argv, &c, &path);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_sense(c, &s);
	if (r < 0) {
		r = call_failed(c, path, "sense", r);
		goto out;
	}
	if (ctl->json) {
		r = sense_print_json(&s);
		goto out;
	}
	for (size_t i = 0; i < s.n_media; i++)
		printf("media %s: capacity %" PRIu64 ", free %" PRIu64 "\n", s.media[i].type,
		       s.media[i].capacity, s.media[i].free);
	if (s.n_media == 0)
		printf("media: none reported\n");
	for (size_t i = 0; i < s.n_cache; i++)
		printf("storage cache %s: capacity %" PRIu64 ", free %" PRIu64 "\n",
		       s.cache[i].type, s.cache[i].capacity, s.cache[i].free);
	printf("queues: paging %" PRIu64 ", destage %" PRIu64 ", replacement %" PRIu64 "\n",
	       s.paging_queue, s.destage_queue, s.replacement_queue);
	r = EXIT_DONE;
out:
	ftvm_disconnect(c);
	return r;
}

/* `ftvmctl metrics`: status and sense as Prometheus text (metrics_text.h),
 * the same as the node serves at [metrics] listen. A node that does not
 * answer sense still has its status printed. */
static int cmd_metrics(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_node_status st;
	struct ftvm_client *c;
	struct ftvm_sense sense;
	const char *path = NULL;
	bool have_sense;
	int r;

	r = connect_no_args(ctl, "metrics", argc, argv, &c, &path);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_status(c, &st);
	if (r < 0) {
		r = call_failed(c, path, "status", r);
		goto out;
	}
	r = ftvm_sense(c, &sense);
	if (r < 0 && r != -EOPNOTSUPP) {
		r = call_failed(c, path, "sense", r);
		goto out;
	}
	have_sense = r == 0;
	r = metrics_text_write(stdout, &st, have_sense ? &sense : NULL);
	if (r < 0)
		fprintf(stderr, "ftvmctl: cannot write the metrics: %s\n", strerror(-r));
	r = r < 0 ? EXIT_FAILED : EXIT_DONE;
out:
	ftvm_disconnect(c);
	return r;
}

static int verify_print_json(const struct ftvm_verify *v)
{
	json_object *o = json_object_new_object(), *diffs = json_object_new_array();

	if (!o || !diffs) {
		json_object_put(o);
		json_object_put(diffs);
		return out_of_memory();
	}
	json_object_object_add(o, "equal", json_object_new_boolean(v->equal));
	json_object_object_add(o, "differences", diffs);
	for (size_t i = 0; i < v->n_differences; i++) {
		if (json_object_array_add(diffs, json_object_new_string(v->differences[i])) < 0) {
			json_object_put(o);
			return out_of_memory();
		}
	}
	add_uint64(o, "allocations", v->allocations);
	add_uint64(o, "pages", v->pages);
	add_uint64(o, "busy", v->busy);
	add_uint64(o, "rounds", v->rounds);
	return print_json_put(o);
}

static int cmd_verify(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_client *c;
	struct ftvm_verify v;
	const char *path = NULL;
	int r;

	r = connect_no_args(ctl, "verify", argc, argv, &c, &path);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_verify(c, &v);
	if (r < 0) {
		r = call_failed(c, path, "verify", r);
		goto out;
	}
	if (ctl->json) {
		r = verify_print_json(&v);
		if (r != EXIT_DONE)
			goto out;
	} else if (v.equal) {
		printf("equal: %" PRIu64 " allocations, %" PRIu64 " pages compared", v.allocations,
		       v.pages);
		if (v.busy)
			printf(", %" PRIu64 " busy (a change in flight at each of %" PRIu32
			       " comparisons)",
			       v.busy, v.rounds);
		printf("\n");
	} else {
		for (size_t i = 0; i < v.n_differences; i++)
			printf("%s\n", v.differences[i]);
	}
	r = EXIT_DONE;
	if (!v.equal)
		r = refused("verify",
			    "the nodes differ (%zu differences; %" PRIu64 " allocations, %" PRIu64
			    " pages compared)",
			    v.n_differences, v.allocations, v.pages);
out:
	ftvm_verify_free(&v);
	ftvm_disconnect(c);
	return r;
}

/* ---- tables: seed 003's tables in one view ----
 *
 * Each table comes from its own call, one after the other: the device
 * discovery table (ftvm_discover, Fig. 10), the address mapping table
 * (ftvm_mapping, Fig. 11), the server memory allocate table (ftvm_clients,
 * Fig. 13), and the memory partition table (ftvm_partitions, Fig. 12). */

struct tables {
	struct ftvm_device nodes[FTVM_PAIR_NODES];
	size_t n_nodes;
	const char *node; /* the node asked: whose copies the mapping shows */
	struct ftvm_mapping *maps;
	size_t n_maps;
	struct ftvm_client_usage *usage;
	size_t n_usage;
	struct ftvm_partition *parts;
	size_t n_parts;
};

static json_object *discovery_json(const struct tables *t)
{
	json_object *a = json_object_new_array(), *o, *media;

	for (size_t i = 0; a && i < t->n_nodes; i++) {
		const struct ftvm_device *d = &t->nodes[i];

		o = append_object(a);
		if (!o)
			return NULL;
		media = media_json(d->media, d->n_media);
		if (!media) {
			json_object_put(a); /* and o with it */
			return NULL;
		}
		json_object_object_add(o, "node", json_object_new_string(d->node));
		json_object_object_add(o, "endpoint", json_object_new_string(d->endpoint));
		json_object_object_add(o, "self", json_object_new_boolean(d->self));
		json_object_object_add(o, "reachable", json_object_new_boolean(d->reachable));
		json_object_object_add(o, "serving", json_object_new_boolean(d->serving));
		json_object_object_add(o, "state", json_object_new_string(d->state));
		json_object_object_add(o, "reason", json_object_new_string(d->reason));
		json_object_object_add(o, "media", media);
	}
	return a;
}

static json_object *mapping_json(const struct tables *t)
{
	json_object *a = json_object_new_array(), *o;

	for (size_t i = 0; a && i < t->n_maps; i++) {
		const struct ftvm_mapping *m = &t->maps[i];

		o = append_object(a);
		if (!o)
			return NULL;
		json_object_object_add(o, "guid", json_object_new_string(m->guid));
		json_object_object_add(o, "node", json_object_new_string(t->node));
		json_object_object_add(o, "home", json_object_new_string(m->home));
		json_object_object_add(o, "owner", json_object_new_string(m->owner));
		json_object_object_add(o, "media", json_object_new_string(m->media));
		json_object_object_add(o, "partition", json_object_new_string(m->partition));
		add_uint64(o, "pages", m->pages);
		add_uint64(o, "block_size", m->block_size);
		add_uint64(o, "bytes", m->pages * m->block_size);
	}
	return a;
}

static int tables_print_json(const struct tables *t)
{
	json_object *o = json_object_new_object(), *discovery = discovery_json(t),
		    *mapping = mapping_json(t), *clients = clients_json(t->usage, t->n_usage),
		    *parts = partitions_json(t->parts, t->n_parts);

	if (!o || !discovery || !mapping || !clients || !parts) {
		json_object_put(o);
		json_object_put(discovery);
		json_object_put(mapping);
		json_object_put(clients);
		json_object_put(parts);
		return out_of_memory();
	}
	json_object_object_add(o, "discovery", discovery);
	json_object_object_add(o, "mapping", mapping);
	json_object_object_add(o, "partitions", parts);
	json_object_object_add(o, "clients", clients);
	return print_json_put(o);
}

static int width_of(int w, const char *s)
{
	return (int)strlen(s) > w ? (int)strlen(s) : w;
}

static void discovery_print_text(const struct tables *t)
{
	int wn = (int)strlen("NODE"), we = (int)strlen("ENDPOINT");

	printf("device discovery (seed 003 Fig. 10):\n");
	for (size_t i = 0; i < t->n_nodes; i++) {
		wn = width_of(wn, t->nodes[i].node[0] ? t->nodes[i].node : "?");
		we = width_of(we, t->nodes[i].endpoint);
	}
	printf("  %-*s  %-7s  %-9s  %-7s  %-*s  %-6s  %16s  %16s\n", wn, "NODE", "IS", "STATE",
	       "SERVING", we, "ENDPOINT", "MEDIA", "CAPACITY", "FREE");
	for (size_t i = 0; i < t->n_nodes; i++) {
		const struct ftvm_device *d = &t->nodes[i];

		printf("  %-*s  %-7s  %-9s  %-7s  %-*s  ", wn, d->node[0] ? d->node : "?",
		       d->self ? "this" : "partner", d->state, d->serving ? "yes" : "no", we,
		       d->endpoint);
		if (!d->reachable) {
			printf("not reachable: %s\n", d->reason);
			continue;
		}
		if (d->n_media == 0)
			printf("no media reported\n");
		for (size_t m = 0; m < d->n_media; m++)
			printf("%*s%-6s  %16" PRIu64 "  %16" PRIu64 "\n", m ? wn + we + 35 : 0, "",
			       d->media[m].type, d->media[m].capacity, d->media[m].free);
	}
}

static void mapping_print_text(const struct tables *t)
{
	int wg = (int)strlen("GUID"), wh = (int)strlen("HOME"), wo = (int)strlen("OWNER");

	printf("address mapping (seed 003 Fig. 11), the copies on node %s:\n", t->node);
	if (t->n_maps == 0) {
		printf("  no allocations\n");
		return;
	}
	for (size_t i = 0; i < t->n_maps; i++) {
		wg = width_of(wg, t->maps[i].guid);
		wh = width_of(wh, t->maps[i].home);
		wo = width_of(wo, t->maps[i].owner);
	}
	printf("  %-*s  %-*s  %-*s  %-6s  %10s  %10s  %14s\n", wg, "GUID", wh, "HOME", wo, "OWNER",
	       "MEDIA", "PAGES", "BLOCK", "BYTES");
	for (size_t i = 0; i < t->n_maps; i++) {
		const struct ftvm_mapping *m = &t->maps[i];

		printf("  %-*s  %-*s  %-*s  %-6s  %10" PRIu64 "  %10" PRIu32 "  %14" PRIu64 "\n",
		       wg, m->guid, wh, m->home, wo, m->owner, m->media, m->pages, m->block_size,
		       m->pages * m->block_size);
	}
}

static void tables_print_text(const struct tables *t)
{
	discovery_print_text(t);
	printf("\n");
	mapping_print_text(t);
	printf("\n");
	printf("memory partition (seed 003 Fig. 12), node %s:\n", t->node);
	partitions_print_text(t->parts, t->n_parts, "  ");
	printf("\n");
	printf("server memory allocate (seed 003 Fig. 13):\n");
	if (t->n_usage == 0)
		printf("  no allocations\n");
	else
		clients_print_text(t->usage, t->n_usage, "  ");
}

static int cmd_tables(struct ctl *ctl, int argc, char **argv)
{
	struct tables t = { .node = "" };
	struct ftvm_client *c;
	const char *path = NULL, *what = "tables: device discovery";
	int r;

	r = connect_no_args(ctl, "tables", argc, argv, &c, &path);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_discover(c, t.nodes, &t.n_nodes);
	if (r == 0) {
		what = "tables: address mapping";
		r = ftvm_mapping(c, &t.maps, &t.n_maps);
	}
	if (r == 0) {
		what = "tables: memory partition";
		r = ftvm_partitions(c, &t.parts, &t.n_parts);
	}
	if (r == 0) {
		what = "tables: server memory allocate";
		r = ftvm_clients(c, &t.usage, &t.n_usage);
	}
	if (r < 0) {
		r = call_failed(c, path, what, r);
		goto out;
	}
	for (size_t i = 0; i < t.n_nodes; i++)
		if (t.nodes[i].self)
			t.node = t.nodes[i].node;
	if (ctl->json) {
		r = tables_print_json(&t);
	} else {
		tables_print_text(&t);
		r = EXIT_DONE;
	}
out:
	free(t.usage);
	free(t.parts);
	free(t.maps);
	ftvm_disconnect(c);
	return r;
}

/* A whole number from 1 to max, or -1 (after saying why). */
static long parse_count(const char *cmd, const char *what, const char *s, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > max) {
		command_usage_error(cmd, "%s '%s': want a whole number from 1 to %ld", what, s,
				    max);
		return -1;
	}
	return v;
}

static int cmd_drill(struct ctl *ctl, int argc, char **argv)
{
	static const char *const kinds[] = { [DRILL_KILL] = "kill",
					     [DRILL_HANG] = "hang",
					     [DRILL_CUT] = "cut",
					     [DRILL_RESTART] = "restart" };
	struct drill_options o = { .config_path = ctl->config_path,
				   .partner_config = ctl->partner_config,
				   .ftvmd = ctl->ftvmd,
				   .pages = 16,
				   .timeout_s = 30,
				   .volume = ctl->volume,
				   .json = ctl->json };
	int want, k = -1;
	long v;

	for (int i = 0; argc > 0 && i < 4; i++)
		if (strcmp(argv[0], kinds[i]) == 0)
			k = i;
	if (k < 0)
		return command_usage_error("drill",
					   "want kill NODE, hang NODE SECONDS, cut SECONDS "
					   "or restart NODE");
	o.kind = (enum drill_kind)k;
	want = o.kind == DRILL_HANG ? 3 : 2;
	if (argc != want)
		return command_usage_error("drill", "drill %s takes %s", kinds[k],
					   o.kind == DRILL_HANG	 ? "NODE SECONDS"
					   : o.kind == DRILL_CUT ? "SECONDS"
								 : "NODE");
	if (o.kind != DRILL_CUT)
		o.node = argv[1];
	if (o.kind == DRILL_HANG || o.kind == DRILL_CUT) {
		v = parse_count("drill", "SECONDS", argv[argc - 1], 600);
		if (v < 0)
			return EXIT_USAGE;
		o.seconds = (uint32_t)v;
	}
	if (ctl->pages && (v = parse_count("drill", "--pages", ctl->pages, 4096)) < 0)
		return EXIT_USAGE;
	if (ctl->pages)
		o.pages = (uint32_t)v;
	if (ctl->timeout && (v = parse_count("drill", "--timeout", ctl->timeout, 3600)) < 0)
		return EXIT_USAGE;
	if (ctl->timeout)
		o.timeout_s = (uint32_t)v;
	if (!ctl->config_path)
		return command_usage_error("drill", "a drill needs --config FILE (the partner's "
						    "config is found beside it)");
	return drill_run(&o);
}

/* The partner's config, found beside --config as <partner id>.conf; NULL
 * when there is none. */
static struct ftvm_config *partner_config_beside(struct ctl *ctl, const char *partner_id)
{
	char path[4200], err[256];
	struct ftvm_config *cfg;

	if (!ctl->config_path || !partner_id[0])
		return NULL;
	drill_partner_config_path(ctl->config_path, partner_id, path, sizeof(path));
	return config_load(path, &cfg, err, sizeof(err)) < 0 ? NULL : cfg;
}

/* One round on one node: what it handed back, what it keeps for now. */
static int failback_node(const char *path, uint64_t *handed_back, uint64_t *busy)
{
	struct ftvm_client *c;
	uint64_t h = 0, b = 0;
	int r = ftvm_connect(path, &c);

	if (r < 0) {
		fprintf(stderr, "ftvmctl: cannot reach the node at %s: %s\n", path, strerror(-r));
		return EXIT_UNREACHABLE;
	}
	r = ftvm_failback(c, &h, &b);
	if (r < 0) {
		r = call_failed(c, path, "failback", r);
		ftvm_disconnect(c);
		return r;
	}
	ftvm_disconnect(c);
	*handed_back += h;
	*busy += b;
	return EXIT_DONE;
}

static int cmd_failback(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_node_status st;
	struct ftvm_config *partner;
	struct ftvm_client *c;
	const char *path;
	uint64_t handed_back = 0, busy;
	int r, tries = 0;

	if (argc != 0)
		return command_usage_error("failback", "takes no arguments");
	r = ctl_connect(ctl, &c, &path);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_status(c, &st);
	if (r < 0)
		r = call_failed(c, path, "status", r);
	ftvm_disconnect(c);
	if (r != EXIT_DONE)
		return r;
	/* Either node may hold adopted allocations: ask both, the partner by
	 * the config beside ours. */
	partner = partner_config_beside(ctl, st.partner_id);
	do {
		if (tries++)
			usleep(100 * 1000);
		busy = 0;
		r = failback_node(path, &handed_back, &busy);
		if (r == EXIT_DONE && partner)
			r = failback_node(partner->socket_path, &handed_back, &busy);
	} while (r == EXIT_DONE && busy && tries < FAILBACK_TRIES);
	config_free(partner);
	if (r != EXIT_DONE)
		return r;
	if (busy)
		return refused("failback",
			       "%" PRIu64 " adopted allocations stay: pages locked for "
			       "%d s",
			       busy, FAILBACK_TRIES / 10);
	if (ctl->json)
		return print_json_put(json_object_new_object());
	printf("failback: %" PRIu64 " allocations handed back to their home node\n", handed_back);
	return EXIT_DONE;
}

static int trace_start(struct ctl *ctl, const char *file)
{
	char path[PATH_MAX];
	struct ftvm_client *c;
	const char *socket;
	int r;

	if (ctl->channels && config_parse_trace_channels(ctl->channels) < 0)
		return command_usage_error("trace", "--channels: want all, partner or client");
	/* The node resolves nothing against our working directory: it gets an
	 * absolute path. The file need not exist (it must not). */
	if (file[0] == '/') {
		snprintf(path, sizeof(path), "%s", file);
	} else {
		if (!getcwd(path, sizeof(path)) || strlen(path) + 1 + strlen(file) >= sizeof(path))
			return refused("trace start", "cannot make %s absolute", file);
		strcat(path, "/");
		strcat(path, file);
	}
	r = ctl_connect(ctl, &c, &socket);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_trace_start(c, path, ctl->channels);
	if (r < 0)
		r = call_failed(c, socket, "trace start", r);
	else if (ctl->json)
		r = print_json_put(json_object_new_object());
	else
		printf("recording to %s\n", path);
	ftvm_disconnect(c);
	return r;
}

static int trace_stop(struct ctl *ctl)
{
	struct ftvm_client *c;
	const char *socket;
	uint64_t records = 0;
	int r;

	r = ctl_connect(ctl, &c, &socket);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_trace_stop(c, &records);
	if (r < 0)
		r = call_failed(c, socket, "trace stop", r);
	else if (ctl->json)
		r = print_json_put(json_object_new_object());
	else
		printf("stopped: %" PRIu64 " records\n", records);
	ftvm_disconnect(c);
	return r;
}

static int cmd_keygen(struct ctl *ctl, int argc, char **argv)
{
	char err[512];

	if (argc != 1)
		return command_usage_error("keygen", "want one FILE");
	if (keyfile_generate(argv[0], err, sizeof(err)) < 0) {
		fprintf(stderr, "ftvmctl: keygen: %s\n", err);
		return EXIT_FAILED;
	}
	if (ctl->json)
		return print_json_put(json_object_new_object());
	printf("wrote a new key to %s (mode 0600): copy it to the partner and set [node] "
	       "key_file on both nodes\n",
	       argv[0]);
	return EXIT_DONE;
}

/* store and flash: one header, one management interface (store_admin.h). */
static int store_admin(struct ctl *ctl, enum store_kind kind, int argc, char **argv)
{
	const char *cmd = store_kind_name(kind);
	struct store_admin_init o = {
		.kind = kind,
		.size = ctl->size,
		.page_size = ctl->page_size,
		.partitions = ctl->partitions,
		.n_partitions = ctl->n_partitions,
		.access = ctl->access,
		.n_access = ctl->n_access,
		.force = ctl->force,
		.json = ctl->json,
	};
	bool settings =
		ctl->size || ctl->page_size || ctl->n_partitions || ctl->n_access || ctl->force;

	if (argc != 2 || (strcmp(argv[0], "init") != 0 && strcmp(argv[0], "show") != 0))
		return command_usage_error(cmd, "want init PATH or show PATH");
	if (strcmp(argv[0], "show") == 0) {
		if (settings)
			return command_usage_error(cmd, "show takes no settings");
		return store_admin_show(argv[1], kind, ctl->json);
	}
	o.path = argv[1];
	return store_admin_init(&o);
}

static int cmd_store(struct ctl *ctl, int argc, char **argv)
{
	return store_admin(ctl, STORE_KIND_STORE, argc, argv);
}

static int cmd_flash(struct ctl *ctl, int argc, char **argv)
{
	return store_admin(ctl, STORE_KIND_FLASH, argc, argv);
}

static int cmd_recovery(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_recovered *rec = calloc(RECOVERY_BATCH, sizeof(*rec));
	json_object *list = ctl->json ? json_object_new_array() : NULL;
	struct ftvm_client *c = NULL;
	const char *path;
	uint64_t after = 0, total = 0;
	size_t n;
	int r;

	if (argc != 0) {
		free(rec);
		json_object_put(list);
		return command_usage_error("recovery", "takes no arguments (got '%s')", argv[0]);
	}
	if (!rec || (ctl->json && !list)) {
		free(rec);
		json_object_put(list);
		return out_of_memory();
	}
	r = ctl_connect(ctl, &c, &path);
	if (r != EXIT_DONE)
		goto out;
	do {
		r = ftvm_recovery_list(c, after, false, rec, RECOVERY_BATCH, &n, &total);
		if (r < 0) {
			r = call_failed(c, path, "recovery", r);
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			if (list)
				json_object_array_add(list, recovered_json(&rec[i]));
			else
				recovered_print_text(&rec[i]);
		}
		if (n)
			after = rec[n - 1].id;
	} while (n == RECOVERY_BATCH);
	if (list) {
		r = print_json_put(list);
		list = NULL;
	} else {
		if (!total)
			printf("no page went back to an older version\n");
		r = EXIT_DONE;
	}
out:
	json_object_put(list);
	ftvm_disconnect(c);
	free(rec);
	return r;
}

struct follow {
	bool json;
	long left; /* events to print before stopping; -1: no end */
};

/* A field's value as JSON: a whole number as a number, else a string. */
static json_object *field_json(const char *v)
{
	size_t n = strspn(v, "0123456789");

	if (n && n == strlen(v) && n < 20)
		return json_object_new_uint64(strtoull(v, NULL, 10));
	return json_object_new_string(v);
}

static int print_event(const struct ftvm_event *e, void *arg)
{
	struct follow *f = arg;
	char at[64];

	if (f->json) {
		json_object *o = json_object_new_object();

		if (!o) {
			out_of_memory();
			return 2; /* ends the stream; 1 is --count's */
		}
		add_uint64(o, "seq", e->seq);
		add_uint64(o, "at_ms", e->at_ms);
		json_object_object_add(o, "type", json_object_new_string(e->type));
		json_object_object_add(o, "what", json_object_new_string(e->what));
		json_object_object_add(o, "reason", json_object_new_string(e->reason));
		json_object_object_add(o, "current", json_object_new_boolean(e->current));
		for (size_t i = 0; i < e->n_fields; i++)
			json_object_object_add(o, e->fields[i].key, field_json(e->fields[i].value));
		print_json(o);
		json_object_put(o);
	} else {
		format_wall_clock(at, sizeof(at), e->at_ms);
		printf("%s %s%s %s", at, e->current ? "now " : "", e->type, e->what);
		if (e->reason[0])
			printf(": %s", e->reason);
		for (size_t i = 0; i < e->n_fields; i++)
			printf("%s%s=%s", i ? ", " : " (", e->fields[i].key, e->fields[i].value);
		printf("%s\n", e->n_fields ? ")" : "");
	}
	fflush(stdout);
	return f->left > 0 && --f->left == 0 ? 1 : 0;
}

static int cmd_events(struct ctl *ctl, int argc, char **argv)
{
	struct follow f = { .json = ctl->json, .left = -1 };
	struct ftvm_client *c;
	const char *path;
	int r;

	if (argc != 0)
		return command_usage_error("events", "takes no arguments (got '%s')", argv[0]);
	if (ctl->count && (f.left = parse_count("events", "--count", ctl->count, LONG_MAX)) < 0)
		return EXIT_USAGE;
	r = ctl_connect(ctl, &c, &path);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_events(c, ctl->now, print_event, &f);
	if (r == 1)
		r = EXIT_DONE; /* --count reached */
	else if (r > 0)
		r = EXIT_FAILED; /* out of memory, said */
	else
		r = call_failed(c, path, "events", r);
	ftvm_disconnect(c);
	return r;
}

static int cmd_takeover(struct ctl *ctl, int argc, char **argv)
{
	struct ftvm_node_status st;
	struct ftvm_client *c;
	const char *path;
	int r;

	if (argc != 0)
		return command_usage_error("takeover", "takes no arguments (got '%s')", argv[0]);
	if (!ctl->force)
		return command_usage_error("takeover",
					   "a node takes over by itself when its partner fails; "
					   "--force is for a partner gone for good");
	if (!ctl->yes)
		return command_usage_error(
			"takeover",
			"this gives up whatever the partner acknowledged that this node "
			"never got: say --yes to go on");
	r = ctl_connect(ctl, &c, &path);
	if (r != EXIT_DONE)
		return r;
	r = ftvm_takeover_force(c);
	if (r < 0) {
		r = call_failed(c, path, "takeover", r);
		ftvm_disconnect(c);
		return r;
	}
	r = ftvm_status(c, &st);
	if (r < 0)
		r = call_failed(c, path, "status", r);
	else if (ctl->json)
		r = print_json_put(json_object_new_object());
	else
		printf("%s serves alone at epoch %" PRIu64 ": %s\n", st.node, st.epoch, st.reason);
	ftvm_disconnect(c);
	return r;
}

static int cmd_trace(struct ctl *ctl, int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[0], "start") == 0)
		return trace_start(ctl, argv[1]);
	if (argc == 1 && strcmp(argv[0], "stop") == 0)
		return trace_stop(ctl);
	if (argc == 2 && strcmp(argv[0], "dump") == 0)
		return trace_dump_run(argv[1], ctl->json);
	if (argc == 2 && strcmp(argv[0], "text") == 0)
		return trace_text_run(argv[1]);
	if (argc == 3 && strcmp(argv[0], "binary") == 0)
		return trace_binary_run(argv[1], argv[2]);
	if (argc == 2 && strcmp(argv[0], "replay") == 0) {
		struct replay_options o = {
			.path = argv[1], .ftvmd = ctl->ftvmd, .json = ctl->json, .keep = ctl->keep
		};

		return trace_replay_run(&o);
	}
	return command_usage_error("trace", "want start FILE, stop, dump FILE, replay FILE, "
					    "text FILE or binary TEXT OUT");
}

static const struct option drill_options[] = {
	{ "partner-config", required_argument, NULL, OPT_PARTNER_CONFIG },
	{ "ftvmd", required_argument, NULL, OPT_FTVMD },
	{ "pages", required_argument, NULL, OPT_PAGES },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "volume", required_argument, NULL, OPT_VOLUME },
	{},
};

/* store init and flash init: the device's settings. */
static const struct option device_init_options[] = {
	{ "size", required_argument, NULL, OPT_SIZE },
	{ "page-size", required_argument, NULL, OPT_PAGE_SIZE },
	{ "partition", required_argument, NULL, OPT_PARTITION },
	{ "access", required_argument, NULL, OPT_ACCESS },
	{ "force", no_argument, NULL, OPT_FORCE },
	{},
};

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
	{
		.name = "alloc",
		.args = "--size N [--policy P] [--immediate] [--header-file F] [--name NAME] "
			"[--session]",
		.summary = "allocate memory, mirrored on the partner",
		.help = "Allocates N bytes (suffixes K, M, G: powers of 1024), rounded up to whole\n"
			"blocks of the policy's block size, on this node and its partner, and prints\n"
			"the new allocation's GUID.\n"
			"\n"
			"Options:\n"
			"  --size N           bytes to allocate, at least 1 (required)\n"
			"  --policy P         a [policy P] of the node's configuration (default: the\n"
			"                     default policy, one page per block)\n"
			"  --immediate        refuse at once when there is no space, do not wait\n"
			"  --header-file F    store the bytes of F (at most 4096) as the user header\n"
			"  --name NAME        the client name it is made for, as a program's\n"
			"                     ftvm_connect_named() gives (`ftvmctl clients`)\n"
			"  --session          an allocation that lives as long as its client: as\n"
			"                     ftvmctl's connection ends when it exits, the pair frees\n"
			"                     it [client] session_grace_ms later (for trying out\n"
			"                     sessions; a program uses ftvm_alloc_session())\n"
			"\n"
			"With --json prints {\"guid\",\"pages\",\"block_size\"}.\n",
		.options =
			(const struct option[]){
				{ "size", required_argument, NULL, OPT_SIZE },
				{ "policy", required_argument, NULL, OPT_POLICY },
				{ "immediate", no_argument, NULL, OPT_IMMEDIATE },
				{ "header-file", required_argument, NULL, OPT_HEADER_FILE },
				{ "name", required_argument, NULL, OPT_NAME },
				{ "session", no_argument, NULL, OPT_SESSION },
				{},
			},
		.run = cmd_alloc,
	},
	{
		.name = "write",
		.args = "GUID PAGE [--file F] [--wait]",
		.summary = "write one page (stdin or a file)",
		.help = "Locks page PAGE (from 0) of allocation GUID for writing, copies the input in,\n"
			"and releases it as modified; returns once the partner acknowledged it.\n"
			"The input is the standard input, or F with --file. Input shorter than the\n"
			"block is zero-filled to it; longer input is refused (exit 1).\n"
			"\n"
			"Prints \"GUID page PAGE: crc32c 0x...\", the checksum of the whole block as\n"
			"stored. With --json prints {\"guid\",\"page\",\"crc32c\"} (crc32c a number).\n"
			"A locked page is refused at once (exit 1); with --wait it is waited for in\n"
			"the node's paging queue, up to the node's request_timeout_ms.\n",
		.options =
			(const struct option[]){
				{ "file", required_argument, NULL, OPT_FILE },
				{ "wait", no_argument, NULL, OPT_WAIT },
				{},
			},
		.run = cmd_write,
	},
	{
		.name = "read",
		.args = "GUID PAGE [--file F] [--wait]",
		.summary = "read one page (to stdout or a file)",
		.help = "Locks page PAGE (from 0) of allocation GUID for reading, copies the whole\n"
			"block out, and releases it. The block's checksum is checked on arrival.\n"
			"\n"
			"Without --file the raw bytes of the block go to the standard output, with\n"
			"--json too. With --file F they go to F (replaced only once the read\n"
			"succeeded) and the standard output gets \"GUID page PAGE: crc32c 0x..., N\n"
			"bytes to F\", or with --json {\"guid\",\"page\",\"crc32c\",\"bytes\"}.\n"
			"A write-locked page is refused at once (exit 1); --wait waits for it.\n",
		.options =
			(const struct option[]){
				{ "file", required_argument, NULL, OPT_FILE },
				{ "wait", no_argument, NULL, OPT_WAIT },
				{},
			},
		.run = cmd_read,
	},
	{
		.name = "header",
		.args = "GUID",
		.summary = "an allocation's header",
		.help = "Shows allocation GUID's header (the read-header message): its size, block\n"
			"size, pages, policy, home node, owner node, uid, where this node's copy\n"
			"rests (media: dram, flash or store) and the partition it takes\n"
			"(server-memory, or in the store its home's store partition), and the\n"
			"user header.\n"
			"\n"
			"With --json prints {\"guid\",\"size\",\"block_size\",\"pages\",\"policy\",\"home\",\n"
			"\"owner\",\"uid\",\"media\",\"partition\",\"header_hex\"}; header_hex is the\n"
			"user header in lowercase hex.\n",
		.run = cmd_header,
	},
	{
		.name = "free",
		.args = "GUID",
		.summary = "release an allocation, mirrored",
		.help = "Releases allocation GUID's memory on this node and its partner. Prints\n"
			"nothing; with --json prints {}.\n",
		.run = cmd_free,
	},
	{
		.name = "list",
		.args = "",
		.summary = "allocations this node knows",
		.help = "Lists the allocations this node knows: its own and its partner's.\n"
			"\n"
			"With --json prints an array of\n"
			"  {\"guid\",\"size\",\"block_size\",\"pages\",\"policy\",\"home\",\"owner\",\"uid\",\n"
			"   \"media\",\"partition\"}\n",
		.run = cmd_list,
	},
	{
		.name = "sense",
		.args = "",
		.summary = "capacities and queues",
		.help = "Shows the node's media capacities and queue depths (the sense request):\n"
			"media are server memory's (dram, flash) and the store's; the storage cache\n"
			"partitions ([memory] cache, [flash] cache) follow, where the node has them.\n"
			"\n"
			"With --json prints\n"
			"  {\"media\":[{\"type\",\"capacity\",\"free\"}],\n"
			"   \"cache\":[{\"type\",\"capacity\",\"free\"}],\n"
			"   \"queues\":{\"paging\",\"destage\",\"replacement\"}}\n",
		.run = cmd_sense,
	},
	{
		.name = "metrics",
		.args = "",
		.summary = "status and sense as Prometheus text",
		.help = "Prints every counter and gauge of status and sense in Prometheus's text\n"
			"exposition format (version 0.0.4): names ftvm_*, units in the names\n"
			"(_bytes, _seconds), _total on counters, one # HELP and # TYPE per metric,\n"
			"the label node on every sample; states as one 0/1 sample per state. The\n"
			"node serves the same text at GET /metrics with [metrics] listen =\n"
			"ADDR:PORT. node/libftvm/metrics_table.h names each status field's metric.\n"
			"--json does not change it.\n",
		.run = cmd_metrics,
	},
	{
		.name = "verify",
		.args = "",
		.summary = "compare the two nodes' page tables",
		.help = "Has the node compare its page table and page checksums with its partner's.\n"
			"Prints \"equal: N allocations, M pages compared\", or each difference on a\n"
			"line of its own. Clients may write meanwhile: a page that differs while a\n"
			"change of it is in flight is compared again once the change landed, up to\n"
			"5 comparisons in all; one still changing at the last is not compared, and\n"
			"counted (\", K busy\").\n"
			"\n"
			"With --json prints {\"equal\",\"differences\":[...],\"allocations\",\"pages\",\n"
			"\"busy\",\"rounds\"}.\n"
			"Exit status 0 when the nodes are equal, 1 when they differ (said on stderr)\n"
			"or cannot be compared.\n",
		.run = cmd_verify,
	},
	{
		.name = "failback",
		.args = "",
		.summary = "hand adopted allocations back to their home node",
		.help = "After a takeover and the resync, the survivor still serves the allocations\n"
			"it adopted. failback hands each back to the node it was made on (both page\n"
			"tables journal the change), on this node and on its partner (whose config\n"
			"is found beside --config as <partner id>.conf). An allocation with a page\n"
			"locked is tried again every 100 ms for up to 30 s.\n"
			"\n"
			"With --json prints {} once every adopted allocation is home.\n",
		.run = cmd_failback,
	},
	{
		.name = "drill",
		.args = "kill NODE | hang NODE SECONDS | cut SECONDS | restart NODE "
			"[--partner-config F] [--ftvmd PATH] [--pages N] [--timeout S] [--volume NAME]",
		.summary = "rehearse a failure on the running pair and check nothing was lost",
		.help = "Rehearses one failure on the pair (node/ha/HA.md) and reports what happened:\n"
			"  kill NODE           SIGKILL the node, then start it again\n"
			"  hang NODE SECONDS   SIGSTOP it, SIGCONT it after SECONDS\n"
			"  cut SECONDS         the partner link goes silent while both live\n"
			"  restart NODE        SIGTERM it (a clean stop), then start it again\n"
			"Before and during the fault it writes a workload of acknowledged pages to\n"
			"an allocation on each node, through the survivor once the fault hits; it\n"
			"waits for the takeover and for the pair to be whole again (the node that\n"
			"was hit resynced), then reads every acknowledged page back from both nodes\n"
			"and runs verify. The workload's allocations are freed at the end.\n"
			"\n"
			"With --volume NAME the drill also writes the volume NAME over NBD, beside\n"
			"the page workload (which still times the takeover): 2 x --pages writes of\n"
			"4096 bytes spread over the volume, every third starting 1500 bytes into a\n"
			"page, in two streams, one through each node's NBD server ([nbd] socket, else\n"
			"[nbd] listen; a node with neither is refused). Each is written once before\n"
			"the fault and again and again during it. A write that fails (error, the\n"
			"connection gone, through the victim no answer within dead_after_ms) has an\n"
			"unknown outcome: its stream reconnects to the survivor and writes it anew.\n"
			"Only acknowledged writes count. Once the pair is whole the drill flushes\n"
			"through the survivor, then reads every acknowledged write back through\n"
			"both nodes. The volume must exist (ftvmctl volume create); the drill\n"
			"overwrites what it holds at those offsets.\n"
			"\n"
			"Needs --config: the partner's config is <same folder>/<partner id>.conf\n"
			"unless --partner-config says. A node under systemd (ftvmd@ID.service) is\n"
			"signalled and started through systemctl; one started by hand is started\n"
			"again with the ftvmd beside ftvmctl (or --ftvmd), its output appended to\n"
			"<config folder>/ID.log.\n"
			"\n"
			"Options:\n"
			"  --partner-config F  the other node's config\n"
			"  --ftvmd PATH        the daemon to start a node with by hand\n"
			"  --pages N           pages per workload allocation (default 16)\n"
			"  --timeout S         for the takeover, and for the rejoin (default 30)\n"
			"  --volume NAME       also write the volume NAME over NBD, through both nodes\n"
			"\n"
			"With --json prints one object: {\"drill\",\"node\",\"survivor\",\"detect_ms\",\n"
			"\"takeover_ms\",\"checked\",\"lost\",\"acked_during\",\"failed_during\",\n"
			"\"resync_pages\",\"resync_ms\",\"epoch_before\",\"epoch_after\",\"equal\",\n"
			"\"verify_busy\"}; takeover_ms is -1 when the fault was too short for one;\n"
			"failed_during counts the workload's writes through the survivor that failed\n"
			"(they wait for the takeover instead: it should be 0). With --volume it adds\n"
			"\"volume\": {\"name\",\"endpoints\" (node id: unix:PATH or tcp:HOST:PORT),\n"
			"\"slots\",\"unaligned\",\"write_size\",\"writes\" (acknowledged, in all),\n"
			"\"acked_during\",\"failed\",\"retried\" (failed writes rewritten and\n"
			"acknowledged),\"reconnects\",\"flushed\",\"bytes_checked\",\"mismatches\"}, and\n"
			"lost counts its mismatches too (checked stays pages). Exit status 0 only\n"
			"when nothing acknowledged was lost, the nodes are equal again and, with\n"
			"--volume, the flush was answered.\n",
		.options = drill_options,
		.run = cmd_drill,
	},
	{
		.name = "trace",
		.args = "start FILE [--channels all|partner|client] | stop | dump FILE | "
			"replay FILE [--ftvmd PATH] [--keep] | text FILE | binary TEXT OUT",
		.summary = "record the node's messages to a trace file, show or replay one",
		.help = "Records every message that crosses the node's partner channel and client\n"
			"API (common/TRACE.md):\n"
			"  start FILE          start recording to FILE, which the node creates (an\n"
			"                      existing FILE is refused); relative to this folder\n"
			"  stop                stop, and say how many records were written\n"
			"  dump FILE           print the trace: its header, then one line per message\n"
			"                      (record, seconds, channel, direction, peer, fields;\n"
			"                      bytes as length and CRC-32C); works without a node\n"
			"  replay FILE         start a fresh node (a fresh pair for a trace of the\n"
			"                      client API alone) in a temporary directory, play the\n"
			"                      recorded side of the conversation into it and compare\n"
			"                      every answer; the first divergence is reported with\n"
			"                      its record, field, and the expected and actual message\n"
			"  text FILE           print the trace in its text form (the trace library's)\n"
			"  binary TEXT OUT     make the binary trace OUT (new) from its text form\n"
			"\n"
			"Options:\n"
			"  --channels C        all (default), partner or client\n"
			"  --ftvmd PATH        the daemon replay starts (default: beside ftvmctl)\n"
			"  --keep              replay leaves its temporary directory (configs, logs)\n"
			"\n"
			"With --json start and stop print {}; dump prints one object per record and\n"
			"nothing else: {\"record\",\"t_us\",\"channel\",\"direction\",\"peer\",\n"
			"\"type\",\"message\"} (\"batch\": its envelopes; the file header is only in\n"
			"the text dump); replay prints {\"records\",\"matched\",\"first_divergence\":\n"
			"null or {\"record\",\"field\",\"expected\",\"actual\"}}.\n"
			"\n"
			"Exit status of replay: 0 only when every answer matched, 1 on a divergence or\n"
			"a trace that cannot be replayed, 3 when the fresh node did not come up.\n",
		.options =
			(const struct option[]){
				{ "channels", required_argument, NULL, OPT_CHANNELS },
				{ "ftvmd", required_argument, NULL, OPT_FTVMD },
				{ "keep", no_argument, NULL, OPT_KEEP },
				{},
			},
		.run = cmd_trace,
	},
	{
		.name = "events",
		.args = "",
		.summary = "follow the node's events as they happen",
		.help = "Prints the node's events as they happen, one line each, until the node\n"
			"stops or ftvmctl is stopped (node/EVENTS.md): the partner link up or down,\n"
			"the partner authenticated or refused, state and epoch changes with the\n"
			"reason and the failover step (took over, fence, linked, send, ...),\n"
			"takeover, fence, failback, resync start, progress (every second) and end,\n"
			"volumes created and deleted, and every warning and error the node logs.\n"
			"  TIME TYPE WHAT: REASON (KEY=VALUE, ...)\n"
			"\n"
			"  --now        first the node's state as it is, as events marked \"now\"\n"
			"               (state, link, a resync under way, each volume)\n"
			"  --count N    stop after N events (those of --now included)\n"
			"\n"
			"With --json prints one object per line:\n"
			"  {\"seq\",\"at_ms\",\"type\",\"what\",\"reason\",\"current\",KEY...}\n"
			"seq counts from 1 at the node's start (0 for --now's); a gap means events\n"
			"were dropped. Works in any state of the node; at most 16 follow a node.\n",
		.options =
			(const struct option[]){
				{ "now", no_argument, NULL, OPT_NOW },
				{ "count", required_argument, NULL, OPT_COUNT },
				{},
			},
		.run = cmd_events,
	},
	{
		.name = "recovery",
		.args = "",
		.summary = "pages that went back to the store's copy, their newer versions lost",
		.help = "Lists the pages this node's page table notes as gone back to the store's\n"
			"copy because no node held their newer versions any more: after both nodes\n"
			"were killed at once, after a node that served alone was killed, and at a\n"
			"forced takeover (node/ha/HA.md, \"Recovery\"). One line each, oldest first:\n"
			"  TIME GUID page P: version V lost, back to W (OCCASION)\n"
			"where W is the store's version (0: zeroes). Works in any state of the\n"
			"node; the list outlives restarts. status counts them under recovery.\n"
			"\n"
			"With --json prints an array of\n"
			"  {\"id\",\"at_ms\",\"guid\",\"page\",\"from_version\",\"to_version\",\"why\"}\n",
		.run = cmd_recovery,
	},
	{
		.name = "takeover",
		.args = "--force --yes",
		.summary = "serve alone when the partner is gone for good",
		.help = "Makes the node serve alone, taking over its partner's allocations, when\n"
			"the partner will not come back (its machine is lost, say). A node takes\n"
			"over by itself when its partner fails while the pair is whole; this is for\n"
			"a node that cannot know it may: one started while its partner was away,\n"
			"or one that fenced itself. What the partner acknowledged that this node\n"
			"never got is given up, and pages whose newest version was in memory alone\n"
			"go back to the store's copy (status says which under recovery).\n"
			"\n"
			"Refused unless the partner link is down and the partner's slot in the\n"
			"store says stopped or fenced, or has not moved for dead_after_ms. Needs\n"
			"root, ftvmd's uid or [client] admin_group. Should the partner come back,\n"
			"it is behind and is resynced from this node.\n"
			"\n"
			"Options:\n"
			"  --force             say that the partner is gone for good\n"
			"  --yes               say that its unshared writes may be lost\n"
			"\n"
			"Prints the node's state once it serves alone; with --json prints {}.\n",
		.options =
			(const struct option[]){
				{ "force", no_argument, NULL, OPT_FORCE },
				{ "yes", no_argument, NULL, OPT_YES },
				{},
			},
		.run = cmd_takeover,
	},
	{
		.name = "clients",
		.args = "",
		.summary = "what each client holds (the server memory allocate table)",
		.help = "Seed 003's server memory allocate table (Fig. 13): for each client, by uid\n"
			"and the name it gave (ftvm_connect_named(), `alloc --name`; - for none),\n"
			"the media its allocations live in, how many it holds and their bytes, over\n"
			"every allocation this node knows (its own and its partner's, so both\n"
			"nodes print the same table).\n"
			"\n"
			"With --json prints [{\"uid\",\"name\",\"media\",\"allocations\",\"bytes\"}],\n"
			"name \"\" for a client that gave none.\n",
		.run = cmd_clients,
	},
	{
		.name = "partitions",
		.args = "",
		.summary = "how DRAM and flash split (the memory partition table)",
		.help = "Seed 003's memory partition table (Fig. 12): this node's DRAM (its frame\n"
			"pool) and flash, each split between server memory, which clients'\n"
			"allocations use, and the storage cache, as [memory] cache and [flash]\n"
			"cache say. One row per partition: its media, type, start and length in\n"
			"bytes (from the pool's first frame; from the flash device's first byte)\n"
			"and its free bytes. Under flash server memory, one row per allocation\n"
			"resting there: the range it holds and the client it belongs to.\n"
			"\n"
			"With --json prints [{\"media\",\"start\",\"length\",\"type\",\"client\",\n"
			"\"free\"}], and an allocation's rows \"guid\" and \"uid\" instead of \"free\".\n",
		.run = cmd_partitions,
	},
	{
		.name = "volume",
		.args = "create NAME --size N [--home NODE] | list | delete NAME",
		.summary = "block volumes, served over NBD",
		.help = "Block volumes (node/vmm/VMM.md, \"Volumes\"): each is mirrored as an\n"
			"allocation is, its blocks cached in the storage cache partition of both\n"
			"nodes ([memory] cache) and resting in its home node's partition of the\n"
			"store, and both nodes serve it over NBD ([nbd]) as the export NAME.\n"
			"\n"
			"  create NAME --size N   makes a volume of N bytes (suffixes K, M, G), in\n"
			"                         pages of the node's page size, homed on the node\n"
			"                         asked, or with --home NODE on NODE, its partner\n"
			"                         (whose store partition then holds its blocks);\n"
			"                         NAME is 1 to 64 of [A-Za-z0-9._-], unique in the\n"
			"                         pair. Prints NAME.\n"
			"  list                   the pair's volumes: name, size, home, owner, guid\n"
			"  delete NAME            frees the volume on both nodes, its data with it\n"
			"\n"
			"With --json, create prints {\"name\",\"size\",\"home\",\"owner\",\"guid\",\n"
			"\"block_size\"}, list an array of those, delete {}.\n",
		.options =
			(const struct option[]){
				{ "size", required_argument, NULL, OPT_SIZE },
				{ "home", required_argument, NULL, OPT_HOME },
				{},
			},
		.run = cmd_volume,
	},
	{
		.name = "tables",
		.args = "",
		.summary = "seed 003's tables in one view",
		.help = "Seed 003's tables as this node sees the pair, one section each:\n"
			"\n"
			"  device discovery (Fig. 10): this node and its partner, each with its\n"
			"    state as it reports it, whether it serves, its partner-channel\n"
			"    endpoint and its media (dram, flash, store) with capacity and free\n"
			"    bytes. The node asks its partner for its media; a partner that\n"
			"    cannot be asked is shown not reachable, with the reason, and the\n"
			"    command still succeeds.\n"
			"  address mapping (Fig. 11): every allocation this node knows, its home\n"
			"    and owner, where this node's copy rests and its range: pages, block\n"
			"    size and bytes.\n"
			"  memory partition (Fig. 12): as `ftvmctl partitions`.\n"
			"  server memory allocate (Fig. 13): as `ftvmctl clients`.\n"
			"\n"
			"With --json prints one object:\n"
			"  {\"discovery\":[{\"node\",\"endpoint\",\"self\",\"reachable\",\"serving\",\n"
			"                  \"state\",\"reason\",\"media\":[{\"type\",\"capacity\",\"free\"}]}],\n"
			"   \"mapping\":[{\"guid\",\"node\",\"home\",\"owner\",\"media\",\"partition\",\n"
			"                \"pages\",\"block_size\",\"bytes\"}],\n"
			"   \"partitions\":[as partitions --json],\n"
			"   \"clients\":[{\"uid\",\"name\",\"media\",\"allocations\",\"bytes\"}]}\n"
			"where mapping's node is the node asked, whose copies' media it gives.\n",
		.run = cmd_tables,
	},
	{
		.name = "store",
		.args = "init PATH [--size N] [--page-size N] [--partition ID=SIZE[@OFFSET]]... "
			"[--access ID=rw|ro]... [--force] | show PATH",
		.summary = "make or show the shared store's partitions",
		.help = "Seed 004's management interface for the store the pair shares (a file or\n"
			"a block device), in place: run it before the nodes first start, or with\n"
			"both stopped. Needs no node.\n"
			"\n"
			"init writes a new header: the page size (--page-size, default 4096; it must\n"
			"be the nodes' [memory] page_size), the size (--size, default the file's or\n"
			"device's own; a file is grown to it) and the partition table. Each\n"
			"--partition ID=SIZE[@OFFSET] is one partition: SIZE in bytes (K, M, G) or\n"
			"as N% of the space after the header, placed after the one before it\n"
			"unless OFFSET says where. A store has two writable partitions, one named\n"
			"for each node's [node] id; more partitions are read-only (--access\n"
			"ID=ro), and nothing ever writes them. Without --partition the store gets\n"
			"two equal partitions that the nodes claim when they first open it, as a\n"
			"first start without init does. A store that is initialised already is\n"
			"refused unless --force, which makes it new and loses what it held; a\n"
			"store a node on this host has open is refused even then.\n"
			"\n"
			"A node writes only its own partition, and its partner's only after it\n"
			"took the partner over, until the failback hands the last allocation back\n"
			"(node/storage/STORAGE.md, \"Access\").\n"
			"\n"
			"show prints the header and the partition table.\n"
			"\n"
			"With --json init prints {}, and show prints\n"
			"  {\"path\",\"kind\",\"version\",\"page_size\",\"size\",\"id\",\n"
			"   \"partitions\":[{\"id\",\"offset\",\"size\",\"access\"}]}\n"
			"where a partition no node has claimed yet has id \"\" and access is rw or\n"
			"ro.\n",
		.options = device_init_options,
		.run = cmd_store,
	},
	{
		.name = "flash",
		.args = "init PATH [--size N] [--page-size N] [--partition ID=SIZE[@OFFSET]]... "
			"[--access ID=rw|ro]... [--force] | show PATH",
		.summary = "make or show this node's flash device",
		.help = "The store's management interface for a node's own flash device: the file\n"
			"or block device its configuration names in [flash] path, a level of the\n"
			"memory between its frames and the store. Unlike the store it is not\n"
			"shared: the partner has its own. Run it before the node first starts\n"
			"with it, or with the node stopped. Needs no node.\n"
			"\n"
			"init writes the same header as store init, of kind flash, with the same\n"
			"settings (see ftvmctl store --help). Without --partition the device gets\n"
			"one partition of all the space after the header, which the node names\n"
			"for its [node] id when it first opens it. With --partition, at least\n"
			"one partition must be writable: the node's. A device that is\n"
			"initialised already is refused unless --force.\n"
			"\n"
			"show prints the header and the partition table; it shows a store too,\n"
			"as store show shows a flash device (the kind is printed).\n"
			"\n"
			"With --json init prints {}, and show prints what store show does, with\n"
			"\"kind\":\"flash\".\n",
		.options = device_init_options,
		.run = cmd_flash,
	},
	{
		.name = "keygen",
		.args = "FILE",
		.summary = "make a new key for the partner channel",
		.help = "Writes a new shared key for the pair's partner channel to FILE (which must\n"
			"not exist), mode 0600: 32 random bytes from the kernel, as 64 hex digits.\n"
			"Copy the same file to both nodes and set [node] key_file = FILE in each\n"
			"node's configuration: each then proves it holds the key before the other\n"
			"tells it anything. Needs no node.\n"
			"\n"
			"With --json prints {}.\n",
		.run = cmd_keygen,
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
			build_info_print(stdout, "ftvmctl");
			return EXIT_DONE;
		default:
			return bad_option(c, argv, NULL);
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
