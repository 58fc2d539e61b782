/* The failover decisions (node/ha/HA.md): who serves when the link is lost,
 * when to take over, when to fence this node. Inputs: the partner link
 * (session) and what the fence thread reads in the store (storage/sbd.h). Outputs:
 * the node's state, the memory manager's mode and epoch. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "sbd.h"
#include "vmm.h"

struct event_base;
struct repl_session;
struct ha;

/* What moves a node from one state to another: the rows of the transition
 * table drawn at the top of ha.c, which says for each the states it may
 * happen in, the state it leads to and what it does to the memory manager's
 * mode. */
enum ha_event {
	HA_WAIT,	/* starting: wait for the partner (behind, or not the last to serve) */
	HA_LINKED,	/* the partner linked at our epoch: mirror */
	HA_RESUME,	/* ran alone before it stopped: serve alone again */
	HA_TOOK_OVER,	/* our slot says the new epoch: serve alone */
	HA_FENCE,	/* another node serves: acknowledge nothing more */
	HA_RESYNC_SEND, /* solo, the partner back and behind: bring it up to date */
	HA_RESYNC_SENT, /* ... it answered ResyncEnd: mirror */
	HA_RESYNC_SEND_FAILED,	  /* ... it did not: serve alone (retried while linked) */
	HA_RESYNC_UNSTARTED,	  /* a resync could not start: serve alone on */
	HA_RESYNC_RECEIVE,	  /* the survivor's ResyncBegin came */
	HA_RESYNC_RECEIVED,	  /* ... and its ResyncEnd, all applied: mirror */
	HA_RESYNC_RECEIVE_FAILED, /* ... but something in it was refused */
	HA_RESYNC_CUT,		  /* ... and the link went before its end */
	HA_EVENT_COUNT,
};

const char *ha_event_name(enum ha_event event);
/* The table's answer for event in state from with the memory manager in
 * mode, without doing it: 1 when it sets the mode (*ret_mode; with
 * solo_refuse, [failover] solo = refuse, solo is VMM_MODE_SOLO_READ), 0 when
 * the mode stays (*ret_mode = mode), and *ret_to the state; -EINVAL when the
 * table has no such step: from is not one event happens in, or the mode it
 * keeps is not one the new state allows. */
int ha_transition_lookup(int from, enum vmm_mode mode, enum ha_event event, bool solo_refuse,
			 int *ret_to, enum vmm_mode *ret_mode);
/* Whether the table lets a node in state (Ftvm__Partner__NodeState) run its
 * memory manager in mode. */
bool ha_state_allows_mode(int state, enum vmm_mode mode, bool solo_refuse);

struct ha_status {
	int state;		   /* Ftvm__Partner__NodeState */
	char reason[256];	   /* why this state ("" when there is nothing to say) */
	struct sbd_report store;   /* the fence thread's last round */
	uint64_t takeovers;	   /* since start */
	uint64_t last_takeover_ms; /* clock_now_ms() when the last one finished, 0: none */
	uint64_t resyncs;	   /* sent or received, since start */
	uint64_t last_resync_pages, last_resync_ms; /* the last one this node sent */
};

/* Called at each step of the state table, the state changed or not (for
 * sd_notify, the session's Hello and heartbeats, and the event stream);
 * step is its name ("took over", "fence", "linked", ...). */
typedef void (*ha_state_fn)(int state, const char *step, const char *reason, void *arg);

int ha_new(struct event_base *base, const struct ftvm_config *config, struct vmm *vmm,
	   struct repl_session *session, ha_state_fn state_changed, void *arg, struct ha **ret);
/* The partner link went up or down (the session's callback). */
void ha_link_changed(struct ha *h, bool up, const char *reason);
/* The end of a forced takeover: ok, serving alone; or not, and why. */
typedef void (*ha_forced_fn)(bool ok, const char *reason, void *arg);

/* An operator says the partner is gone for good (`ftvmctl takeover --force`,
 * ha/HA.md "Forced takeover"): take over although this node may not hold the
 * newest copy. Refused (-EALREADY, -EBUSY; why says it) while the link is
 * up or the partner's store heartbeat still moves; otherwise done(ok,
 * reason, arg) runs once the takeover ended, a fence round later. */
int ha_force_takeover(struct ha *h, ha_forced_fn done, void *arg, char *why, size_t len);
void ha_get_status(const struct ha *h, struct ha_status *ret);
/* Stops the fence thread; clean: our slot says stopped (the partner may take
 * over at once), else fenced. NULL is fine. */
void ha_free(struct ha *h, bool clean);
