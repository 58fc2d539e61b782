/* The node's configuration file (INTERFACES.md): one INI file per node.
 * Relative paths are resolved against the directory of the file. Every problem
 * is reported as "FILE:LINE: [section] key: what is wrong" and nothing is
 * returned; defaults exist for everything but [node] id. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CONFIG_ID_MAX 32
/* [memory] page_size: a power of two in this range. */
#define CONFIG_PAGE_SIZE_MIN 512u
#define CONFIG_PAGE_SIZE_MAX (1u << 20)
#define CONFIG_POLICY_NAME_MAX 32
#define CONFIG_POLICIES_MAX 64
/* What a store keeps before the nodes' partitions (node/storage/store.c). */
#define STORE_HEADER_SPACE 65536u
/* The largest [memory] size (and pool_block_size) and [store] size. */
#define CONFIG_MEMORY_MAX (UINT64_C(1) << 40)
#define CONFIG_STORE_MAX (UINT64_C(1) << 50)
/* The largest share of a device for the storage cache: the rest is server
 * memory ([memory] cache, [flash] cache). */
#define CONFIG_CACHE_PERCENT_MAX 90
/* [failover] journal_limit: rows kept for a partner that is away. */
#define JOURNAL_LIMIT_MIN 100u
#define JOURNAL_LIMIT_MAX (UINT64_C(1) << 32)
#define JOURNAL_LIMIT_DEFAULT (UINT64_C(1) << 20)
#define WAL_CHECKPOINT_FRAMES_MIN 16u
#define WAL_CHECKPOINT_FRAMES_MAX 1048576u

enum config_transport {
	CONFIG_TRANSPORT_AUTO,
	CONFIG_TRANSPORT_TCP,
	CONFIG_TRANSPORT_RDMA,
};

/* What a trace records ([trace] channels): a bit per channel. */
enum {
	CONFIG_TRACE_PARTNER = 1,
	CONFIG_TRACE_CLIENT = 2,
	CONFIG_TRACE_ALL = 3,
};

/* A group named in the file, resolved when it is read: name NULL, none. */
struct config_group {
	char *name;
	gid_t gid;
};

/* [policy NAME] performance (node/vmm/MEDIA.md, "Where a page rests"). */
enum config_performance {
	CONFIG_PERFORMANCE_CAPACITY, /* flash, or the store without one: the default */
	CONFIG_PERFORMANCE_STANDARD, /* DRAM, spilling to flash when it is full */
	CONFIG_PERFORMANCE_HIGH,     /* DRAM only */
};

/* [node] ack: when a change is acknowledged (node/vmm/VMM.md,
 * "Acknowledgement levels"). */
enum config_ack {
	CONFIG_ACK_COMMIT,  /* committed in both page tables: the default */
	CONFIG_ACK_MIRROR,  /* applied in the partner's memory, its commit to follow */
	CONFIG_ACK_DURABLE, /* commit, and the page's block in the store, synced */
};

struct config_policy {
	char name[CONFIG_POLICY_NAME_MAX + 1];
	uint32_t block_size;
	enum config_performance performance;
};

/* A key as the file set it: where ("[memory] size", "[policy fast]
 * block_size") and the value as written. */
struct config_setting {
	char *where;
	char *value;
};

struct ftvm_config {
	char *path; /* the file as given */
	char *dir;  /* its directory, absolute */
	/* Every key the file set, in its order (config_diff). */
	struct config_setting *settings;
	size_t n_settings;

	/* [node] */
	char id[CONFIG_ID_MAX + 1];
	char *listen; /* host:port, [v6]:port */
	char *partner;
	enum config_transport transport;
	char *socket_path; /* absolute */
	/* [nbd]: where the NBD server listens (node/NBD.md); NULL for not. */
	char *nbd_listen;      /* host:port, [v6]:port */
	char *nbd_socket_path; /* absolute */
	/* [metrics] listen: where ftvmd serves GET /metrics over HTTP
	 * (node/metrics_server.c); NULL for nowhere. host:port, [v6]:port */
	char *metrics_listen;
	char *state_dir; /* absolute */
	int log_level;	 /* LOG_LEVEL_*; key log_level, default info */
	/* The page table's SQLite synchronous mode: normal (default; the partner
	 * covers a lost machine) or full (each commit also survives power loss). */
	bool synchronous_full;
	enum config_ack ack; /* key ack; durable makes synchronous_full */
	/* A commit checkpoints the page table's WAL once it holds this many
	 * frames (node/vmm/VMM.md, "WAL checkpoints"); 0 until set: the page
	 * table's default, 4096. */
	uint32_t wal_checkpoint_frames;
	/* The pair's shared key for the partner channel (key_file, absolute;
	 * NULL: none, allowed only when listen and partner are both loopback),
	 * read and checked by config_load_key() (keyfile.h): ftvmd needs it,
	 * ftvmctl, reading the same file for the socket, does not. */
	char *key_file;
	unsigned key_file_line;
	uint8_t *key;
	size_t key_len;

	/* [memory] */
	uint64_t memory_size;
	uint32_t page_size;
	/* The registration block the pool grows and shrinks by; key
	 * pool_block_size, default 64M (node/vmm/VMM.md, "Replacement"). */
	uint64_t pool_block_size;
	/* key cache: the share of the pool for the storage cache, in percent
	 * (node/vmm/MEDIA.md, "The memory partition table"); default 0 */
	uint32_t memory_cache_percent;

