/* config_load() on files written into a fresh temporary directory: every key
 * set, every default, the INI styles people write, and one case per kind of
 * bad input, each checked for the file, line and key its message names. Also
 * config_parse_size() and config_parse_endpoint() on their edges. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "log.h"

static char tmpdir[PATH_MAX];  /* as mkdtemp made it */
static char realdir[PATH_MAX]; /* and resolved, as config.c reports it */

/* tmpdir/name, in a static buffer. */
static const char *tmp_path(const char *name)
{
	static char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	return path;
}

/* realdir/rel, in one of a few static buffers. */
static const char *under_dir(const char *rel)
{
	static char bufs[4][PATH_MAX + 128];
	static int next;
	char *b = bufs[next++ % 4];

	snprintf(b, sizeof(bufs[0]), "%s/%s", realdir, rel);
	return b;
}

static const char *write_conf(const char *name, const char *text)
{
	const char *path = tmp_path(name);
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) == EOF || fclose(f) != 0)
		die(path);
	return path;
}

/* tmpdir/name holding len bytes 'k', with mode. */
static void write_key(const char *name, size_t len, mode_t mode)
{
	const char *path = tmp_path(name);
	FILE *f = fopen(path, "w");

	for (size_t i = 0; f && i < len; i++)
		fputc('k', f);
	if (!f || fclose(f) != 0 || chmod(path, mode) < 0)
		die(path);
}

/* ---- files that load ---- */

static struct ftvm_config *load_ok(const char *what, const char *name, const char *text)
{
	const char *path = write_conf(name, text);
	struct ftvm_config *c = NULL;
	char err[512] = "";
	int r = config_load(path, &c, err, sizeof(err));

	checks++;
	if (r != 0 || !c) {
		FAIL("%s: expected to load, got %d: %s", what, r, err);
		config_free(c);
		c = NULL;
	}
	unlink(path);
	return c;
}

static void test_full(void)
{
	static const char text[] = "# every key, none at its default\n"
				   "[node]\n"
				   "id = node-7\n"
				   "listen = 10.0.0.1:8101\n"
				   "partner = [fe80::1]:8102\n"
				   "transport = rdma\n"
				   "socket = run/n7.sock\n"
				   "state_dir = /var/lib/ftvm/n7\n"
				   "log_level = debug\n"
				   "synchronous = full\n"
				   "ack = mirror\n"
				   "wal_checkpoint_frames = 100000\n"
				   "key_file = pair.key\n"
				   "\n"
				   "[memory]\n"
				   "size = 64M\n"
				   "page_size = 8K\n"
				   "pool_block_size = 2M\n"
				   "cache = 25%\n"
				   "\n"
				   "[store]\n"
				   "path = data/store.img\n"
				   "\n"
				   "[flash]\n"
				   "path = data/flash.img\n"
				   "cache = 90%\n"
				   "size = 512M\n"
				   "\n"
				   "[failover]\n"
				   "heartbeat_ms = 50\n"
				   "dead_after_ms = 250\n"
				   "request_timeout_ms = 1500\n"
				   "solo = refuse\n"
				   "journal_limit = 5000\n"
				   "\n"
				   "[trace]\n"
				   "path = traces/n7.trace\n"
				   "channels = partner\n"
				   "\n"
				   "[client]\n"
				   "socket_mode = 0666\n"
				   "socket_group = root\n"
				   "admin_group = daemon\n"
				   "pointer_group = nogroup\n"
				   "max_clients = 2\n"
				   "output_limit = 1M\n"
				   "session_grace_ms = 0\n"
				   "\n"
				   "[nbd]\n"
				   "listen = 10.0.0.1:10809\n"
				   "socket = run/n7.nbd\n"
				   "\n"
				   "[metrics]\n"
				   "listen = [::1]:9701\n"
				   "\n"
				   "[policy stripe]\n"
				   "block_size = 64K\n"
				   "performance = standard\n"
				   "[policy big_1]\n"
				   "block_size = 4194304\n";
	struct ftvm_config *c;

	write_key("pair.key", 40, 0600);
	c = load_ok("full", "full.conf", text);
	if (c)
		CHECK_INT("key read", 0, config_load_key(c, NULL, 0));
	unlink(tmp_path("pair.key"));
	if (!c)
		return;
	CHECK_STR("path", tmp_path("full.conf"), c->path);
	CHECK_STR("dir", realdir, c->dir);
	CHECK_STR("id", "node-7", c->id);
	CHECK_STR("listen", "10.0.0.1:8101", c->listen);
	CHECK_STR("partner", "[fe80::1]:8102", c->partner);
	CHECK_INT("transport", CONFIG_TRANSPORT_RDMA, c->transport);
	CHECK_STR("socket (relative)", under_dir("run/n7.sock"), c->socket_path);
	CHECK_STR("state_dir (absolute)", "/var/lib/ftvm/n7", c->state_dir);
	CHECK_INT("log_level", LOG_LEVEL_DEBUG, c->log_level);
	CHECK_INT("synchronous", true, c->synchronous_full);
	CHECK_INT("ack", CONFIG_ACK_MIRROR, c->ack);
	CHECK_INT("wal_checkpoint_frames", 100000, c->wal_checkpoint_frames);
	CHECK_STR("key_file (relative)", under_dir("pair.key"), c->key_file);
	CHECK_INT("key_len", 40, c->key_len);
	CHECK_INT("key bytes", 1, c->key && c->key[0] == 'k' && c->key[39] == 'k');
	CHECK_INT("memory_size", 64ull << 20, c->memory_size);
	CHECK_INT("page_size", 8192, c->page_size);
	CHECK_INT("pool_block_size", 2ull << 20, c->pool_block_size);
	CHECK_STR("store_path (relative)", under_dir("data/store.img"), c->store_path);
	CHECK_STR("flash_path (relative)", under_dir("data/flash.img"), c->flash_path);
	CHECK_INT("flash_size", 512ull << 20, c->flash_size);
	CHECK_INT("memory cache", 25, c->memory_cache_percent);
	CHECK_INT("flash cache", 90, c->flash_cache_percent);
	CHECK_INT("heartbeat_ms", 50, c->heartbeat_ms);
	CHECK_INT("dead_after_ms", 250, c->dead_after_ms);
	CHECK_INT("request_timeout_ms", 1500, c->request_timeout_ms);
	CHECK_INT("solo refuse", true, c->solo_refuse);
	CHECK_INT("journal_limit", 5000, c->journal_limit);
	CHECK_STR("trace path (relative)", under_dir("traces/n7.trace"), c->trace_path);
	CHECK_INT("trace channels", CONFIG_TRACE_PARTNER, c->trace_channels);
	CHECK_INT("socket_mode", 0666, c->socket_mode);
	CHECK_STR("socket_group", "root", c->socket_group.name);
	CHECK_INT("socket_group gid", 0, c->socket_group.gid);
	CHECK_STR("admin_group", "daemon", c->admin_group.name);
	CHECK_INT("admin_group gid", 1, c->admin_group.gid);
	CHECK_STR("pointer_group", "nogroup", c->pointer_group.name);
	CHECK_INT("pointer_group gid", 65534, c->pointer_group.gid);
	CHECK_INT("max_clients", 2, c->max_clients);
	CHECK_INT("output_limit", 1 << 20, c->output_limit);
	CHECK_INT("session_grace_ms", 0, c->session_grace_ms);
	CHECK_STR("nbd listen", "10.0.0.1:10809", c->nbd_listen);
	CHECK_STR("nbd socket (relative)", under_dir("run/n7.nbd"), c->nbd_socket_path);
	CHECK_STR("metrics listen", "[::1]:9701", c->metrics_listen);
	CHECK_INT("n_policies", 2, c->n_policies);
	if (c->n_policies == 2) {
		CHECK_STR("policy 0 name", "stripe", c->policies[0].name);
		CHECK_INT("policy 0 block_size", 65536, c->policies[0].block_size);
		CHECK_INT("policy 0 performance", CONFIG_PERFORMANCE_STANDARD,
			  c->policies[0].performance);
		CHECK_STR("policy 1 name", "big_1", c->policies[1].name);
		CHECK_INT("policy 1 block_size", 4 << 20, c->policies[1].block_size);
		CHECK_INT("policy 1 performance (capacity, the default)",
			  CONFIG_PERFORMANCE_CAPACITY, c->policies[1].performance);
	}
	{
		struct config_policy pol;

		CHECK(config_policy_find(c, "stripe", &pol) && pol.block_size == 65536 &&
			      pol.performance == CONFIG_PERFORMANCE_STANDARD,
		      "config_policy_find: stripe as configured");
		CHECK(config_policy_find(c, "default", &pol) && pol.block_size == 8192 &&
			      pol.performance == CONFIG_PERFORMANCE_CAPACITY,
		      "config_policy_find: default is a page of capacity");
		CHECK(!config_policy_find(c, "nope", &pol), "config_policy_find: no such policy");
	}
	config_free(c);

	/* The other way round: absolute socket and store, relative state_dir. */
	c = load_ok("full, swapped", "swap.conf",
		    "[node]\nid = b\nsocket = /run/ftvm/b.sock\nstate_dir = st/b\n"
		    "[store]\npath = /dev/sdb\n");
	if (!c)
		return;
	CHECK_STR("socket (absolute)", "/run/ftvm/b.sock", c->socket_path);
	CHECK_STR("state_dir (relative)", under_dir("st/b"), c->state_dir);
	CHECK_STR("store_path (absolute)", "/dev/sdb", c->store_path);
	config_free(c);
}

