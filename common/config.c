/* The node's configuration file: INI read by libinih, each key checked as inih
 * hands it over, then the keys checked against each other once the whole file
 * is in (page_size may come after size, and so on).
 *
 * Debian's inih gives the handler no line number, so lines reach inih through
 * read_line(), which counts them: while the handler runs, the count is the
 * line being handled. read_line() also
 *  - drops leading blanks, so an indented key is a key and not, as inih would
 *    take it, a continuation of the previous key's value;
 *  - ends a line at a '#' that follows a blank, the comment style of the
 *    documented example (inih itself only knows ';' inline);
 *  - refuses a line longer than inih's buffer, which inih would cut in two;
 *  - sees section headers, because inih calls the handler only for keys and
 *    an empty section ([policy x] with nothing under it, a misspelt [nodes])
 *    must still be caught. inih, not this file, takes the name out of the
 *    header (section_name()), so both always agree on what it is.
 * The first problem found stops the reading; it is the one reported. */
#include "config.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <ini.h>

#include "keyfile.h"
#include "log.h"
#include "reason.h"

#define READ_MAX 4096	    /* longest physical line read_line() takes in */
#define SECTION_NAME_MAX 64 /* more than inih keeps (49) */
#define HOST_MAX 256	    /* a DNS name is at most 253 */
#define BLOCK_SIZE_MAX (4u << 20)
#define HEARTBEAT_MS_MAX 60000u
#define TIMEOUT_MS_MAX 600000u
#define MAX_CLIENTS_MAX 1048576u
#define SESSION_GRACE_MS_MAX 3600000u

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

enum section {
	SECTION_NONE, /* before the first header */
	SECTION_NODE,
	SECTION_MEMORY,
	SECTION_STORE,
	SECTION_FLASH,
	SECTION_FAILOVER,
	SECTION_TRACE,
	SECTION_CLIENT,
	SECTION_POLICY,
	SECTION_NBD,
	SECTION_METRICS,
};

enum key_index {
	KEY_ID,
	KEY_LISTEN,
	KEY_PARTNER,
	KEY_TRANSPORT,
	KEY_SOCKET,
	KEY_STATE_DIR,
	KEY_LOG_LEVEL,
	KEY_SYNCHRONOUS,
	KEY_ACK,
	KEY_WAL_CHECKPOINT_FRAMES,
	KEY_KEY_FILE,
	KEY_SIZE,
	KEY_PAGE_SIZE,
	KEY_POOL_BLOCK_SIZE,
	KEY_STORE_PATH,
	KEY_STORE_SIZE,
	KEY_HEARTBEAT_MS,
	KEY_DEAD_AFTER_MS,
	KEY_REQUEST_TIMEOUT_MS,
	KEY_SOLO,
	KEY_JOURNAL_LIMIT,
	KEY_TRACE_PATH,
	KEY_TRACE_CHANNELS,
	KEY_SOCKET_MODE,
	KEY_SOCKET_GROUP,
	KEY_ADMIN_GROUP,
	KEY_POINTER_GROUP,
	KEY_MAX_CLIENTS,
	KEY_OUTPUT_LIMIT,
	KEY_SESSION_GRACE_MS,
	KEY_FLASH_PATH,
	KEY_FLASH_SIZE,
	KEY_MEMORY_CACHE,
	KEY_FLASH_CACHE,
	KEY_BLOCK_SIZE, /* one per policy: its lines live with the policy */
	KEY_PERFORMANCE,
	KEY_NBD_LISTEN,
	KEY_NBD_SOCKET,
	KEY_METRICS_LISTEN,
	N_KEYS,
};

/* What each section is called in a file; a [policy NAME] is "policy". */
static const char *const section_names[] = {
	[SECTION_NODE] = "node",       [SECTION_MEMORY] = "memory",	[SECTION_STORE] = "store",
	[SECTION_FLASH] = "flash",     [SECTION_FAILOVER] = "failover", [SECTION_TRACE] = "trace",
	[SECTION_CLIENT] = "client",   [SECTION_POLICY] = "policy",	[SECTION_NBD] = "nbd",
	[SECTION_METRICS] = "metrics",
};

struct parser {
	const char *path; /* as given, for messages */
	FILE *f;
	unsigned line; /* lines read so far: inside the handler, the current one */
	int read_errno;
	struct ftvm_config *c;

	enum section section;			       /* where keys go now */
	char section_name[SECTION_NAME_MAX];	       /* as written, for messages */
	const char *key;			       /* the key being set, for messages */
	unsigned line_of[N_KEYS];		       /* where each key was set; 0: default */
	unsigned policy_line[CONFIG_POLICIES_MAX];     /* each policy's header */
	unsigned block_size_line[CONFIG_POLICIES_MAX]; /* and its block_size */
	unsigned performance_line[CONFIG_POLICIES_MAX];

	int r; /* the first problem; the reading stops there */
	unsigned err_line;
	char *err;
	size_t err_len;
};

struct key {
	enum section section;
	const char *name;
	int (*set)(struct parser *p, const char *value);
};

/* ---- messages ---- */

__attribute__((format(printf, 6, 0))) static int vfail(struct parser *p, int r, unsigned line,
						       const char *section, const char *key,
						       const char *fmt, va_list ap)
{
	char where[64 + SECTION_NAME_MAX] = "";
	char what[512];

	if (p->r < 0)
		return p->r;
	p->r = r;
	p->err_line = line;
	if (!p->err || p->err_len == 0)
		return r;

	if (line)
		snprintf(where, sizeof(where), ":%u", line);
	vsnprintf(what, sizeof(what), fmt, ap);
	snprintf(p->err, p->err_len, "%s%s: %s%s%s%s%s%s", p->path, where, section ? "[" : "",
		 section ? section : "", section ? "]" : "", section && key ? " " : "",
		 key ? key : "", section || key ? ": " : "");
	/* The message goes after the prefix, however long the path was. */
	size_t used = strlen(p->err);
	snprintf(p->err + used, p->err_len - used, "%s", what);
	return r;
}

/* "FILE:LINE: [section] key: what"; line 0 leaves ":LINE" out, a NULL section
 * or key leaves that part out. Keeps the first problem only. */
__attribute__((format(printf, 5, 6))) static int
fail(struct parser *p, unsigned line, const char *section, const char *key, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfail(p, -EINVAL, line, section, key, fmt, ap);
	va_end(ap);
	return r;
}

