/* Builders of the paging-synchronization messages an originating node sends.
 * A vmm_msg holds an envelope and its message together, so a batch is an
 * array of them on the caller's stack; strings and data are borrowed. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "codec.h"
#include "session.h"
#include "vmm_table.h"

struct vmm_msg {
	Envelope env;
	union {
		Ftvm__Partner__LockRequest lock_request;
		Ftvm__Partner__AllocateRead allocate_read;
		Ftvm__Partner__AllocateWrite allocate_write;
		Ftvm__Partner__WritePage write_page;
		Ftvm__Partner__ReleasePointer release_pointer;
	} m;
	Ftvm__Partner__Landing landed; /* a WritePage's, when it names one */
};

/* LockRequest for mode (read or write). */
Envelope *vmm_msg_lock_request(struct vmm_msg *msg, const char *guid, uint64_t page, bool write,
			       uint64_t ticket, uint32_t wait_ms);
/* AllocateWrite when write (page_in: a pointer's, which the partner takes
 * resident), else AllocateRead. */
Envelope *vmm_msg_allocate(struct vmm_msg *msg, const char *guid, uint64_t page, const char *owner,
			   bool write, bool page_in);
Envelope *vmm_msg_write_page(struct vmm_msg *msg, const char *guid, uint64_t page, const void *data,
			     uint32_t len, uint32_t crc);
/* WritePage without data: the block went one-sided into the landing at. */
Envelope *vmm_msg_write_page_landed(struct vmm_msg *msg, const char *guid, uint64_t page,
				    uint32_t crc, const struct repl_landing *at);
Envelope *vmm_msg_release_pointer(struct vmm_msg *msg, const char *guid, uint64_t page,
				  const char *owner, bool modified, uint64_t version, uint32_t crc);
/* The AllocateMemory that describes a (its strings and header borrowed):
 * what Fig. 5 sends, and what a resync sends of each allocation. */
void vmm_msg_allocation(Ftvm__Partner__AllocateMemory *am, const struct vmm_alloc *a);