static void test_defaults(void)
{
	struct ftvm_config *c = load_ok("minimal", "min.conf", "[node]\nid = a\n");

	if (!c)
		return;
	CHECK_STR("path", tmp_path("min.conf"), c->path);
	CHECK_STR("dir", realdir, c->dir);
	CHECK_STR("id", "a", c->id);
	CHECK_STR("listen", "127.0.0.1:7101", c->listen);
	CHECK_STR("partner", "127.0.0.1:7102", c->partner);
	CHECK_INT("transport", CONFIG_TRANSPORT_AUTO, c->transport);
	CHECK_STR("socket", under_dir("a.sock"), c->socket_path);
	CHECK(!c->nbd_listen && !c->nbd_socket_path, "NBD is served without [nbd]");
	CHECK(!c->metrics_listen, "metrics are served without [metrics]");
	CHECK_STR("state_dir", under_dir("a"), c->state_dir);
	CHECK_INT("log_level", LOG_LEVEL_INFO, c->log_level);
	CHECK_INT("synchronous", false, c->synchronous_full);
	CHECK_INT("ack", CONFIG_ACK_COMMIT, c->ack);
	CHECK_STR("ack's name", "commit", config_ack_name(c->ack));
	CHECK_INT("wal_checkpoint_frames (the page table's default)", 0, c->wal_checkpoint_frames);
	CHECK_INT("memory_size", 256ull << 20, c->memory_size);
	CHECK_INT("page_size", 4096, c->page_size);
	CHECK_INT("pool_block_size", 64ull << 20, c->pool_block_size);
	CHECK_STR("store_path", under_dir("shared/store"), c->store_path);
	CHECK_INT("store_size (4 x memory + header)", (UINT64_C(1024) << 20) + 65536,
		  c->store_size);
	CHECK(c->flash_path == NULL, "no flash by default");
	CHECK_INT("flash_size without flash", 0, c->flash_size);
	CHECK_INT("no memory cache by default", 0, c->memory_cache_percent);
	CHECK_INT("no flash cache by default", 0, c->flash_cache_percent);
	CHECK_INT("heartbeat_ms", 100, c->heartbeat_ms);
	CHECK_INT("dead_after_ms", 500, c->dead_after_ms);
	CHECK_INT("request_timeout_ms", 5000, c->request_timeout_ms);
	CHECK_INT("solo (serve)", false, c->solo_refuse);
	CHECK(c->trace_path == NULL, "no trace by default");
	CHECK_INT("trace channels", CONFIG_TRACE_ALL, c->trace_channels);
	CHECK_INT("socket_mode", 0660, c->socket_mode);
	CHECK(c->socket_group.name == NULL, "no socket_group by default");
	CHECK(c->admin_group.name == NULL, "no admin_group by default");
	CHECK(c->pointer_group.name == NULL, "no pointer_group by default");
	CHECK_INT("max_clients", 1024, c->max_clients);
	CHECK_INT("output_limit", 64ull << 20, c->output_limit);
	CHECK_INT("session_grace_ms", 5000, c->session_grace_ms);
	CHECK_INT("n_policies", 0, c->n_policies);
	config_free(c);
}

/* The example in INTERFACES.md, '#' comments and all, loads as it reads. */
/* Durable answers survive power loss: so must the page table's commits,
 * whether the file says so or not. */
static void test_ack_durable(void)
{
	struct ftvm_config *c =
		load_ok("durable", "durable.conf", "[node]\nid = a\nack = durable\n");

	if (!c)
		return;
	CHECK_INT("ack", CONFIG_ACK_DURABLE, c->ack);
	CHECK_STR("ack's name", "durable", config_ack_name(c->ack));
	CHECK_INT("durable makes synchronous full", true, c->synchronous_full);
	config_free(c);
	c = load_ok("durable, full", "durable.conf",
		    "[node]\nid = a\nsynchronous = full\nack = durable\n");
	if (!c)
		return;
	CHECK_INT("durable with full", true, c->synchronous_full);
	config_free(c);
	/* Names both ways, as a partner's Hello says them (node/node.c). */
	for (int a = CONFIG_ACK_COMMIT; a <= CONFIG_ACK_DURABLE; a++)
		CHECK_INT(config_ack_name((enum config_ack)a), a,
			  config_ack_parse(config_ack_name((enum config_ack)a)));
	CHECK_INT("not a level", -1, config_ack_parse("Mirror"));
	CHECK_INT("empty", -1, config_ack_parse(""));
}