/* The key being set, on the current line. */
__attribute__((format(printf, 2, 3))) static int fail_key(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfail(p, -EINVAL, p->line, p->section_name, p->key, fmt, ap);
	va_end(ap);
	return r;
}

__attribute__((format(printf, 3, 4))) static int fail_errno(struct parser *p, int r,
							    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	r = vfail(p, r, 0, NULL, NULL, fmt, ap);
	va_end(ap);
	return r;
}

static int fail_oom(struct parser *p)
{
	return fail_errno(p, -ENOMEM, "out of memory");
}

/* ---- values ---- */

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/* Decimal digits only (no sign, no blanks), at most max. */
static int parse_decimal(const char *s, uint64_t max, uint64_t *ret)
{
	uint64_t n = 0;

	if (!is_digit(*s))
		return -EINVAL;
	for (; is_digit(*s); s++) {
		unsigned d = (unsigned)(*s - '0');

		if (n > (max - d) / 10)
			return -EINVAL;
		n = n * 10 + d;
	}
	if (*s)
		return -EINVAL;
	*ret = n;
	return 0;
}

int config_parse_size(const char *s, uint64_t *ret)
{
	uint64_t n = 0, unit = 1;

	if (!s || !is_digit(*s))
		return -EINVAL;
	for (; is_digit(*s); s++) {
		unsigned d = (unsigned)(*s - '0');

		if (n > (UINT64_MAX - d) / 10)
			return -EINVAL;
		n = n * 10 + d;
	}
	switch (*s) {
	case 'K':
		unit = UINT64_C(1) << 10;
		s++;
		break;
	case 'M':
		unit = UINT64_C(1) << 20;
		s++;
		break;
	case 'G':
		unit = UINT64_C(1) << 30;
		s++;
		break;
	default:
		break;
	}
	if (*s || n > UINT64_MAX / unit)
		return -EINVAL;
	*ret = n * unit;
	return 0;
}

/* What is wrong with endpoint s, or NULL (and host and port filled in). */
static const char *endpoint_problem(const char *s, char *host, size_t host_len, uint16_t *ret_port)
{
	const char *h, *colon;
	size_t hl;
	uint64_t port;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close)
			return "no ']' after the IPv6 address";
		h = s + 1;
		hl = (size_t)(close - h);
		colon = close + 1;
		if (*colon != ':')
			return *colon ? "text between ']' and ':'" : "missing port";
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return "missing port";
		h = s;
		hl = (size_t)(colon - s);
		if (memchr(h, ':', hl))
			return "an IPv6 address needs brackets";
	}
	if (hl == 0)
		return "empty host";
	for (size_t i = 0; i < hl; i++)
		if ((unsigned char)h[i] <= ' ' || h[i] == 0x7f || h[i] == '[' || h[i] == ']')
			return "bad character in host";
	if (hl >= host_len)
		return "host too long";
	if (parse_decimal(colon + 1, 65535, &port) < 0 || port == 0)
		return "port is not a number from 1 to 65535";
	memcpy(host, h, hl);
	host[hl] = '\0';
	*ret_port = (uint16_t)port;
	return NULL;
}

int config_parse_endpoint(const char *s, char *host, size_t host_len, uint16_t *ret_port)
{
	assert(s && host && ret_port);
	return endpoint_problem(s, host, host_len, ret_port) ? -EINVAL : 0;
}

static const char *const transport_names[] = {
	[CONFIG_TRANSPORT_AUTO] = "auto",
	[CONFIG_TRANSPORT_TCP] = "tcp",
	[CONFIG_TRANSPORT_RDMA] = "rdma",
};

const char *config_transport_name(enum config_transport t)
{
	if ((size_t)t >= ARRAY_SIZE(transport_names))
		return NULL;
	return transport_names[t];
}

/* 1..max characters from [a-z0-9] and extra. */
static bool is_token(const char *s, size_t max, const char *extra)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || is_digit(*s) || strchr(extra, *s)))
			return false;
	return true;
}

/* value if absolute, else dir/value; NULL when out of memory. */
static char *path_join(const char *dir, const char *value)
{
	size_t n;
	char *s;

	if (value[0] == '/')
		return strdup(value);
	n = strlen(dir) + 1 + strlen(value) + 1;
	s = malloc(n);
	if (s)
		snprintf(s, n, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", value);
	return s;
}

static int replace_string(struct parser *p, char **field, char *s)
{
	if (!s)
		return fail_oom(p);
	free(*field);
	*field = s;
	return 0;
}

bool config_id_valid(const char *s)
{
	return is_token(s, CONFIG_ID_MAX, "-");
}

bool config_session_id_valid(const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n; i++)
		if (!is_digit(s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
			return false;
	return n == 0 || n == CONFIG_SESSION_ID_LEN;
}

bool config_client_name_valid(const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      is_digit(s[i]) || strchr("._-", s[i])))
			return false;
	return n <= CONFIG_CLIENT_NAME_MAX;
}

bool config_volume_name_valid(const char *s)
{
	return s[0] && s[0] != '-' && s[0] != '.' && config_client_name_valid(s);
}

/* ---- keys ---- */

static int set_id(struct parser *p, const char *v)
{
	if (!config_id_valid(v))
		return fail_key(p, "'%s' is not a valid node id (want [a-z0-9-]{1,%d})", v,
				CONFIG_ID_MAX);
	memcpy(p->c->id, v, strlen(v) + 1);
	return 0;
}

static int set_endpoint(struct parser *p, char **field, const char *v)
{
	char host[HOST_MAX];
	uint16_t port;
	const char *why = endpoint_problem(v, host, sizeof(host), &port);

	if (why)
		return fail_key(p, "'%s' is not an endpoint: %s (want host:port or [v6addr]:port)",
				v, why);
	return replace_string(p, field, strdup(v));
}

static int set_listen(struct parser *p, const char *v)
{
	return set_endpoint(p, &p->c->listen, v);
}

static int set_partner(struct parser *p, const char *v)
{
	return set_endpoint(p, &p->c->partner, v);
}

static int set_transport(struct parser *p, const char *v)
{
	for (size_t i = 0; i < ARRAY_SIZE(transport_names); i++)
		if (strcmp(v, transport_names[i]) == 0) {
			p->c->transport = (enum config_transport)i;
			return 0;
		}
	return fail_key(p, "'%s' is not a transport (want auto, tcp or rdma)", v);
}

static int set_socket(struct parser *p, const char *v)
{
	return replace_string(p, &p->c->socket_path, path_join(p->c->dir, v));
}

