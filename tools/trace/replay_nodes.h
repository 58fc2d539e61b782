/* The fresh node (or pair) a trace replay runs against: its configs, made
 * from the trace's header, and its state in a temporary directory, the ftvmd
 * processes, and their end (common/TRACE.md, "Replay"). */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ftvm_node_status;
struct trace_reader;

struct replay_node {
	char id[64];
	char config[PATH_MAX];
	char socket[PATH_MAX];
	pid_t pid; /* 0 once it exited or was stopped */
};

struct replay_nodes_config {
	const struct trace_reader *reader; /* solo and policy.* come from its header */
	const char *ids[2];		   /* the node, and its partner in a pair */
	size_t n;			   /* 1: a node whose partner the replayer plays */
	uint32_t page_size, heartbeat_ms, dead_after_ms, request_timeout_ms;
	uint64_t memory_size, store_size;
	const char *ftvmd; /* NULL: the one beside ftvmctl */
};

struct replay_nodes {
	char dir[PATH_MAX];
	struct replay_node node[2];
	size_t n;
	int partner_port_fd; /* one node: its partner's port, held by us; -1 */
	int listen_port;     /* node[0]'s partner-channel port */
};

/* Starts them in a new temporary directory and waits until they serve (a
 * pair: until both are active). A node that exits at start (its port was
 * taken meanwhile) is tried again in a new directory, a few times. Returns
 * 0, -ENOENT when there is no ftvmd, or -errno; what failed is said on
 * stderr. */
int replay_nodes_start(struct replay_nodes *rn, const struct replay_nodes_config *c);
/* Stops them (SIGTERM, then SIGKILL after 5 s) and removes the directory,
 * unless keep (then it says where it is). */
void replay_nodes_stop(struct replay_nodes *rn, bool keep);
/* Its status (libftvm's ftvm_status()): 0 or -errno. */
int replay_node_status(const struct replay_node *n, struct ftvm_node_status *ret);
/* The node answers status, and (state not NULL) is in that state. */
bool replay_node_state_is(const struct replay_node *n, const char *state);
void replay_sleep_ms(unsigned ms);