static void test_documented_example(void)
{
	static const char text[] =
		"[node]\n"
		"id = a                       # [a-z0-9-]{1,32}\n"
		"listen = 127.0.0.1:7101      # this node's partner-channel endpoint\n"
		"partner = 127.0.0.1:7102     # the partner's endpoint\n"
		"transport = auto             # auto | tcp | rdma  (auto: rdma if a device is usable)\n"
		"socket = a.sock              # client API socket (unix)\n"
		"state_dir = a                # this node's SQLite page table and journal\n"
		"[memory]\n"
		"size = 256M                  # frame pool (suffixes K M G)\n"
		"page_size = 4096\n"
		"[store]\n"
		"path = shared/store          # backing store shared by both nodes (file or block "
		"device)\n"
		"[failover]\n"
		"heartbeat_ms = 100\n"
		"dead_after_ms = 500\n"
		"[policy stripe]              # any number of named policies\n"
		"block_size = 65536\n";
	struct ftvm_config *c = load_ok("INTERFACES.md example", "doc.conf", text);

	if (!c)
		return;
	CHECK_STR("id", "a", c->id);
	CHECK_STR("listen", "127.0.0.1:7101", c->listen);
	CHECK_INT("transport", CONFIG_TRANSPORT_AUTO, c->transport);
	CHECK_STR("socket", under_dir("a.sock"), c->socket_path);
	CHECK_STR("store_path", under_dir("shared/store"), c->store_path);
	CHECK_INT("memory_size", 256ull << 20, c->memory_size);
	CHECK_INT("n_policies", 1, c->n_policies);
	CHECK_STR("policy name", "stripe", c->policies[0].name);
	CHECK_INT("policy block_size", 65536, c->policies[0].block_size);
	config_free(c);
}

/* Indentation, CRLF, a BOM, ';' comments, "key: value", page_size after size,
 * sections in any order and repeated. */
static void test_styles(void)
{
	static const char text[] = "\xef\xbb\xbf; written on another system\r\n"
				   "  [memory]\r\n"
				   "\tsize = 12K ; three pages\r\n"
				   "    page_size = 4K\r\n"
				   "\r\n"
				   "[node]\r\n"
				   "    id: c\r\n"
				   "[failover]\r\n"
				   "    heartbeat_ms=10\r\n"
				   "[node]\r\n"
				   "transport = tcp\r\n"
				   "# the end";
	struct ftvm_config *c = load_ok("styles", "styles.conf", text);

	if (!c)
		return;
	CHECK_STR("id", "c", c->id);
	CHECK_INT("memory_size", 12288, c->memory_size);
	CHECK_INT("page_size", 4096, c->page_size);
	CHECK_INT("heartbeat_ms", 10, c->heartbeat_ms);
	CHECK_INT("transport", CONFIG_TRANSPORT_TCP, c->transport);
	config_free(c);

	c = load_ok("edges", "edges.conf",
		    "[node]\nid = 0123456789abcdef0123456789abcde-\nlog_level = error\n"
		    "[memory]\nsize = 1M\npage_size = 1M\n"
		    "[failover]\nheartbeat_ms = 60000\ndead_after_ms = 600000\n"
		    "request_timeout_ms = 600000\n"
		    "[policy p]\nblock_size = 1M\n");
	if (!c)
		return;
	CHECK_STR("32-character id", "0123456789abcdef0123456789abcde-", c->id);
	CHECK_INT("log_level error", LOG_LEVEL_ERROR, c->log_level);
	CHECK_INT("page_size 1M", 1 << 20, c->page_size);
	CHECK_INT("heartbeat_ms max", 60000, c->heartbeat_ms);
	CHECK_INT("dead_after_ms max", 600000, c->dead_after_ms);
	CHECK_INT("request_timeout_ms max", 600000, c->request_timeout_ms);
	config_free(c);

	c = load_ok("smallest page", "small.conf",
		    "[node]\nid = d\n[memory]\nsize = 512\npage_size = 512\n"
		    "[policy p]\nblock_size = 512\n");
	if (!c)
		return;
	CHECK_INT("page_size 512", 512, c->page_size);
	CHECK_INT("memory_size 512", 512, c->memory_size);
	config_free(c);
}

static void test_max_policies(void)
{
	char text[8192];
	size_t n = (size_t)snprintf(text, sizeof(text), "[node]\nid = a\n");
	struct ftvm_config *c;

	for (int i = 0; i < CONFIG_POLICIES_MAX; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "[policy p%d]\nblock_size = 4K\n",
				      i);
	c = load_ok("64 policies", "many.conf", text);
	if (!c)
		return;
	CHECK_INT("n_policies", CONFIG_POLICIES_MAX, c->n_policies);
	CHECK_STR("last policy", "p63", c->policies[CONFIG_POLICIES_MAX - 1].name);
	config_free(c);
}

/* Loading through a relative path still gives an absolute directory. */
static void test_relative_load_path(void)
{
	char cwd[PATH_MAX];
	struct ftvm_config *c = NULL;
	char err[512] = "";
	int r;

	write_conf("rel.conf", "[node]\nid = r\n");
	if (!getcwd(cwd, sizeof(cwd)))
		die("getcwd");
	if (chdir(tmpdir) < 0)
		die("chdir");
	r = config_load("rel.conf", &c, err, sizeof(err));
	if (chdir(cwd) < 0)
		die("chdir back");
	CHECK_INT("load through relative path", 0, r);
	if (c) {
		CHECK_STR("path as given", "rel.conf", c->path);
		CHECK_STR("dir", realdir, c->dir);
		CHECK_STR("state_dir", under_dir("r"), c->state_dir);
		config_free(c);
	}
	unlink(tmp_path("rel.conf"));
}

/* ---- files that do not ---- */

struct bad {
	const char *text;
	unsigned line;	   /* 0: the message names no line */
	const char *where; /* "[section] key" as in the message, or NULL */
	const char *what;  /* a part of the message after it */
};

#define NODE "[node]\nid = a\n" /* lines 1 and 2 */