static int set_nbd_listen(struct parser *p, const char *v)
{
	return set_endpoint(p, &p->c->nbd_listen, v);
}

static int set_nbd_socket(struct parser *p, const char *v)
{
	return replace_string(p, &p->c->nbd_socket_path, path_join(p->c->dir, v));
}

static int set_metrics_listen(struct parser *p, const char *v)
{
	return set_endpoint(p, &p->c->metrics_listen, v);
}

static int set_state_dir(struct parser *p, const char *v)
{
	return replace_string(p, &p->c->state_dir, path_join(p->c->dir, v));
}

static int set_key_file(struct parser *p, const char *v)
{
	return replace_string(p, &p->c->key_file, path_join(p->c->dir, v));
}

static int set_synchronous(struct parser *p, const char *v)
{
	if (strcmp(v, "normal") != 0 && strcmp(v, "full") != 0)
		return fail_key(p, "'%s' is not a synchronous mode (want normal or full)", v);
	p->c->synchronous_full = strcmp(v, "full") == 0;
	return 0;
}

static int set_ack(struct parser *p, const char *v)
{
	int a = config_ack_parse(v);

	if (a < 0)
		return fail_key(
			p, "'%s' is not an acknowledgement level (want mirror, commit or durable)",
			v);
	p->c->ack = (enum config_ack)a;
	return 0;
}

static int set_wal_checkpoint_frames(struct parser *p, const char *v)
{
	uint64_t n;

	if (parse_decimal(v, WAL_CHECKPOINT_FRAMES_MAX, &n) < 0 || n < WAL_CHECKPOINT_FRAMES_MIN)
		return fail_key(p, "'%s' is not a number of WAL frames from %u to %u", v,
				WAL_CHECKPOINT_FRAMES_MIN, WAL_CHECKPOINT_FRAMES_MAX);
	p->c->wal_checkpoint_frames = (uint32_t)n;
	return 0;
}

static int set_log_level(struct parser *p, const char *v)
{
	int level = log_level_from_string(v);

	if (level < 0)
		return fail_key(p, "'%s' is not a log level (want error, warning, info or debug)",
				v);
	p->c->log_level = level;
	return 0;
}

static int parse_size_value(struct parser *p, const char *v, uint64_t *ret)
{
	if (config_parse_size(v, ret) < 0)
		return fail_key(p, "'%s' is not a size (want a number with optional K, M or G)", v);
	return 0;
}

/* A size of at least one byte ([memory] size, pool_block_size): whether it
 * holds whole pages is checked once page_size is known. */
/* A size from 1 to max bytes: the bounds keep every sum and product made of
 * it (4 x [memory] size for the store, frame counts, offsets) in range. */
static int parse_bounded_size(struct parser *p, const char *v, uint64_t max, uint64_t *ret)
{
	int r = parse_size_value(p, v, ret);

	if (r == 0 && *ret == 0)
		return fail_key(p, "'%s' is too small (want at least one page)", v);
	if (r == 0 && *ret > max)
		return fail_key(p, "'%s' is too large (at most %" PRIu64 "G)", v, max >> 30);
	return r;
}

static int set_size(struct parser *p, const char *v)
{
	return parse_bounded_size(p, v, CONFIG_MEMORY_MAX, &p->c->memory_size);
}

static int set_pool_block_size(struct parser *p, const char *v)
{
	return parse_bounded_size(p, v, CONFIG_MEMORY_MAX, &p->c->pool_block_size);
}

static int set_page_size(struct parser *p, const char *v)
{
	uint64_t n;
	int r = parse_size_value(p, v, &n);

	if (r < 0)
		return r;
	if (n < CONFIG_PAGE_SIZE_MIN || n > CONFIG_PAGE_SIZE_MAX || (n & (n - 1)))
		return fail_key(p, "'%s' is not a power of two from %u to %u", v,
				CONFIG_PAGE_SIZE_MIN, CONFIG_PAGE_SIZE_MAX);
	p->c->page_size = (uint32_t)n;
	return 0;
}

static int set_store_path(struct parser *p, const char *v)
{
	return replace_string(p, &p->c->store_path, path_join(p->c->dir, v));
}

static int set_store_size(struct parser *p, const char *v)
{
	return parse_bounded_size(p, v, CONFIG_STORE_MAX, &p->c->store_size);
}

static int set_flash_path(struct parser *p, const char *v)
{
	return replace_string(p, &p->c->flash_path, path_join(p->c->dir, v));
}

static int set_flash_size(struct parser *p, const char *v)
{
	return parse_bounded_size(p, v, CONFIG_STORE_MAX, &p->c->flash_size);
}

/* A share of a device for the storage cache (node/vmm/MEDIA.md, "The
 * memory partition table"): "N%", 0 to CONFIG_CACHE_PERCENT_MAX. */
static int parse_cache_percent(struct parser *p, const char *v, uint32_t *ret)
{
	size_t len = strlen(v);
	char digits[16];
	uint64_t n;

	if (len < 2 || len >= sizeof(digits) || v[len - 1] != '%')
		return fail_key(p, "'%s' is not a share (want N%%, 0%% to %u%%)", v,
				CONFIG_CACHE_PERCENT_MAX);
	memcpy(digits, v, len - 1);
	digits[len - 1] = '\0';
	if (parse_decimal(digits, CONFIG_CACHE_PERCENT_MAX, &n) < 0)
		return fail_key(p,
				"'%s' is not a share from 0%% to %u%%: the rest is server "
				"memory, which needs some",
				v, CONFIG_CACHE_PERCENT_MAX);
	*ret = (uint32_t)n;
	return 0;
}

static int set_memory_cache(struct parser *p, const char *v)
{
	return parse_cache_percent(p, v, &p->c->memory_cache_percent);
}

static int set_flash_cache(struct parser *p, const char *v)
{
	return parse_cache_percent(p, v, &p->c->flash_cache_percent);
}

static int parse_ms(struct parser *p, const char *v, uint32_t max, uint32_t *ret)
{
	uint64_t n;

	if (parse_decimal(v, max, &n) < 0 || n == 0)
		return fail_key(p, "'%s' is not a number of milliseconds from 1 to %" PRIu32, v,
				max);
	*ret = (uint32_t)n;
	return 0;
}

static int set_heartbeat_ms(struct parser *p, const char *v)
{
	return parse_ms(p, v, HEARTBEAT_MS_MAX, &p->c->heartbeat_ms);
}

