/* Staging slabs (replica/RDMA.md, "Registration (seed 000)": the second
 * region): registered buffers for the source of a one-sided page write whose
 * block is in no frame of this node's pool (a whole-page write to a page not
 * owned here but resident: its frames hold the old version, which readers
 * may still see until the owner answers).
 *
 * A slab is one buffer, mapped and added to its own registration table when
 * a write needs one and none is free (more writes in flight than slabs), and
 * registered at its first use for local access only (the partner never
 * writes into it). trim() lets go of the slabs not taken since the last
 * trim (idle): each leaves the table (its registration stale) and its memory
 * is unmapped once purge() has deregistered it, so a WRITE still reading it
 * never reads unmapped memory. No verbs here: registration goes through
 * struct rdma_reg_ops, as for the pool. Everything runs on the event loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rdma_regtable.h"

struct rdma_staging;

struct rdma_staging_stats {
	uint32_t slabs;	    /* mapped: taken, free or leaving */
	uint32_t taken;	    /* holding a write's block now */
	uint64_t allocated; /* slabs mapped since start */
	uint64_t released;  /* ... and unmapped again */
};

/* At most max_slabs slabs at once. */
int rdma_staging_new(uint32_t max_slabs, const struct rdma_reg_ops *ops, void *ctx,
		     struct rdma_staging **ret, char *reason, size_t reason_len);
/* Deregisters and unmaps every slab: after every WRITE from them is over.
 * NULL is fine. */
void rdma_staging_free(struct rdma_staging *st);

/* A slab of at least length bytes for one write, taken until give(): a free
 * one, else a new one. -ENOSPC when max_slabs are taken, -ENOMEM when no
 * memory can be mapped, -EINVAL for length 0. */
int rdma_staging_take(struct rdma_staging *st, uint64_t length, void **ret_addr, char *reason,
		      size_t reason_len);
/* The slab at addr is free again. -ENOENT when no taken slab starts there. */
int rdma_staging_give(struct rdma_staging *st, void *addr);

/* rdma_regtable_use_range() in the staging table: the lkey for a WRITE's
 * source in a slab (registering it on first use). -ENOENT outside every
 * slab. */
int rdma_staging_use_range(struct rdma_staging *st, const void *addr, uint64_t length,
			   struct rdma_block_key *ret, char *reason, size_t reason_len);

/* The free slabs not taken since the last trim leave the table (unmapped at
 * once when never registered, else at the purge). Returns how many. */
int rdma_staging_trim(struct rdma_staging *st);

/* Deregisters stale registrations (the caller knows no WRITE is in flight)
 * and unmaps the slabs that left: how many registrations went, or the first
 * error. */
int rdma_staging_purge(struct rdma_staging *st, char *reason, size_t reason_len);

/* Registrations of slabs: current, stale (of slabs leaving) and refused. */
void rdma_staging_count(const struct rdma_staging *st, struct rdma_regtable_counts *ret);

void rdma_staging_get_stats(const struct rdma_staging *st, struct rdma_staging_stats *ret);