static const struct bad bad_cases[] = {
	/* [node] id */
	{ "[node]\nid = A!\n", 2, "[node] id",
	  "'A!' is not a valid node id (want [a-z0-9-]{1,32})" },
	{ "[node]\nid = a_b\n", 2, "[node] id", "not a valid node id" },
	{ "[node]\nid = a b\n", 2, "[node] id", "not a valid node id" },
	{ "[node]\nid = 0123456789abcdef0123456789abcdef0\n", 2, "[node] id",
	  "not a valid node id" },
	{ "[node]\nid =\n", 2, "[node] id", "empty value" },
	{ "[memory]\nsize = 1M\n", 0, "[node] id", "missing (every node needs one)" },
	{ "", 0, "[node] id", "missing" },
	{ "[node]\nlisten = h:1\n", 0, "[node] id", "missing" },
	/* endpoints */
	{ NODE "listen = 1.2.3.4\n", 3, "[node] listen", "missing port" },
	{ NODE "listen = :7101\n", 3, "[node] listen", "empty host" },
	{ NODE "listen = h:0\n", 3, "[node] listen", "port is not a number from 1 to 65535" },
	{ NODE "listen = h:65536\n", 3, "[node] listen", "port" },
	{ NODE "listen = h:x\n", 3, "[node] listen", "port" },
	{ NODE "listen = h:\n", 3, "[node] listen", "port" },
	{ NODE "listen = h:-1\n", 3, "[node] listen", "port" },
	{ NODE "listen = ::1:7101\n", 3, "[node] listen", "needs brackets" },
	{ NODE "listen = [::1]\n", 3, "[node] listen", "missing port" },
	{ NODE "listen = [::1:7101\n", 3, "[node] listen", "no ']'" },
	{ NODE "listen = []:7101\n", 3, "[node] listen", "empty host" },
	{ NODE "listen = a b:7101\n", 3, "[node] listen", "bad character" },
	{ NODE "listen =\n", 3, "[node] listen", "empty value" },
	{ NODE "partner = h:99999\n", 3, "[node] partner", "'h:99999' is not an endpoint" },
	{ NODE "[nbd]\nlisten = 10809\n", 4, "[nbd] listen", "is not an endpoint" },
	{ NODE "[nbd]\nsocket =\n", 4, "[nbd] socket", "empty value" },
	{ NODE "[nbd]\nport = 1\n", 4, "[nbd] port", "unknown key" },
	{ NODE "[metrics]\nlisten = nonsense\n", 4, "[metrics] listen",
	  "'nonsense' is not an endpoint: missing port" },
	{ NODE "[metrics]\nlisten = 127.0.0.1:0\n", 4, "[metrics] listen", "port" },
	{ NODE "[metrics]\nlisten =\n", 4, "[metrics] listen", "empty value" },
	{ NODE "[metrics]\npath = /metrics\n", 4, "[metrics] path", "unknown key" },
	{ NODE "[metrics]\nlisten = 127.0.0.1:9701\nlisten = 127.0.0.1:9702\n", 5,
	  "[metrics] listen", "duplicate key (first set on line 4)" },
	{ NODE "partner = peer\n", 3, "[node] partner", "missing port" },
	/* transport, log_level, paths */
	{ NODE "transport = udp\n", 3, "[node] transport",
	  "'udp' is not a transport (want auto, tcp or rdma)" },
	{ NODE "transport = TCP\n", 3, "[node] transport", "not a transport" },
	{ NODE "log_level = loud\n", 3, "[node] log_level", "'loud' is not a log level" },
	{ NODE "log_level = 7\n", 3, "[node] log_level", "not a log level" },
	{ NODE "synchronous = off\n", 3, "[node] synchronous",
	  "'off' is not a synchronous mode (want normal or full)" },
	{ NODE "ack = protocol-b\n", 3, "[node] ack",
	  "'protocol-b' is not an acknowledgement level (want mirror, commit or durable)" },
	{ NODE "ack = Mirror\n", 3, "[node] ack", "not an acknowledgement level" },
	{ NODE "synchronous = normal\nack = durable\n", 3, "[node] synchronous",
	  "normal cannot go with ack = durable (line 4)" },
	{ NODE "wal_checkpoint_frames = 15\n", 3, "[node] wal_checkpoint_frames",
	  "'15' is not a number of WAL frames from 16 to 1048576" },
	{ NODE "wal_checkpoint_frames = 1048577\n", 3, "[node] wal_checkpoint_frames",
	  "not a number of WAL frames" },
	{ NODE "wal_checkpoint_frames = 4K\n", 3, "[node] wal_checkpoint_frames",
	  "not a number of WAL frames" },
	{ NODE "socket =\n", 3, "[node] socket", "empty value" },
	{ NODE
	  "socket = aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
	  3, "[node] socket", "too long for a unix socket" },
	{ NODE "state_dir =\n", 3, "[node] state_dir", "empty value" },
	{ NODE "[store]\npath =\n", 4, "[store] path", "empty value" },
	/* [memory] size */
	{ NODE "\n\n\n[memory]\nsize = 12Q\n", 7, "[memory] size",
	  "'12Q' is not a size (want a number with optional K, M or G)" },
	{ NODE "[memory]\nsize = -1\n", 4, "[memory] size", "not a size" },
	{ NODE "[memory]\nsize = +1M\n", 4, "[memory] size", "not a size" },
	{ NODE "[memory]\nsize = 1.5M\n", 4, "[memory] size", "not a size" },
	{ NODE "[memory]\nsize = 64 K\n", 4, "[memory] size", "not a size" },
	{ NODE "[memory]\nsize = 1m\n", 4, "[memory] size", "not a size" },
	{ NODE "[memory]\nsize = 1T\n", 4, "[memory] size", "not a size" },
	{ NODE "[memory]\nsize = 1MB\n", 4, "[memory] size", "not a size" },
	{ NODE "[memory]\nsize = 0x1000\n", 4, "[memory] size", "not a size" },
	{ NODE "[memory]\nsize = 18446744073709551616\n", 4, "[memory] size", "not a size" },
	{ NODE "[memory]\nsize = 17179869184G\n", 4, "[memory] size", "not a size" },
	{ NODE "[memory]\nsize = 0\n", 4, "[memory] size", "at least one page" },
	{ NODE "[memory]\nsize =\n", 4, "[memory] size", "empty value" },
	/* [memory] page_size */
	{ NODE "[memory]\npage_size = 3000\n", 4, "[memory] page_size",
	  "'3000' is not a power of two from 512 to 1048576" },
	{ NODE "[memory]\npage_size = 256\n", 4, "[memory] page_size", "not a power of two" },
	{ NODE "[memory]\npage_size = 2M\n", 4, "[memory] page_size", "not a power of two" },
	{ NODE "[memory]\npage_size = 0\n", 4, "[memory] page_size", "not a power of two" },
	{ NODE "[memory]\npage_size = 4k\n", 4, "[memory] page_size", "not a size" },
	/* size against page_size: the later key's line, or the key's own */
	{ NODE "[memory]\nsize = 6K\n", 4, "[memory] size",
	  "6144 bytes is not a multiple of page_size (4096)" },
	{ NODE "[memory]\npage_size = 16K\nsize = 8K\n", 5, "[memory] size",
	  "not a multiple of page_size (16384)" },
	{ NODE "[memory]\nsize = 8K\npage_size = 16K\n", 5, "[memory] page_size",
	  "16384 does not divide size (8192 bytes, line 4)" },
	/* [memory] pool_block_size */
	{ NODE "[memory]\npool_block_size = 0\n", 4, "[memory] pool_block_size",
	  "'0' is too small (want at least one page)" },
	{ NODE "[memory]\npool_block_size = 6K\n", 4, "[memory] pool_block_size",
	  "pool_block_size (6144 bytes) is not a multiple of page_size (4096)" },
	/* [failover] */
	{ NODE "[failover]\nheartbeat_ms = 0\n", 4, "[failover] heartbeat_ms",
	  "'0' is not a number of milliseconds from 1 to 60000" },
	{ NODE "[failover]\nheartbeat_ms = 60001\n", 4, "[failover] heartbeat_ms",
	  "from 1 to 60000" },
	{ NODE "[failover]\nheartbeat_ms = abc\n", 4, "[failover] heartbeat_ms",
	  "not a number of milliseconds" },
	{ NODE "[failover]\nheartbeat_ms = -5\n", 4, "[failover] heartbeat_ms",
	  "not a number of milliseconds" },
	{ NODE "[trace]\nchannels = both\n", 4, "[trace] channels",
	  "'both' is not a choice of channels (want all, partner or client)" },
	{ NODE "[trace]\npath =\n", 4, "[trace] path", "empty value" },
	{ NODE "[trace]\nfile = x\n", 4, "[trace] file", "unknown key" },
	{ NODE "[failover]\nheartbeat_ms = +5\n", 4, "[failover] heartbeat_ms",
	  "not a number of milliseconds" },
	{ NODE "[failover]\nheartbeat_ms = 10ms\n", 4, "[failover] heartbeat_ms",
	  "not a number of milliseconds" },
	{ NODE "[failover]\nheartbeat_ms = 99999999999999999999999\n", 4, "[failover] heartbeat_ms",
	  "not a number of milliseconds" },
	{ NODE "[failover]\ndead_after_ms = 600001\n", 4, "[failover] dead_after_ms",
	  "from 1 to 600000" },
	{ NODE "[failover]\ndead_after_ms = 0\n", 4, "[failover] dead_after_ms",
	  "not a number of milliseconds" },
	{ NODE "[failover]\nrequest_timeout_ms = 0\n", 4, "[failover] request_timeout_ms",
	  "from 1 to 600000" },
	{ NODE "[failover]\nrequest_timeout_ms = 600001\n", 4, "[failover] request_timeout_ms",
	  "from 1 to 600000" },
	{ NODE "[failover]\nrequest_timeout_ms = 1e3\n", 4, "[failover] request_timeout_ms",
	  "not a number of milliseconds" },
	{ NODE "[failover]\nsolo = maybe\n", 4, "[failover] solo",
	  "'maybe' is not a solo mode (want serve or refuse)" },
	{ NODE "[failover]\ndead_after_ms = 100\n", 4, "[failover] dead_after_ms",
	  "100 must be greater than heartbeat_ms (100)" },
	{ NODE "[failover]\nheartbeat_ms = 600\n", 4, "[failover] heartbeat_ms",
	  "600 must be less than dead_after_ms (500)" },
	{ NODE "[failover]\ndead_after_ms = 300\nheartbeat_ms = 300\n", 5,
	  "[failover] heartbeat_ms", "must be less than dead_after_ms" },
	{ NODE "[failover]\nheartbeat_ms = 300\ndead_after_ms = 200\n", 5,
	  "[failover] dead_after_ms", "must be greater than heartbeat_ms (300)" },
	/* [client] */
	{ NODE "[client]\nsocket_mode = 0668\n", 4, "[client] socket_mode",
	  "'0668' is not a mode (want octal permission bits, 0 to 0777)" },
	{ NODE "[client]\nsocket_mode = 4777\n", 4, "[client] socket_mode", "is not a mode" },
	{ NODE "[client]\nsocket_mode = 0o660\n", 4, "[client] socket_mode", "is not a mode" },
	{ NODE "[client]\nsocket_mode = -1\n", 4, "[client] socket_mode", "is not a mode" },
	{ NODE "[client]\nsocket_group = no-such-group-here\n", 4, "[client] socket_group",
	  "no group 'no-such-group-here' on this system" },
	{ NODE "[client]\nadmin_group = no-such-group-here\n", 4, "[client] admin_group",
	  "no group 'no-such-group-here'" },
	{ NODE "[client]\npointer_group = no-such-group-here\n", 4, "[client] pointer_group",
	  "no group 'no-such-group-here'" },
	{ NODE "[client]\nmax_clients = 0\n", 4, "[client] max_clients",
	  "'0' is not a number of clients from 1 to 1048576" },
	{ NODE "[client]\nmax_clients = 1048577\n", 4, "[client] max_clients",
	  "not a number of clients" },
	{ NODE "[client]\nmax_clients = 10k\n", 4, "[client] max_clients",
	  "not a number of clients" },
	{ NODE "[client]\noutput_limit = 0\n", 4, "[client] output_limit", "too small" },
	{ NODE "[client]\nsession_grace_ms = 3600001\n", 4, "[client] session_grace_ms",
	  "from 0 to 3600000" },
	{ NODE "[client]\nsession_grace_ms = 5s\n", 4, "[client] session_grace_ms",
	  "not a number of milliseconds" },
	{ NODE "[client]\noutput_limit = 1T\n", 4, "[client] output_limit", "is not a size" },
	{ NODE "[client]\nmax_client = 3\n", 4, "[client] max_client", "unknown key" },
	{ NODE "[client]\nmax_clients = 3\nmax_clients = 4\n", 5, "[client] max_clients",
	  "duplicate key (first set on line 4)" },
	/* [flash] */
	{ NODE "[flash]\nsize = 1G\n", 4, "[flash] size",
	  "set without [flash] path (the device or file to use)" },
	{ NODE "[flash]\npath = f\nsize = 1M\n", 5, "[flash] size",
	  "1048576 bytes cannot hold this node's memory (want at least [memory] size + 65536" },
	{ NODE "[flash]\npath = f\nsize = lots\n", 5, "[flash] size", "not a size" },
	{ NODE "[flash]\ncache = 10%\n", 4, "[flash] cache",
	  "set without [flash] path (the device or file to use)" },
	{ NODE "[flash]\npath = f\ncache = 91%\n", 5, "[flash] cache",
	  "'91%' is not a share from 0% to 90%" },
	{ NODE "[memory]\ncache = 10\n", 4, "[memory] cache", "'10' is not a share (want N%" },
	{ NODE "[memory]\ncache = %\n", 4, "[memory] cache", "is not a share" },
	{ NODE "[memory]\ncache = -5%\n", 4, "[memory] cache", "is not a share from 0%" },
	{ NODE "[memory]\ncache = 1e1%\n", 4, "[memory] cache", "is not a share from 0%" },
	/* [policy NAME] */
	{ NODE "[policy a]\nblock_size = 4K\nperformance = fast\n", 5, "[policy a] performance",
	  "'fast': want high, standard or capacity" },
	{ NODE "[policy a]\nblock_size = 4K\nperformance = high\nperformance = high\n", 6,
	  "[policy a] performance", "duplicate key (first set on line 5)" },
	{ NODE "[policy a]\nblock_size = 8M\n", 4, "[policy a] block_size", "out of range" },
	{ NODE "[policy a]\nblock_size = 0\n", 4, "[policy a] block_size", "out of range" },
	{ NODE "[policy a]\nblock_size = x\n", 4, "[policy a] block_size", "not a size" },
	{ NODE "[policy a]\nblock_size =\n", 4, "[policy a] block_size", "empty value" },
	{ NODE "[policy a]\nblock_size = 6K\n", 4, "[policy a] block_size",
	  "6144 is not a multiple of page_size (4096)" },
	{ NODE "[memory]\npage_size = 8K\n[policy a]\nblock_size = 4K\n", 6,
	  "[policy a] block_size", "not a multiple of page_size (8192)" },
	{ NODE "[policy a]\nblock_size = 4K\n[memory]\npage_size = 8K\n", 6, "[memory] page_size",
	  "does not divide block_size of [policy a] (4096, line 4)" },
	{ NODE "[policy a]\n", 3, "[policy a] block_size", "missing (every policy needs one)" },
	{ NODE "[policy a]\n[policy b]\nblock_size = 4K\n", 3, "[policy a] block_size", "missing" },
	{ NODE "[policy a]\n; nothing\n[memory]\nsize = 1M\n", 3, "[policy a] block_size",
	  "missing" },
	{ NODE "[policy a]\nblock_size = 4K\nbogus = 1\n", 5, "[policy a] bogus", "unknown key" },
	{ NODE "[policy a]\nblock_size = 4K\nblock_size = 8K\n", 5, "[policy a] block_size",
	  "duplicate key (first set on line 4)" },
	{ NODE "[policy a]\nblock_size = 4K\n[policy a]\nblock_size = 8K\n", 5, "[policy a]",
	  "duplicate policy (first on line 3)" },
	{ NODE "[policy Bad!]\nblock_size = 4K\n", 3, "[policy Bad!]",
	  "'Bad!' is not a valid policy name" },
	{ NODE "[policy 0123456789abcdef0123456789abcdef0]\nblock_size = 4K\n", 3,
	  "[policy 0123456789abcdef0123456789abcdef0]", "not a valid policy name" },
	{ NODE "[policy]\nblock_size = 4K\n", 3, "[policy]", "policy without a name" },
	/* unknown keys and sections */
	{ NODE "bogus = 1\n", 3, "[node] bogus", "unknown key" },
	{ NODE "ID = b\n", 3, "[node] ID", "unknown key" },
	{ NODE "[memory]\nsizes = 1M\n", 4, "[memory] sizes", "unknown key" },
	{ NODE "[store]\nfile = x\n", 4, "[store] file", "unknown key" },
	{ NODE "[memory]\nsize = 16M\n[store]\nsize = 20M\n", 6, "[store] size",
	  "cannot hold both nodes' memory (want at least 2 x [memory] size + 65536" },
	{ NODE "[store]\nsize = lots\n", 4, "[store] size", "is not a size" },
	{ NODE "[failover]\n\n\n\n\n\nbogus = 1\n", 9, "[failover] bogus", "unknown key" },
	{ NODE "= 5\n", 3, "[node]", "a value with no key" },
	{ "[node]\n[nodes]\nid = a\n", 2, "[nodes]", "unknown section" },
	{ NODE "[nodes]\n", 3, "[nodes]", "unknown section" },
	{ NODE "[Node]\nid = b\n", 3, "[Node]", "unknown section" },
	{ "id = a\n[node]\n", 1, "id", "not in a section" },
	/* duplicates */
	{ NODE "id = b\n", 3, "[node] id", "duplicate key (first set on line 2)" },
	{ NODE "[memory]\nsize = 1M\n[node]\n[memory]\nsize = 2M\n", 7, "[memory] size",
	  "duplicate key (first set on line 4)" },
	/* syntax */
	{ NODE "garbage\n", 3, NULL, "syntax error" },
	{ NODE "[memory\nsize = 1M\n", 3, NULL, "syntax error" },
	{ NODE "garbage\n[memory]\nsize = 12Q\n", 3, NULL, "syntax error" },
	{ NODE "[memory]\nsize = 12Q\ngarbage\n", 4, "[memory] size", "not a size" },
	{ NODE "listen = aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1\n"
	       "[nodes]\n",
	  3, NULL, "line too long" },
};