static int set_dead_after_ms(struct parser *p, const char *v)
{
	return parse_ms(p, v, TIMEOUT_MS_MAX, &p->c->dead_after_ms);
}

static int set_request_timeout_ms(struct parser *p, const char *v)
{
	return parse_ms(p, v, TIMEOUT_MS_MAX, &p->c->request_timeout_ms);
}

static int set_solo(struct parser *p, const char *v)
{
	if (strcmp(v, "serve") != 0 && strcmp(v, "refuse") != 0)
		return fail_key(p, "'%s' is not a solo mode (want serve or refuse)", v);
	p->c->solo_refuse = strcmp(v, "refuse") == 0;
	return 0;
}

static int set_journal_limit(struct parser *p, const char *v)
{
	uint64_t n;

	if (parse_decimal(v, JOURNAL_LIMIT_MAX, &n) < 0 || n < JOURNAL_LIMIT_MIN)
		return fail_key(p, "'%s' is not a number of journal rows from %u to %" PRIu64, v,
				JOURNAL_LIMIT_MIN, JOURNAL_LIMIT_MAX);
	p->c->journal_limit = n;
	return 0;
}

static int set_trace_path(struct parser *p, const char *v)
{
	return replace_string(p, &p->c->trace_path, path_join(p->c->dir, v));
}

static int set_trace_channels(struct parser *p, const char *v)
{
	int channels = config_parse_trace_channels(v);

	if (channels < 0)
		return fail_key(p, "'%s' is not a choice of channels (want all, partner or client)",
				v);
	p->c->trace_channels = channels;
	return 0;
}

/* Octal permission bits only: no setuid, setgid or sticky bit on a socket. */
static int set_socket_mode(struct parser *p, const char *v)
{
	uint64_t mode = 0;
	const char *s = v;

	for (; *s >= '0' && *s <= '7'; s++)
		if ((mode = mode * 8 + (uint64_t)(*s - '0')) > 0777)
			break;
	if (s == v || *s || mode > 0777)
		return fail_key(p, "'%s' is not a mode (want octal permission bits, 0 to 0777)", v);
	p->c->socket_mode = (uint32_t)mode;
	return 0;
}

static int set_group(struct parser *p, struct config_group *g, const char *v)
{
	char buf[4096];
	struct group gr, *found = NULL;
	int r = getgrnam_r(v, &gr, buf, sizeof(buf), &found);

	if (r != 0)
		return fail_key(p, "cannot look up group '%s': %s", v, strerror(r));
	if (!found)
		return fail_key(p, "no group '%s' on this system", v);
	g->gid = found->gr_gid;
	return replace_string(p, &g->name, strdup(v));
}

static int set_socket_group(struct parser *p, const char *v)
{
	return set_group(p, &p->c->socket_group, v);
}

static int set_admin_group(struct parser *p, const char *v)
{
	return set_group(p, &p->c->admin_group, v);
}

static int set_pointer_group(struct parser *p, const char *v)
{
	return set_group(p, &p->c->pointer_group, v);
}

static int set_max_clients(struct parser *p, const char *v)
{
	uint64_t n;

	if (parse_decimal(v, MAX_CLIENTS_MAX, &n) < 0 || n == 0)
		return fail_key(p, "'%s' is not a number of clients from 1 to %u", v,
				MAX_CLIENTS_MAX);
	p->c->max_clients = (uint32_t)n;
	return 0;
}

static int set_session_grace_ms(struct parser *p, const char *v)
{
	uint64_t n;

	if (parse_decimal(v, SESSION_GRACE_MS_MAX, &n) < 0)
		return fail_key(p, "'%s' is not a number of milliseconds from 0 to %u", v,
				SESSION_GRACE_MS_MAX);
	p->c->session_grace_ms = (uint32_t)n;
	return 0;
}

static int set_output_limit(struct parser *p, const char *v)
{
	return parse_bounded_size(p, v, CONFIG_MEMORY_MAX, &p->c->output_limit);
}

static int set_block_size(struct parser *p, const char *v)
{
	uint64_t n;
	int r = parse_size_value(p, v, &n);

	if (r < 0)
		return r;
	if (n == 0 || n > BLOCK_SIZE_MAX)
		return fail_key(p, "'%s' is out of range (want a multiple of page_size up to 4M)",
				v);
	p->c->policies[p->c->n_policies - 1].block_size = (uint32_t)n;
	return 0;
}

static int set_performance(struct parser *p, const char *v)
{
	int r = config_parse_performance(v);

	if (r < 0)
		return fail_key(p, "'%s': want high, standard or capacity", v);
	p->c->policies[p->c->n_policies - 1].performance = (enum config_performance)r;
	return 0;
}

