/* The partner's life in a partner-channel trace replay (common/TRACE.md,
 * "Failover and resync"). The replayer plays the partner, so it also keeps
 * the partner's fence slot in the fresh node's store, as the partner's own
 * fence thread would (node/ha/HA.md, "Slots in the store"); where the trace
 * shows the partner gone (a new link follows), it stops the slot and closes
 * the link as a kill -9 would, waits for the node to take over on its own
 * clock, and at the new link dials again as the restarted partner with its
 * recorded Hello. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct rec;
struct replay;
struct replay_slot;

/* Claims the partner's partition in the node's store (as the partner does
 * when it first opens it) and starts writing its slot every heartbeat_ms
 * with node/storage/sbd.c's fence thread, saying state (NodeState) at the partner's
 * epoch. The partner's mailbox is read and left alone. -errno, and a
 * divergence at where saying why. */
int replay_slot_start(struct replay *rp, const char *where, uint32_t state);
/* What the slot says from its next write on. */
void replay_slot_set(struct replay_slot *s, uint32_t state, uint64_t epoch);
/* Stops writing the slot, without a last write: the partner's store
 * heartbeat stops as a kill -9 stops it. NULL is fine. */
void replay_slot_kill(struct replay_slot *s);

/* After record r, the partner's last before a new link: the partner dies
 * and the node is waited for until it took over (its epoch moved on). */
void replay_partner_dies(struct replay *rp, const struct rec *r);
/* Record i opens a new link: the partner, restarted, dials the node once
 * its destage queue is empty and says its recorded Hello. */
void replay_partner_restarts(struct replay *rp, size_t i);