static void check_bad(const char *label, const char *text, unsigned line, const char *where,
		      const char *what)
{
	const char *path = write_conf("bad.conf", text);
	struct ftvm_config *c = NULL;
	char err[1024] = "";
	char prefix[PATH_MAX + 256];
	int r = config_load(path, &c, err, sizeof(err));

	checks++;
	if (line)
		snprintf(prefix, sizeof(prefix), "%s:%u: %s%s", path, line, where ? where : "",
			 where ? ":" : "");
	else
		snprintf(prefix, sizeof(prefix), "%s: %s%s", path, where ? where : "",
			 where ? ":" : "");
	if (r != -EINVAL)
		FAIL("%s: expected -EINVAL, got %d (%s)\n--- file ---\n%s", label, r, err, text);
	if (c) {
		FAIL("%s: expected no config, got one", label);
		config_free(c);
	}
	if (strncmp(err, prefix, strlen(prefix)) != 0)
		FAIL("%s: expected the message to start \"%s\", got \"%s\"\n--- file ---\n%s",
		     label, prefix, err, text);
	if (!strstr(err, what))
		FAIL("%s: expected the message to contain \"%s\", got \"%s\"\n--- file ---\n%s",
		     label, what, err, text);
	if (strchr(err, '\n'))
		FAIL("%s: expected one line, got \"%s\"", label, err);
	unlink(path);
}