static const struct key keys[N_KEYS] = {
	[KEY_ID] = { SECTION_NODE, "id", set_id },
	[KEY_LISTEN] = { SECTION_NODE, "listen", set_listen },
	[KEY_PARTNER] = { SECTION_NODE, "partner", set_partner },
	[KEY_TRANSPORT] = { SECTION_NODE, "transport", set_transport },
	[KEY_SOCKET] = { SECTION_NODE, "socket", set_socket },
	[KEY_STATE_DIR] = { SECTION_NODE, "state_dir", set_state_dir },
	[KEY_LOG_LEVEL] = { SECTION_NODE, "log_level", set_log_level },
	[KEY_SYNCHRONOUS] = { SECTION_NODE, "synchronous", set_synchronous },
	[KEY_ACK] = { SECTION_NODE, "ack", set_ack },
	[KEY_WAL_CHECKPOINT_FRAMES] = { SECTION_NODE, "wal_checkpoint_frames",
					set_wal_checkpoint_frames },
	[KEY_KEY_FILE] = { SECTION_NODE, "key_file", set_key_file },
	[KEY_SIZE] = { SECTION_MEMORY, "size", set_size },
	[KEY_PAGE_SIZE] = { SECTION_MEMORY, "page_size", set_page_size },
	[KEY_POOL_BLOCK_SIZE] = { SECTION_MEMORY, "pool_block_size", set_pool_block_size },
	[KEY_MEMORY_CACHE] = { SECTION_MEMORY, "cache", set_memory_cache },
	[KEY_STORE_PATH] = { SECTION_STORE, "path", set_store_path },
	[KEY_STORE_SIZE] = { SECTION_STORE, "size", set_store_size },
	[KEY_HEARTBEAT_MS] = { SECTION_FAILOVER, "heartbeat_ms", set_heartbeat_ms },
	[KEY_DEAD_AFTER_MS] = { SECTION_FAILOVER, "dead_after_ms", set_dead_after_ms },
	[KEY_REQUEST_TIMEOUT_MS] = { SECTION_FAILOVER, "request_timeout_ms",
				     set_request_timeout_ms },
	[KEY_SOLO] = { SECTION_FAILOVER, "solo", set_solo },
	[KEY_JOURNAL_LIMIT] = { SECTION_FAILOVER, "journal_limit", set_journal_limit },
	[KEY_TRACE_PATH] = { SECTION_TRACE, "path", set_trace_path },
	[KEY_TRACE_CHANNELS] = { SECTION_TRACE, "channels", set_trace_channels },
	[KEY_SOCKET_MODE] = { SECTION_CLIENT, "socket_mode", set_socket_mode },
	[KEY_SOCKET_GROUP] = { SECTION_CLIENT, "socket_group", set_socket_group },
	[KEY_ADMIN_GROUP] = { SECTION_CLIENT, "admin_group", set_admin_group },
	[KEY_POINTER_GROUP] = { SECTION_CLIENT, "pointer_group", set_pointer_group },
	[KEY_MAX_CLIENTS] = { SECTION_CLIENT, "max_clients", set_max_clients },
	[KEY_OUTPUT_LIMIT] = { SECTION_CLIENT, "output_limit", set_output_limit },
	[KEY_SESSION_GRACE_MS] = { SECTION_CLIENT, "session_grace_ms", set_session_grace_ms },
	[KEY_FLASH_PATH] = { SECTION_FLASH, "path", set_flash_path },
	[KEY_FLASH_SIZE] = { SECTION_FLASH, "size", set_flash_size },
	[KEY_FLASH_CACHE] = { SECTION_FLASH, "cache", set_flash_cache },
	[KEY_BLOCK_SIZE] = { SECTION_POLICY, "block_size", set_block_size },
	[KEY_PERFORMANCE] = { SECTION_POLICY, "performance", set_performance },
	[KEY_NBD_LISTEN] = { SECTION_NBD, "listen", set_nbd_listen },
	[KEY_NBD_SOCKET] = { SECTION_NBD, "socket", set_nbd_socket },
	[KEY_METRICS_LISTEN] = { SECTION_METRICS, "listen", set_metrics_listen },
};

bool config_key_at(size_t i, const char **ret_section, const char **ret_name)
{
	if (i >= N_KEYS)
		return false;
	*ret_section = section_names[keys[i].section];
	*ret_name = keys[i].name;
	return true;
}

/* Where the line a key was set on is kept. */
static unsigned *key_line(struct parser *p, enum key_index k)
{
	if (k == KEY_BLOCK_SIZE)
		return &p->block_size_line[p->c->n_policies - 1];
	if (k == KEY_PERFORMANCE)
		return &p->performance_line[p->c->n_policies - 1];
	return &p->line_of[k];
}

/* The key as written, for config_diff. */
static int note_setting(struct parser *p, const char *name, const char *value)
{
	struct ftvm_config *c = p->c;
	struct config_setting *grown = realloc(c->settings, (c->n_settings + 1) * sizeof(*grown));
	struct config_setting *set;
	char where[SECTION_NAME_MAX + 64]; /* a known key's name is short */

	if (!grown)
		return fail_oom(p);
	c->settings = grown;
	set = &c->settings[c->n_settings];
	snprintf(where, sizeof(where), "[%s] %s", p->section_name, name);
	set->where = strdup(where);
	set->value = strdup(value);
	if (!set->where || !set->value) {
		free(set->where);
		free(set->value);
		return fail_oom(p);
	}
	c->n_settings++;
	return 0;
}

static int set_key(struct parser *p, const char *name, const char *value)
{
	unsigned *line;
	size_t k;
	int r;

	p->key = name;
	if (p->section == SECTION_NONE)
		return fail(p, p->line, NULL, name,
			    "not in a section (want it under [node], [memory], [store], [flash], "
			    "[failover], [trace], [client], [nbd], [metrics] or [policy NAME])");
	if (!*name)
		return fail(p, p->line, p->section_name, NULL, "a value with no key");
	for (k = 0; k < N_KEYS; k++)
		if (keys[k].section == p->section && strcmp(keys[k].name, name) == 0)
			break;
	if (k == N_KEYS)
		return fail_key(p, "unknown key");
	line = key_line(p, (enum key_index)k);
	if (*line)
		return fail_key(p, "duplicate key (first set on line %u)", *line);
	if (!*value)
		return fail_key(p, "empty value");
	*line = p->line;
	r = keys[k].set(p, value);
	return r < 0 ? r : note_setting(p, name, value);
}

/* ---- sections ---- */

static int begin_policy(struct parser *p, const char *name)
{
	struct ftvm_config *c = p->c;
	struct config_policy *pol;

	if (!is_token(name, CONFIG_POLICY_NAME_MAX, "_-"))
		return fail(p, p->line, p->section_name, NULL,
			    "'%s' is not a valid policy name (want [a-z0-9_-]{1,%d})", name,
			    CONFIG_POLICY_NAME_MAX);
	for (size_t i = 0; i < c->n_policies; i++)
		if (strcmp(c->policies[i].name, name) == 0)
			return fail(p, p->line, p->section_name, NULL,
				    "duplicate policy (first on line %u)", p->policy_line[i]);
	if (c->n_policies == CONFIG_POLICIES_MAX)
		return fail(p, p->line, p->section_name, NULL, "too many policies (at most %d)",
			    CONFIG_POLICIES_MAX);
	pol = &c->policies[c->n_policies];
	memcpy(pol->name, name, strlen(name) + 1);
	pol->block_size = 0;
	pol->performance = CONFIG_PERFORMANCE_CAPACITY;
	p->policy_line[c->n_policies] = p->line;
	p->block_size_line[c->n_policies] = 0;
	p->performance_line[c->n_policies] = 0;
	c->n_policies++;
	p->section = SECTION_POLICY;
	return 0;
}

static int begin_section(struct parser *p, const char *name)
{
	snprintf(p->section_name, sizeof(p->section_name), "%s", name);
	for (size_t i = 0; i < ARRAY_SIZE(section_names); i++)
		if (i != SECTION_POLICY && section_names[i] &&
		    strcmp(name, section_names[i]) == 0) {
			p->section = (enum section)i;
			return 0;
		}
	if (strcmp(name, "policy") == 0)
		return fail(p, p->line, name, NULL, "policy without a name (want [policy NAME])");
	if (strncmp(name, "policy ", strlen("policy ")) == 0)
		return begin_policy(p, name + strlen("policy "));
	return fail(p, p->line, name, NULL, "unknown section");
}

