/* What the trace replayer's modules share (trace_replay.c plays the trace,
 * replay_failover.c the partner's death and restart): the decoded trace and
 * the state of a replay. Not an interface for anything else. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.pb-c.h"
#include "codec.h"
#include "node_state.h"
#include "replay_nodes.h"
#include "replay_stream.h"
#include "trace_file.h"

struct replay_options;
struct replay_slot;
struct trace_maps;
struct trace_reader;

#define LINK_TIMEOUT_MS 10000u /* for the fresh node to link with the replayer */
#define ANSWER_MARGIN_MS 5000u /* beyond the node's request_timeout_ms */
#define CLIENTS_MAX 64u

typedef Ftvm__Client__ClientRequest ClientRequest;
typedef Ftvm__Client__ClientReply ClientReply;

/* One record of the trace, decoded; a Batch's envelopes each decoded too. */
struct rec {
	uint64_t number;
	enum trace_channel channel;
	enum trace_direction direction;
	uint64_t client; /* the recorded connection number, client records */
	ProtobufCMessage *msg;
	Envelope **inner; /* a Batch's */
	size_t n_inner;
	bool partner_gone; /* the partner's last record before a new link */
	bool new_link;	   /* the first Hello of a link after the first */
};

/* A pointer the node granted this client, or one it asked for (offset not
 * known yet): where a page is in the client's map of the pool. */
struct pointer {
	uint64_t id; /* the request's */
	char guid[64];
	uint64_t page;
	uint64_t offset;
	uint32_t length;
	bool granted;
};

struct client {
	uint64_t recorded;
	struct replay_stream s;
	ClientReply **replies; /* read, not yet asked for */
	size_t n_replies;
	uint8_t *pool; /* the node's frame pool, mapped as libftvm maps it */
	size_t pool_size;
	struct pointer *pointers;
	size_t n_pointers;
};

struct replay {
	const struct replay_options *o;
	struct trace_reader *reader;
	struct rec *recs;
	size_t n_recs;
	bool partner_mode; /* the file has partner records: we play the partner */

	/* from the header */
	char node_id[64], partner_id[64];
	uint32_t page_size, heartbeat_ms, dead_after_ms, request_timeout_ms;
	uint64_t memory_size, store_size;

	struct replay_nodes env;
	struct replay_stream partner;
	struct replay_slot *slot; /* the partner's fence slot, NULL while it is dead */
	uint64_t node_epoch;
	bool node_hello;	/* the node said Hello on the link we dialled last */
	uint64_t partner_epoch; /* what the partner we play says it is at */
	uint64_t next_heartbeat_ms;
	Envelope **from_node; /* envelopes the node sent, not yet asked for */
	size_t n_from_node;
	uint64_t *skipped_seqs; /* the node's recorded requests not replayed */
	size_t n_skipped;

	struct client clients[CLIENTS_MAX];
	size_t n_clients;

	struct trace_maps *maps;
	uint64_t matched;
	/* The first divergence. */
	bool diverged;
	char where[40], field[512];
	char *expected, *actual;
};

/* Notes the first divergence (later ones are ignored): where (a record
 * number), the field and why, the expected message and what came instead. */
void replay_diverge(struct replay *rp, const char *where, const char *field,
		    const ProtobufCMessage *expected, const ProtobufCMessage *actual,
		    const char *actual_text);
/* Record r's number as a divergence names it, "7" or "7.2" (batch). */
void replay_where_of(char *buf, size_t len, const struct rec *r, size_t inner, bool batch);
/* Reads what came until deadline_ms (or one round when it has passed),
 * sending the partner's heartbeats meanwhile. */
int replay_pump(struct replay *rp, uint64_t deadline_ms);
/* Dials the node's partner port as the partner. 0 or -errno, said. */
int replay_dial_node(struct replay *rp);
/* env is a step of the handshake (AuthChallenge, AuthProof): never played,
 * never compared, like a Hello. */
bool replay_is_auth(const Envelope *env);
/* Sends an envelope of the partner's as it is. */
void replay_send_partner(struct replay *rp, Envelope *env);
void replay_send_heartbeat(struct replay *rp);