/* Sizes whose sums and products would wrap are refused where they are set. */
static void test_size_bounds(void)
{
	check_bad("memory of 2^60", NODE "[memory]\nsize = 1073741824G\n", 4, "[memory] size",
		  "is too large (at most 1024G)");
	check_bad("pool block of 2T", NODE "[memory]\npool_block_size = 2048G\n", 4,
		  "[memory] pool_block_size", "is too large (at most 1024G)");
	check_bad("journal_limit below 100", NODE "[failover]\njournal_limit = 99\n", 4,
		  "[failover] journal_limit", "from 100 to 4294967296");
	check_bad("store of 2^60", NODE "[store]\nsize = 1073741824G\n", 4, "[store] size",
		  "is too large (at most 1048576G)");
}

static void test_bad(void)
{
	char label[32];

	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad *b = &bad_cases[i];

		snprintf(label, sizeof(label), "bad case %zu", i);
		check_bad(label, b->text, b->line, b->where, b->what);
	}
}

/* The examples from the design, to the letter. */
static void test_exact_messages(void)
{
	static const struct {
		const char *text, *message; /* message without "PATH" */
	} cases[] = {
		{ "[node]\n\nid = A!\n", ":3: [node] id: 'A!' is not a valid node id (want "
					 "[a-z0-9-]{1,32})" },
		{ NODE "[memory]\n\n\n\nsize = 12Q\n",
		  ":7: [memory] size: '12Q' is not a size (want a number with optional K, M or G)" },
		{ NODE "[failover]\n\n\n\n\n\nbogus = 1\n", ":9: [failover] bogus: unknown key" },
		{ "[node]\n[nodes]\nid = a\n", ":2: [nodes]: unknown section" },
		{ "[node]\n", ": [node] id: missing (every node needs one)" },
	};
	char expected[PATH_MAX + 256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *path = write_conf("a.conf", cases[i].text);
		struct ftvm_config *c = NULL;
		char err[1024] = "";
		int r = config_load(path, &c, err, sizeof(err));

		snprintf(expected, sizeof(expected), "%s%s", path, cases[i].message);
		CHECK_INT("exact message: result", -EINVAL, r);
		CHECK_STR("exact message", expected, err);
		config_free(c);
		unlink(path);
	}
}

/* A config that loads with key_file = name, whose key config_load_key()
 * refuses saying what. */