struct section_grab {
	char name[SECTION_NAME_MAX];
	bool found;
};

static int grab_section(void *user, const char *section, const char *name, const char *value)
{
	struct section_grab *g = user;

	(void)name;
	(void)value;
	snprintf(g->name, sizeof(g->name), "%s", section);
	g->found = true;
	return 1;
}

/* The section name in header line s, as inih reads it: s followed by one key
 * goes through inih, which hands the key over with its section. */
static int section_name(const char *s, char *name, size_t name_len)
{
	char text[READ_MAX + 8];
	struct section_grab g = { .found = false };

	snprintf(text, sizeof(text), "%s\nk=v\n", s);
	if (ini_parse_string(text, grab_section, &g) != 0 || !g.found)
		return -EINVAL;
	snprintf(name, name_len, "%s", g.name);
	return 0;
}

static void on_header(struct parser *p, const char *s)
{
	char name[SECTION_NAME_MAX];

	/* A header inih cannot read is a syntax error, which inih reports. */
	if (section_name(s, name, sizeof(name)) < 0)
		return;
	begin_section(p, name);
}

/* ---- reading ---- */

/* Ends s at a '#' that follows a blank: "size = 1M   # comment". */
static void cut_hash_comment(char *s)
{
	for (size_t i = 1; s[i]; i++)
		if (s[i] == '#' && (s[i - 1] == ' ' || s[i - 1] == '\t')) {
			s[i] = '\0';
			return;
		}
}

/* inih's ini_reader: fgets with a line count, see the top of the file. */
static char *read_line(char *str, int num, void *stream)
{
	struct parser *p = stream;
	char buf[READ_MAX];
	char *s = buf;
	size_t len;

	if (p->r < 0)
		return NULL;
	if (!fgets(buf, sizeof(buf), p->f)) {
		if (ferror(p->f))
			p->read_errno = errno ? errno : EIO;
		return NULL;
	}
	p->line++;

	len = strlen(buf);
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	else if (!feof(p->f))
		goto too_long;
	if (len > 0 && buf[len - 1] == '\r')
		buf[--len] = '\0';
	if (p->line == 1 && strncmp(s, "\xef\xbb\xbf", 3) == 0)
		s += 3;
	s += strspn(s, " \t\f\v");
	cut_hash_comment(s);

	len = strlen(s);
	if (num < 2 || len > (size_t)num - 2)
		goto too_long;
	memcpy(str, s, len);
	str[len] = '\n';
	str[len + 1] = '\0';
	if (s[0] == '[')
		on_header(p, s);
	return str;

too_long:
	fail(p, p->line, NULL, NULL, "line too long (at most %d characters)",
	     (num < READ_MAX ? num : READ_MAX) - 2);
	return NULL;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
	struct parser *p = user;

	/* The section is followed through the headers read_line() sees. */
	(void)section;
	if (p->r < 0)
		return 0;
	return set_key(p, name, value) >= 0;
}

static int parse(struct parser *p)
{
	int n = ini_parse_stream(read_line, p, on_key, p);

	if (p->read_errno) {
		p->r = 0;
		return fail_errno(p, -p->read_errno, "cannot read: %s", strerror(p->read_errno));
	}
	if (n == -2) {
		p->r = 0;
		return fail_oom(p);
	}
	/* inih's number is the first line it had trouble with: a line that is no
	 * header, key or comment, or a key our handler refused. */
	if (n > 0 && (p->r == 0 || (unsigned)n < p->err_line)) {
		p->r = 0;
		return fail(p, (unsigned)n, NULL, NULL,
			    "syntax error (want [section], key = value or a comment)");
	}
	return p->r;
}

/* ---- the file as a whole ---- */

static int check_memory(struct parser *p)
{
	const struct ftvm_config *c = p->c;
	unsigned ls = p->line_of[KEY_SIZE], lp = p->line_of[KEY_PAGE_SIZE];
	unsigned lb = p->line_of[KEY_POOL_BLOCK_SIZE];

	if (c->pool_block_size % c->page_size != 0)
		return fail(p, lb ? lb : lp, "memory", lb ? "pool_block_size" : "page_size",
			    "pool_block_size (%" PRIu64
			    " bytes) is not a multiple of page_size (%" PRIu32 ")",
			    c->pool_block_size, c->page_size);
	if (c->memory_size % c->page_size == 0)
		return 0;
	if (ls >= lp)
		return fail(p, ls, "memory", "size",
			    "%" PRIu64 " bytes is not a multiple of page_size (%" PRIu32 ")",
			    c->memory_size, c->page_size);
	return fail(p, lp, "memory", "page_size",
		    "%" PRIu32 " does not divide size (%" PRIu64 " bytes, line %u)", c->page_size,
		    c->memory_size, ls);
}

/* Each node gets half of the store after its header, and must be able to
 * destage a whole frame pool into it. */
static int check_store(struct parser *p)
{
	struct ftvm_config *c = p->c;

	if (!p->line_of[KEY_STORE_SIZE])
		c->store_size = 4 * c->memory_size + STORE_HEADER_SPACE;
	if (c->store_size >= 2 * c->memory_size + STORE_HEADER_SPACE)
		return 0;
	return fail(p, p->line_of[KEY_STORE_SIZE], "store", "size",
		    "%" PRIu64 " bytes cannot hold both nodes' memory (want at least 2 x [memory] "
		    "size + %u = %" PRIu64 ")",
		    c->store_size, STORE_HEADER_SPACE, 2 * c->memory_size + STORE_HEADER_SPACE);
}

/* A flash device holds this node's copies of the allocations resting on
 * it: no less than its memory, as the store's partition. */
