/* The mirrored memory manager of seed 002 (design: VMM.md): the originating
 * node's methods behind the client API, and the partner's message response
 * method behind the partner session. */
#pragma once

#include <stdint.h>

#include "client.pb-c.h"
#include "client_server.h"
#include "codec.h"
#include "config.h"

struct event_base;
struct repl_session;
struct vmm;

struct vmm_counts {
	uint64_t frames_total;
	uint64_t frames_free;
	uint64_t allocations_own;
	uint64_t allocations_partner;
};

/* Opens the page table under state_dir, creates the frame pool and loads
 * what the page table holds. Errors are logged. */
int vmm_new(struct event_base *base, const struct ftvm_config *config, struct vmm **ret);
/* The session the methods mirror through; set once it exists. */
void vmm_set_session(struct vmm *v, struct repl_session *session);
/* Commits what is open; NULL is fine. */
void vmm_free(struct vmm *v);

/* A data request from a local client (alloc, write, read, header, free,
 * list, sense, verify); answered through call, now or later. */
void vmm_client_request(struct vmm *v, struct client_call *call,
			const Ftvm__Client__ClientRequest *req);

/* A local client disconnected: its pointers are released, its waiting
 * requests dropped. */
void vmm_client_gone(struct vmm *v, uint64_t client_id);

/* Requests from the partner (Fig. 10), in order, a failure aborting the rest. */
void vmm_partner_request(struct vmm *v, Envelope *const *envs, size_t n);

void vmm_get_counts(const struct vmm *v, struct vmm_counts *ret);