static void check_bad_key(const char *label, const char *name, const char *what)
{
	char text[128], err[1024] = "", prefix[PATH_MAX + 4300];
	struct ftvm_config *c;

	snprintf(text, sizeof(text), NODE "key_file = %s\n", name);
	c = load_ok(label, "key.conf", text);
	if (!c)
		return;
	checks++;
	snprintf(prefix, sizeof(prefix), "%s:3: [node] key_file: ", tmp_path("key.conf"));
	if (config_load_key(c, err, sizeof(err)) >= 0 || c->key)
		FAIL("%s: the key was taken", label);
	else if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, what))
		FAIL("%s: expected \"%s...%s\", got \"%s\"", label, prefix, what, err);
	config_free(c);
}

/* [node] key_file: required off loopback, and then a secret of a key. */
static void test_key_file(void)
{
	struct ftvm_config *c;

	check_bad("no key off loopback", NODE "listen = 192.0.2.1:7101\n", 0, "[node] key_file",
		  "missing, and the partner channel is not on loopback (listen 192.0.2.1:7101");
	check_bad("no key, partner off loopback", NODE "partner = partner.example:7102\n", 0,
		  "[node] key_file", "`ftvmctl keygen FILE`");
	c = load_ok("no key on loopback", "lo.conf",
		    NODE "listen = [::1]:7101\npartner = localhost:7102\n");
	CHECK_INT("no key on loopback: none", 1, c && !c->key && !c->key_file);
	config_free(c);

	/* The key is read apart (ftvmctl reads the config, not the key). */
	write_key("short.key", 31, 0600);
	check_bad_key("short key", "short.key",
		      "has 31 bytes; a key needs at least 32 (make one with `ftvmctl keygen");
	unlink(tmp_path("short.key"));
	write_key("open.key", 64, 0640);
	check_bad_key("key readable by the group", "open.key",
		      "has mode 0640: group or others may read it, so it is no secret (chmod 600");
	unlink(tmp_path("open.key"));
	write_key("huge.key", 5000, 0600);
	check_bad_key("key too long", "huge.key", "has 5000 bytes, more than a key (4096)");
	unlink(tmp_path("huge.key"));
	check_bad_key("no such key", "gone.key", "cannot read");
	write_key("ok.key", 32, 0600);
	c = load_ok("a key of 32 bytes", "ok.conf",
		    NODE "key_file = ok.key\nlisten = 192.0.2.1:7101\n");
	CHECK_INT("a key of 32 bytes: not read by config_load", 1, c && !c->key);
	CHECK_INT("a key of 32 bytes: read", 0, c ? config_load_key(c, NULL, 0) : -1);
	CHECK_INT("a key of 32 bytes: its length", 32, c ? c->key_len : 0);
	config_free(c);
	unlink(tmp_path("ok.key"));
}

static void test_too_many_policies(void)
{
	char text[8192];
	size_t n = (size_t)snprintf(text, sizeof(text), "[node]\nid = a\n");

	for (int i = 0; i <= CONFIG_POLICIES_MAX; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "[policy p%d]\nblock_size = 4K\n",
				      i);
	/* Header of policy 65 on line 2 + 64 * 2 + 1. */
	check_bad("65 policies", text, 2 + 2 * CONFIG_POLICIES_MAX + 1, "[policy p64]",
		  "too many policies (at most 64)");
}

static void test_unreadable(void)
{
	struct ftvm_config *c = NULL;
	char err[1024] = "";
	char expected[PATH_MAX + 128];
	const char *path = tmp_path("does-not-exist.conf");
	int r = config_load(path, &c, err, sizeof(err));

	CHECK_INT("nonexistent file: result", -ENOENT, r);
	snprintf(expected, sizeof(expected), "%s: cannot read: %s", path, strerror(ENOENT));
	CHECK_STR("nonexistent file: message", expected, err);
	CHECK_INT("nonexistent file: no config", 0, c != NULL);

	/* A directory opens, then fails to read. */
	r = config_load(tmpdir, &c, err, sizeof(err));
	CHECK_INT("directory: result", -EISDIR, r);
	snprintf(expected, sizeof(expected), "%s: cannot read: %s", tmpdir, strerror(EISDIR));
	CHECK_STR("directory: message", expected, err);
	CHECK_INT("directory: no config", 0, c != NULL);
}

/* A short buffer or none at all still gets a terminated message. */
static void test_err_buffer(void)
{
	const char *path = write_conf("short.conf", "[node]\nid = A!\n");
	struct ftvm_config *c = NULL;
	char err[8];
	int r;

	memset(err, 'x', sizeof(err));
	r = config_load(path, &c, err, sizeof(err));
	CHECK_INT("short buffer: result", -EINVAL, r);
	CHECK_INT("short buffer: terminated", 1, memchr(err, '\0', sizeof(err)) != NULL);
	r = config_load(path, &c, NULL, 0);
	CHECK_INT("no buffer: result", -EINVAL, r);
	CHECK_INT("no config", 0, c != NULL);
	unlink(path);
}

/* ---- the parsers on their own ---- */

static void test_parse_size(void)
{
	static const struct {
		const char *s;
		uint64_t n;
	} good[] = {
		{ "0", 0 },
		{ "1", 1 },
		{ "4096", 4096 },
		{ "64K", 65536 },
		{ "256M", 256ull << 20 },
		{ "1G", 1ull << 30 },
		{ "0K", 0 },
		{ "007", 7 },
		{ "18446744073709551615", UINT64_MAX },
		{ "17179869183G", 17179869183ull << 30 },
		{ "17592186044415M", 17592186044415ull << 20 },
	};
	static const char *const bad[] = {
		"",
		"K",
		"-1",
		"+1",
		" 1",
		"1 ",
		"1KB",
		"1k",
		"1T",
		"0x10",
		"1.5K",
		"1KK",
		"M1",
		"1 K",
		"1\n",
		"18446744073709551616",
		"17179869184G",
		"17592186044416M",
		"99999999999999999999999999",
	};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint64_t n = 12345;
		int r = config_parse_size(good[i].s, &n);

		checks++;
		if (r != 0 || n != good[i].n)
			FAIL("config_parse_size(\"%s\"): expected 0 and %" PRIu64
			     ", got %d and %" PRIu64,
			     good[i].s, good[i].n, r, n);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t n = 12345;
		int r = config_parse_size(bad[i], &n);

		checks++;
		if (r != -EINVAL || n != 12345)
			FAIL("config_parse_size(\"%s\"): expected -EINVAL and no value, got %d "
			     "and %" PRIu64,
			     bad[i], r, n);
	}
}