static int check_flash(struct parser *p)
{
	struct ftvm_config *c = p->c;

	if (!c->flash_path && p->line_of[KEY_FLASH_SIZE])
		return fail(p, p->line_of[KEY_FLASH_SIZE], "flash", "size",
			    "set without [flash] path (the device or file to use)");
	if (!c->flash_path && p->line_of[KEY_FLASH_CACHE])
		return fail(p, p->line_of[KEY_FLASH_CACHE], "flash", "cache",
			    "set without [flash] path (the device or file to use)");
	if (!c->flash_path)
		return 0;
	if (!p->line_of[KEY_FLASH_SIZE])
		c->flash_size = 4 * c->memory_size + STORE_HEADER_SPACE;
	if (c->flash_size >= c->memory_size + STORE_HEADER_SPACE)
		return 0;
	return fail(p, p->line_of[KEY_FLASH_SIZE], "flash", "size",
		    "%" PRIu64 " bytes cannot hold this node's memory (want at least [memory] "
		    "size + %u = %" PRIu64 ")",
		    c->flash_size, STORE_HEADER_SPACE, c->memory_size + STORE_HEADER_SPACE);
}

/* Durable acknowledgements survive both machines losing power: so must the
 * page table's commits. */
static int check_ack(struct parser *p)
{
	struct ftvm_config *c = p->c;

	if (c->ack != CONFIG_ACK_DURABLE)
		return 0;
	if (p->line_of[KEY_SYNCHRONOUS] && !c->synchronous_full)
		return fail(p, p->line_of[KEY_SYNCHRONOUS], "node", "synchronous",
			    "normal cannot go with ack = durable (line %u), whose page table "
			    "commits must survive power loss: say full, or leave it out",
			    p->line_of[KEY_ACK]);
	c->synchronous_full = true;
	return 0;
}

static int check_failover(struct parser *p)
{
	const struct ftvm_config *c = p->c;
	unsigned lh = p->line_of[KEY_HEARTBEAT_MS], ld = p->line_of[KEY_DEAD_AFTER_MS];

	if (c->dead_after_ms > c->heartbeat_ms)
		return 0;
	if (ld >= lh)
		return fail(p, ld, "failover", "dead_after_ms",
			    "%" PRIu32 " must be greater than heartbeat_ms (%" PRIu32 ")",
			    c->dead_after_ms, c->heartbeat_ms);
	return fail(p, lh, "failover", "heartbeat_ms",
		    "%" PRIu32 " must be less than dead_after_ms (%" PRIu32 ")", c->heartbeat_ms,
		    c->dead_after_ms);
}

/* host (of an endpoint) names this machine's loopback: 127.0.0.0/8, ::1 or
 * localhost. A name that must be resolved is not taken for one. */
