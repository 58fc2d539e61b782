/* Storage-based death (node/ha/HA.md, "Slots in the store"): each node writes
 * its slot in the shared store every heartbeat_ms from a thread of its own,
 * reads its partner's slot and its own mailbox, and tells the event loop what
 * it saw. The partner's store heartbeat is what proves it alive or dead when
 * the link cannot; the mailbox is how the survivor asks the other to fence
 * itself. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct event_base;

/* A node's state as its slot says (the values are NodeState's in
 * partner.proto, plus stopped: a clean exit). */
enum sbd_state {
	SBD_STATE_EMPTY = 0, /* never written */
	SBD_STATE_STARTING = 1,
	SBD_STATE_ACTIVE = 2,
	SBD_STATE_SOLO = 3,
	SBD_STATE_RESYNCING = 4,
	SBD_STATE_FENCED = 5,
	SBD_STATE_STOPPED = 6,
};

struct sbd_slot {
	char node[CONFIG_ID_MAX + 1];
	uint32_t state; /* enum sbd_state */
	uint64_t epoch;
	uint64_t counter; /* bumped by every write */
};

/* A fence request: "from" asks the mailbox's node to fence itself if its
 * epoch is at most epoch. */
struct sbd_mailbox {
	char from[CONFIG_ID_MAX + 1];
	uint64_t epoch;
	uint64_t counter;
};

/* The on-disk sectors (STORE_SECTOR bytes, little-endian, CRC-32C). Decoding
 * returns -ENOENT for a sector never written (all zeroes) and -EBADMSG for
 * one that is not a valid slot or mailbox. */
/* Where the CRC-32C of the bytes before it sits in a slot or mailbox sector. */
#define SBD_CRC_OFFSET 72u
void sbd_slot_encode(const struct sbd_slot *s, uint8_t *sector);
int sbd_slot_decode(const uint8_t *sector, struct sbd_slot *ret);
void sbd_mailbox_encode(const struct sbd_mailbox *m, uint8_t *sector);
int sbd_mailbox_decode(const uint8_t *sector, struct sbd_mailbox *ret);
const char *sbd_state_name(uint32_t state);

/* What the thread saw in its last round; times are clock_now_ms(). */
struct sbd_report {
	bool own_written;    /* the last write of our slot succeeded */
	uint64_t own_ok_ms;  /* when our slot was last written */
	struct sbd_slot own; /* what it says */
	bool partner_valid;  /* partner holds a slot that decoded */
	struct sbd_slot partner;
	uint64_t partner_changed_ms; /* when its counter last moved, as seen here */
	bool mailbox_valid;
	struct sbd_mailbox mailbox; /* a fence request for us */
	char error[160];	    /* why the last round failed, "" when it did not */
	uint64_t round_ms;	    /* when this round's reads were done: a report from before
				       a pause of the process must not pass for news */
};

/* How long r saw the partner's slot still, up to its round's reads: the
 * silence every decision and status count (0 before the first round). */
static inline uint64_t sbd_partner_silent_ms(const struct sbd_report *r)
{
	return r->round_ms > r->partner_changed_ms ? r->round_ms - r->partner_changed_ms : 0;
}

struct sbd;

/* Starts the thread on the store at path; index is this node's partition's
 * (store_partition_index()). changed(report, arg) runs on base's loop after
 * every round. The first write says state and epoch. */
int sbd_start(struct event_base *base, const char *path, unsigned index, const char *node_id,
	      uint32_t interval_ms, uint32_t state, uint64_t epoch,
	      void (*changed)(const struct sbd_report *r, void *arg), void *arg, struct sbd **ret);
/* What our slot says from the next write on (at once: the thread wakes). */
void sbd_set(struct sbd *s, uint32_t state, uint64_t epoch);
/* Writes a fence request for epoch into the partner's mailbox next round. */
void sbd_request_fence(struct sbd *s, uint64_t epoch);
/* The last report (a copy). */
void sbd_last(struct sbd *s, struct sbd_report *ret);
/* Stops the thread, then writes final_state once more (stopped on a clean
 * exit). NULL is fine. */
void sbd_stop(struct sbd *s, uint32_t final_state);