	/* [store] */
	char *store_path;    /* absolute */
	uint64_t store_size; /* key size; default 4 x [memory] size + the header */

	/* [flash] (node/vmm/MEDIA.md): this node's own flash device or file;
	 * path NULL: none. */
	char *flash_path;    /* absolute */
	uint64_t flash_size; /* key size; default 4 x [memory] size + the header */
	/* key cache: as [memory] cache, of the flash partition */
	uint32_t flash_cache_percent;

	/* [failover] */
	uint32_t heartbeat_ms;
	uint32_t dead_after_ms;
	uint32_t request_timeout_ms;
	bool solo_refuse; /* solo = refuse: alone, serve reads only (node/ha/HA.md) */
	/* Journal rows kept for a partner that is away; past them it is given a
	 * full resync instead (node/ha/HA.md, "Solo and rejoin"). */
	uint64_t journal_limit;

	/* [trace] (common/TRACE.md): recorded from start when path is set */
	char *trace_path; /* absolute, NULL: no trace */
	int trace_channels;

	/* [client] (node/vmm/VMM.md, "Who may do what"): the socket file's mode and
	 * group; who may act on others' allocations and on the pair, who may map
	 * the pool; how many clients at once, and the replies one may leave
	 * unread before it is dropped. */
	uint32_t socket_mode;
	struct config_group socket_group;
	struct config_group admin_group;
	struct config_group pointer_group;
	uint32_t max_clients;
	uint64_t output_limit;
	/* How long a session allocation outlives its client's last connection
	 * (node/vmm/VMM.md, "Session allocations"). */
	uint32_t session_grace_ms;
	/* [policy NAME], in file order */
	size_t n_policies;
	struct config_policy policies[CONFIG_POLICIES_MAX];
};

/* Reads and validates FILE. On failure returns -EINVAL (bad content) or
 * -errno (cannot read) and writes one line naming file, line and key to err. */
int config_load(const char *path, struct ftvm_config **ret, char *err, size_t err_len);

void config_free(struct ftvm_config *c);

/* Calls fn for each key the two files set differently: in one and not the
 * other (its value there NULL: the default), or to another value. */
typedef void (*config_diff_fn)(const char *where, const char *old_value, const char *new_value,
			       void *arg);
void config_diff(const struct ftvm_config *old, const struct ftvm_config *fresh, config_diff_fn fn,
		 void *arg);

/* Reads c's key_file into key and key_len (nothing to do without one).
 * -EINVAL or -errno with one line naming file, line and key in err. */
int config_load_key(struct ftvm_config *c, char *err, size_t err_len);

const char *config_transport_name(enum config_transport t);

/* "high", "standard", "capacity" <-> CONFIG_PERFORMANCE_*; -EINVAL for
 * anything else. */
int config_parse_performance(const char *s);
const char *config_performance_name(enum config_performance p);
/* "commit", "mirror" or "durable". */
const char *config_ack_name(enum config_ack a);
/* The level a name names ("mirror", "commit", "durable"), or -1. */
int config_ack_parse(const char *name);
/* name's policy: its block size and performance; the policy "default",
 * when the file has none of that name, has blocks of a page and capacity.
 * false for a policy the file does not name. */
bool config_policy_find(const struct ftvm_config *c, const char *name, struct config_policy *ret);

/* "all", "partner", "client" <-> CONFIG_TRACE_*; -EINVAL for anything else. */
int config_parse_trace_channels(const char *s);
const char *config_trace_channels_name(int channels);

/* Whether s is a valid node id: [a-z0-9-]{1,CONFIG_ID_MAX}. */
bool config_id_valid(const char *s);
/* Whether s is a valid client name (ftvm_connect_named): [A-Za-z0-9._-],
 * at most CONFIG_CLIENT_NAME_MAX characters; "" (no name) is valid. */
#define CONFIG_CLIENT_NAME_MAX 64
bool config_client_name_valid(const char *s);
/* A block volume's name (node/vmm/VMM.md, "Volumes"), its NBD export's:
 * 1 to CONFIG_CLIENT_NAME_MAX characters of [A-Za-z0-9._-], not starting
 * with '-' or '.'. */
bool config_volume_name_valid(const char *s);
/* Whether s is a client's session id: CONFIG_SESSION_ID_LEN lowercase hex
 * digits, or "" (none). */
#define CONFIG_SESSION_ID_LEN 32
bool config_session_id_valid(const char *s);

/* The keys the file may hold, for tools that list them (tests/man/ checks
 * that ftvm.conf(5) documents each): the i-th key's section, as written in
 * a file ("policy" for the keys of every [policy NAME]), and its name.
 * false when i is past the last key. */
bool config_key_at(size_t i, const char **ret_section, const char **ret_name);

/* "4096", "64K", "256M", "1G" (powers of 1024). -EINVAL on anything else,
 * including overflow, an empty string and trailing garbage. */
int config_parse_size(const char *s, uint64_t *ret);

/* "host:port" or "[v6addr]:port" with port 1..65535. */
int config_parse_endpoint(const char *s, char *host, size_t host_len, uint16_t *ret_port);
