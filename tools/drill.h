/* ftvmctl drill: failover rehearsals on a running pair (node/ha/HA.md,
 * INTERFACES.md "Drills"). Each drill writes a workload of acknowledged
 * pages before and during a fault, waits for the takeover and for the pair
 * to be whole again, then checks every acknowledged write on both nodes and
 * verifies the mirror. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum drill_kind {
	DRILL_KILL,    /* SIGKILL the node, then start it again */
	DRILL_HANG,    /* SIGSTOP it for seconds, then SIGCONT: it fences itself */
	DRILL_CUT,     /* the link goes silent for seconds while both live */
	DRILL_RESTART, /* SIGTERM (a clean stop), then start it again */
};

struct drill_options {
	enum drill_kind kind;
	const char *node;	    /* kill, hang, restart: the node it hits */
	uint32_t seconds;	    /* hang, cut */
	const char *config_path;    /* one node's config (--config) */
	const char *partner_config; /* the other's; default: <dir>/<partner id>.conf */
	const char *ftvmd;	    /* to start a node by hand; default: beside ftvmctl */
	uint32_t pages;		    /* of the workload's allocations */
	uint32_t timeout_s;	    /* for the takeover and for the rejoin, each */
	const char *volume;	    /* --volume: also block writes to it over NBD */
	bool json;
};

/* The partner's config as ftvmctl finds it: <folder of config_path>/<partner
 * id>.conf (a pair's configs sit side by side, as in systemd/example and
 * /etc/ftvm). */
void drill_partner_config_path(const char *config_path, const char *partner_id, char *buf,
			       size_t len);

/* Runs the drill and prints its report; returns ftvmctl's exit code: 0 only
 * when no acknowledged write was lost and verify says equal. */
int drill_run(const struct drill_options *o);