static void test_parse_endpoint(void)
{
	static const struct {
		const char *s, *host;
		uint16_t port;
	} good[] = {
		{ "127.0.0.1:7101", "127.0.0.1", 7101 },
		{ "[::1]:1", "::1", 1 },
		{ "host.example:65535", "host.example", 65535 },
		{ "[fe80::1%eth0]:7101", "fe80::1%eth0", 7101 },
		{ "a:00080", "a", 80 },
	};
	static const char *const bad[] = {
		"",	":1",	 "h",	   "h:",    "h:0",   "h:65536",
		"h:-1", "h:+1",	 "h:1x",   "h: 1",  "[::1]", "[::1]x:1",
		"[]:1", "::1:1", "[::1:1", "h h:1", "h[:1",  "h:99999999999999999999",
	};
	char host[64];
	uint16_t port;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int r;

		port = 0;
		host[0] = '\0';
		r = config_parse_endpoint(good[i].s, host, sizeof(host), &port);
		checks++;
		if (r != 0 || strcmp(host, good[i].host) != 0 || port != good[i].port)
			FAIL("config_parse_endpoint(\"%s\"): expected 0, \"%s\", %u, got %d, "
			     "\"%s\", %u",
			     good[i].s, good[i].host, good[i].port, r, host, port);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = config_parse_endpoint(bad[i], host, sizeof(host), &port);

		checks++;
		if (r != -EINVAL)
			FAIL("config_parse_endpoint(\"%s\"): expected -EINVAL, got %d", bad[i], r);
	}

	/* The host must fit with its terminator. */
	CHECK_INT("host fits exactly", 0, config_parse_endpoint("abc:1", host, 4, &port));
	CHECK_STR("host fits exactly: host", "abc", host);
	CHECK_INT("host one too long", -EINVAL, config_parse_endpoint("abcd:1", host, 4, &port));
	CHECK_INT("v6 host one too long", -EINVAL,
		  config_parse_endpoint("[::12]:1", host, 4, &port));
}

static void test_transport_name(void)
{
	CHECK_STR("auto", "auto", config_transport_name(CONFIG_TRANSPORT_AUTO));
	CHECK_STR("tcp", "tcp", config_transport_name(CONFIG_TRANSPORT_TCP));
	CHECK_STR("rdma", "rdma", config_transport_name(CONFIG_TRANSPORT_RDMA));
}

static void test_free_null(void)
{
	config_free(NULL);
}

/* A volume's name is its NBD export's: one of the names a shell and an NBD
 * URI take as they are. */
static void test_volume_names(void)
{
	char longest[CONFIG_CLIENT_NAME_MAX + 2];
	const char *good[] = { "v", "vol1", "db.main_2", "A-b_c.d", longest };
	const char *bad[] = { "", "-v", ".v", "a b", "a/b", "a?b", "v\n" };

	memset(longest, 'x', CONFIG_CLIENT_NAME_MAX);
	longest[CONFIG_CLIENT_NAME_MAX] = '\0';
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK(config_volume_name_valid(good[i]), "'%s' refused", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!config_volume_name_valid(bad[i]), "'%s' taken", bad[i]);
	strcat(longest, "x");
	CHECK(!config_volume_name_valid(longest), "a name of %d characters taken",
	      CONFIG_CLIENT_NAME_MAX + 1);
}

/* config_key_at() lists what the parser takes: each key it names is known
 * under its section (given a value no key takes, "@", it is refused for
 * the value, or taken as a path, never as unknown), and the list ends. */
static void test_key_list(void)
{
	const char *section, *name;
	char text[256], where[128];
	bool ack = false, performance = false;
	size_t i;

	for (i = 0; config_key_at(i, &section, &name); i++) {
		struct ftvm_config *c = NULL;
		char err[1024] = "";
		const char *path;

		checks++;
		if (!section || !name) {
			FAIL("key %zu: section %s, name %s", i, section ? section : "NULL",
			     name ? name : "NULL");
			continue;
		}
		ack |= strcmp(section, "node") == 0 && strcmp(name, "ack") == 0;
		performance |= strcmp(section, "policy") == 0 && strcmp(name, "performance") == 0;
		snprintf(text, sizeof(text), NODE "[%s%s]\n%s = @\n", section,
			 strcmp(section, "policy") == 0 ? " p" : "", name);
		path = write_conf("key.conf", text);
		config_load(path, &c, err, sizeof(err));
		config_free(c);
		unlink(path);
		snprintf(where, sizeof(where), "] %s: unknown key", name);
		if (strstr(err, where) || strstr(err, "unknown section"))
			FAIL("key %zu, [%s] %s: the parser does not know it: %s", i, section, name,
			     err);
	}
	checks++;
	if (i < 30 || !ack || !performance)
		FAIL("config_key_at() listed %zu keys (%s [node] ack, %s [policy] performance)", i,
		     ack ? "with" : "without", performance ? "with" : "without");
}

/* What a reload tells apart: keys changed, added (the default before) and
 * dropped, as written; a policy's keys under its own section; nothing for
 * keys set alike, whatever their order. */
static char diff_seen[512];

static void note_diff(const char *where, const char *old_value, const char *new_value, void *arg)
{
	size_t at = strlen(diff_seen);

	snprintf(diff_seen + at, sizeof(diff_seen) - at, "%s: %s -> %s; ", where,
		 old_value ? old_value : "(default)", new_value ? new_value : "(default)");
}

static void test_diff(void)
{
	struct ftvm_config *old =
		load_ok("diff, old", "diff-old.conf",
			"[node]\nid = a\nlog_level = info\n[memory]\nsize = 64M\n[policy fast]\n"
			"block_size = 8K\n[failover]\nheartbeat_ms = 50\n");
	struct ftvm_config *fresh =
		load_ok("diff, new", "diff-new.conf",
			"[memory]\nsize = 128M\n[node]\nlog_level = debug\nid = a\n[policy fast]\n"
			"block_size = 8K\nperformance = high\n");
	struct ftvm_config *same =
		load_ok("diff, same", "diff-same.conf",
			"[memory]\nsize = 64M\n[node]\nid = a\nlog_level = info\n[failover]\n"
			"heartbeat_ms = 50\n[policy fast]\nblock_size = 8K\n");

	if (!old || !fresh || !same)
		goto out;
	diff_seen[0] = '\0';
	config_diff(old, fresh, note_diff, NULL);
	CHECK_STR("changed, dropped, added",
		  "[node] log_level: info -> debug; [memory] size: 64M -> 128M; "
		  "[failover] heartbeat_ms: 50 -> (default); "
		  "[policy fast] performance: (default) -> high; ",
		  diff_seen);
	diff_seen[0] = '\0';
	config_diff(old, same, note_diff, NULL);
	CHECK_STR("the same keys in another order", "", diff_seen);
out:
	config_free(old);
	config_free(fresh);
	config_free(same);
}

int main(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/test_config.XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmpdir))
		die("mkdtemp");
	if (!realpath(tmpdir, realdir))
		die("realpath");

	test_volume_names();
	test_key_list();
	test_full();
	test_defaults();
	test_ack_durable();
	test_diff();
	test_documented_example();
	test_styles();
	test_max_policies();
	test_relative_load_path();
	test_bad();
	test_exact_messages();
	test_too_many_policies();
	test_key_file();
	test_size_bounds();
	test_unreadable();
	test_err_buffer();
	test_parse_size();
	test_parse_endpoint();
	test_transport_name();
	test_free_null();

	if (rmdir(tmpdir) < 0)
		fprintf(stderr, "warning: %s left behind: %s\n", tmpdir, strerror(errno));
	if (failures) {
		fprintf(stderr, "%d of %d checks failed\n", failures, checks);
		return 1;
	}
	printf("all %d checks passed (%zu bad-input cases)\n", checks,
	       sizeof(bad_cases) / sizeof(bad_cases[0]));
	return 0;
}