static bool is_loopback_host(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;

	if (strcmp(host, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

static bool is_loopback_endpoint(const char *endpoint)
{
	char host[HOST_MAX];
	uint16_t port;

	return !endpoint_problem(endpoint, host, sizeof(host), &port) && is_loopback_host(host);
}

/* The partner channel needs a key unless it never leaves this machine. The
 * key itself is read by config_load_key(): only ftvmd needs it. */
static int check_key(struct parser *p)
{
	struct ftvm_config *c = p->c;

	c->key_file_line = p->line_of[KEY_KEY_FILE];
	if (c->key_file || (is_loopback_endpoint(c->listen) && is_loopback_endpoint(c->partner)))
		return 0;
	return fail(p, 0, "node", "key_file",
		    "missing, and the partner channel is not on loopback (listen %s, "
		    "partner %s): anyone who reaches it could act as the partner. Make a "
		    "key with `ftvmctl keygen FILE`, copy it to both nodes, and set "
		    "key_file = FILE on both",
		    c->listen, c->partner);
}

int config_load_key(struct ftvm_config *c, char *err, size_t err_len)
{
	char why[512];
	int r;

	if (!c->key_file || c->key)
		return 0;
	c->key = malloc(KEYFILE_MAX);
	if (!c->key)
		return reason_fail(err, err_len, -ENOMEM, "%s: out of memory", c->path);
	r = keyfile_load(c->key_file, c->key, &c->key_len, why, sizeof(why));
	if (r < 0) {
		free(c->key);
		c->key = NULL;
		return reason_fail(err, err_len, r, "%s:%u: [node] key_file: %s", c->path,
				   c->key_file_line, why);
	}
	return 0;
}

static int check_policy(struct parser *p, size_t i)
{
	const struct ftvm_config *c = p->c;
	const struct config_policy *pol = &c->policies[i];
	unsigned lb = p->block_size_line[i], lp = p->line_of[KEY_PAGE_SIZE];
	char section[SECTION_NAME_MAX];

	snprintf(section, sizeof(section), "policy %s", pol->name);
	if (!lb)
		return fail(p, p->policy_line[i], section, "block_size",
			    "missing (every policy needs one)");
	if (pol->block_size % c->page_size == 0)
		return 0;
	if (lb >= lp)
		return fail(p, lb, section, "block_size",
			    "%" PRIu32 " is not a multiple of page_size (%" PRIu32 ")",
			    pol->block_size, c->page_size);
	return fail(p, lp, "memory", "page_size",
		    "%" PRIu32 " does not divide block_size of [%s] (%" PRIu32 ", line %u)",
		    c->page_size, section, pol->block_size, lb);
}

/* Defaults that depend on the id. */
static int fill_node_paths(struct parser *p)
{
	struct ftvm_config *c = p->c;
	char name[CONFIG_ID_MAX + sizeof(".sock")];
	int r;

	if (!c->socket_path) {
		snprintf(name, sizeof(name), "%s.sock", c->id);
		r = replace_string(p, &c->socket_path, path_join(c->dir, name));
		if (r < 0)
			return r;
	}
	if (!c->state_dir) {
		r = replace_string(p, &c->state_dir, path_join(c->dir, c->id));
		if (r < 0)
			return r;
	}
	/* Checked here rather than at bind() so the message names the key. */
	if (strlen(c->socket_path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
		return fail(p, p->line_of[KEY_SOCKET], "node", "socket",
			    "'%s' is too long for a unix socket (at most %zu bytes)",
			    c->socket_path, sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1);
	return 0;
}

static int validate(struct parser *p)
{
	int r;

	if (!p->c->id[0])
		return fail(p, 0, "node", "id", "missing (every node needs one)");
	r = check_memory(p);
	if (r < 0)
		return r;
	r = check_store(p);
	if (r < 0)
		return r;
	r = check_flash(p);
	if (r < 0)
		return r;
	r = check_failover(p);
	if (r < 0)
		return r;
	r = check_ack(p);
	if (r < 0)
		return r;
	r = check_key(p);
	if (r < 0)
		return r;
	for (size_t i = 0; i < p->c->n_policies; i++) {
		r = check_policy(p, i);
		if (r < 0)
			return r;
	}
	return fill_node_paths(p);
}

/* ---- loading ---- */

/* The absolute directory of path (which exists: the file was opened). */
static int dir_of(struct parser *p, char **ret)
{
	char *copy = strdup(p->path);
	char *dir;
	int r;

	if (!copy)
		return fail_oom(p);
	dir = realpath(dirname(copy), NULL);
	if (!dir) {
		r = -errno;
		fail_errno(p, r, "cannot resolve its directory: %s", strerror(-r));
		goto out;
	}
	*ret = dir;
	r = 0;
out:
	free(copy);
	return r;
}

static int config_new(struct parser *p, struct ftvm_config **ret)
{
	struct ftvm_config *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return fail_oom(p);
	c->transport = CONFIG_TRANSPORT_AUTO;
	c->log_level = LOG_LEVEL_INFO;
	c->memory_size = UINT64_C(256) << 20;
	c->page_size = 4096;
	c->pool_block_size = UINT64_C(64) << 20;
	c->heartbeat_ms = 100;
	c->dead_after_ms = 500;
	c->request_timeout_ms = 5000;
	c->journal_limit = JOURNAL_LIMIT_DEFAULT;
	c->trace_channels = CONFIG_TRACE_ALL;
	c->socket_mode = 0660;
	c->max_clients = 1024;
	c->output_limit = UINT64_C(64) << 20;
	c->session_grace_ms = 5000;

	r = dir_of(p, &c->dir);
	if (r < 0)
		goto fail;
	c->path = strdup(p->path);
	c->listen = strdup("127.0.0.1:7101");
	c->partner = strdup("127.0.0.1:7102");
	c->store_path = path_join(c->dir, "shared/store");
	if (!c->path || !c->listen || !c->partner || !c->store_path) {
		r = fail_oom(p);
		goto fail;
	}
	*ret = c;
	return 0;
fail:
	config_free(c);
	return r;
}

int config_load(const char *path, struct ftvm_config **ret, char *err, size_t err_len)
{
	struct parser p = { .path = path, .err = err, .err_len = err_len };
	int r;

	assert(path && ret);
	if (err && err_len)
		err[0] = '\0';

	p.f = fopen(path, "re");
	if (!p.f) {
		r = -errno;
		return fail_errno(&p, r, "cannot read: %s", strerror(-r));
	}
	r = config_new(&p, &p.c);
	if (r < 0)
		goto out_close;
	r = parse(&p);
	if (r < 0)
		goto out_free;
	r = validate(&p);
	if (r < 0)
		goto out_free;
	*ret = p.c;
	p.c = NULL;
out_free:
	config_free(p.c);
out_close:
	fclose(p.f);
	return r;
}

static const struct config_setting *setting_at(const struct ftvm_config *c, const char *where)
{
	for (size_t i = 0; i < c->n_settings; i++)
		if (strcmp(c->settings[i].where, where) == 0)
			return &c->settings[i];
	return NULL;
}

void config_diff(const struct ftvm_config *old, const struct ftvm_config *fresh, config_diff_fn fn,
		 void *arg)
{
	for (size_t i = 0; i < old->n_settings; i++) {
		const struct config_setting *o = &old->settings[i];
		const struct config_setting *f = setting_at(fresh, o->where);

		if (!f || strcmp(o->value, f->value) != 0)
			fn(o->where, o->value, f ? f->value : NULL, arg);
	}
	for (size_t i = 0; i < fresh->n_settings; i++)
		if (!setting_at(old, fresh->settings[i].where))
			fn(fresh->settings[i].where, NULL, fresh->settings[i].value, arg);
}

void config_free(struct ftvm_config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_settings; i++) {
		free(c->settings[i].where);
		free(c->settings[i].value);
	}
	free(c->settings);
	free(c->path);
	free(c->dir);
	free(c->listen);
	free(c->partner);
	free(c->socket_path);
	free(c->nbd_listen);
	free(c->metrics_listen);
	free(c->nbd_socket_path);
	free(c->state_dir);
	free(c->store_path);
	free(c->flash_path);
	free(c->trace_path);
	free(c->key_file);
	if (c->key)
		explicit_bzero(c->key, KEYFILE_MAX);
	free(c->key);
	free(c->socket_group.name);
	free(c->admin_group.name);
	free(c->pointer_group.name);
	free(c);
}

int config_parse_performance(const char *s)
{
	if (strcmp(s, "capacity") == 0)
		return CONFIG_PERFORMANCE_CAPACITY;
	if (strcmp(s, "standard") == 0)
		return CONFIG_PERFORMANCE_STANDARD;
	if (strcmp(s, "high") == 0)
		return CONFIG_PERFORMANCE_HIGH;
	return -EINVAL;
}

const char *config_performance_name(enum config_performance p)
{
	return p == CONFIG_PERFORMANCE_HIGH	  ? "high"
	       : p == CONFIG_PERFORMANCE_STANDARD ? "standard"
						  : "capacity";
}

const char *config_ack_name(enum config_ack a)
{
	return a == CONFIG_ACK_MIRROR ? "mirror" : a == CONFIG_ACK_DURABLE ? "durable" : "commit";
}

int config_ack_parse(const char *name)
{
	for (int a = CONFIG_ACK_COMMIT; a <= CONFIG_ACK_DURABLE; a++)
		if (strcmp(name, config_ack_name((enum config_ack)a)) == 0)
			return a;
	return -1;
}

bool config_policy_find(const struct ftvm_config *c, const char *name, struct config_policy *ret)
{
	for (size_t i = 0; i < c->n_policies; i++)
		if (strcmp(c->policies[i].name, name) == 0) {
			*ret = c->policies[i];
			return true;
		}
	if (strcmp(name, "default") != 0)
		return false;
	memset(ret, 0, sizeof(*ret));
	memcpy(ret->name, "default", sizeof("default"));
	ret->block_size = c->page_size;
	ret->performance = CONFIG_PERFORMANCE_CAPACITY;
	return true;
}

int config_parse_trace_channels(const char *s)
{
	if (strcmp(s, "all") == 0)
		return CONFIG_TRACE_ALL;
	if (strcmp(s, "partner") == 0)
		return CONFIG_TRACE_PARTNER;
	if (strcmp(s, "client") == 0)
		return CONFIG_TRACE_CLIENT;
	return -EINVAL;
}

const char *config_trace_channels_name(int channels)
{
	return channels == CONFIG_TRACE_PARTNER	 ? "partner"
	       : channels == CONFIG_TRACE_CLIENT ? "client"
						 : "all";
}
