/* Staging slabs (rdma_staging.h). A slab's states:
 *
 *   (none) --take, no free slab fits--> taken --give--> free --take--> taken
 *   free, not taken since the last trim --trim--> leaving (out of the table,
 *   its registration stale) --purge deregistered it--> unmapped (none);
 *   a slab never registered is unmapped at the trim
 *
 * Slab i is block i of the table; a slot is not used again while its slab
 * is leaving, so a stale registration always belongs to the memory still
 * mapped for it. */
#define _GNU_SOURCE
#include "rdma_staging.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "reason.h"

enum slab_state {
	SLAB_NONE,
	SLAB_FREE,
	SLAB_TAKEN,
	SLAB_LEAVING
};

struct slab {
	enum slab_state state;
	uint8_t *addr;
	uint64_t length;
	bool taken_since_trim;
};

struct rdma_staging {
	struct rdma_regtable *table;
	uint32_t max_slabs;
	uint64_t allocated, released;
	struct slab slab[];
};

int rdma_staging_new(uint32_t max_slabs, const struct rdma_reg_ops *ops, void *ctx,
		     struct rdma_staging **ret, char *reason, size_t reason_len)
{
	struct rdma_staging *st;
	int r;

	if (max_slabs == 0)
		return reason_fail(reason, reason_len, -EINVAL, "staging needs at least one slab");
	st = calloc(1, sizeof(*st) + (size_t)max_slabs * sizeof(st->slab[0]));
	if (!st)
		return reason_fail(reason, reason_len, -ENOMEM, "out of memory");
	r = rdma_regtable_new(max_slabs, ops, ctx, &st->table, reason, reason_len);
	if (r < 0) {
		free(st);
		return r;
	}
	st->max_slabs = max_slabs;
	*ret = st;
	return 0;
}

static void unmap(struct rdma_staging *st, struct slab *s)
{
	munmap(s->addr, s->length);
	*s = (struct slab){ .state = SLAB_NONE };
	st->released++;
}

void rdma_staging_free(struct rdma_staging *st)
{
	if (!st)
		return;
	rdma_regtable_free(st->table); /* deregisters first: then the memory can go */
	for (uint32_t i = 0; i < st->max_slabs; i++)
		if (st->slab[i].state != SLAB_NONE)
			unmap(st, &st->slab[i]);
	free(st);
}

static int take_slab(struct slab *s, void **ret_addr)
{
	s->state = SLAB_TAKEN;
	s->taken_since_trim = true;
	*ret_addr = s->addr;
	return 0;
}

int rdma_staging_take(struct rdma_staging *st, uint64_t length, void **ret_addr, char *reason,
		      size_t reason_len)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint32_t none = st->max_slabs;
	struct slab *s;
	uint8_t *addr;
	int r;

	if (length == 0)
		return reason_fail(reason, reason_len, -EINVAL, "a staging slab of 0 bytes");
	for (uint32_t i = 0; i < st->max_slabs; i++) {
		s = &st->slab[i];
		if (s->state == SLAB_FREE && s->length >= length)
			return take_slab(s, ret_addr);
		if (s->state == SLAB_NONE && none == st->max_slabs)
			none = i;
	}
	if (none == st->max_slabs)
		return reason_fail(reason, reason_len, -ENOSPC,
				   "all %" PRIu32 " staging slabs are taken or leaving",
				   st->max_slabs);
	length = (length + page - 1) / page * page;
	addr = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (addr == MAP_FAILED)
		return reason_fail(reason, reason_len, -ENOMEM,
				   "mapping a staging slab of %" PRIu64 " bytes", length);
	r = rdma_regtable_add_at(st->table, none, addr, length, reason, reason_len);
	if (r < 0) {
		munmap(addr, length);
		return r;
	}
	s = &st->slab[none];
	*s = (struct slab){ .addr = addr, .length = length };
	st->allocated++;
	return take_slab(s, ret_addr);
}

int rdma_staging_give(struct rdma_staging *st, void *addr)
{
	for (uint32_t i = 0; i < st->max_slabs; i++) {
		if (st->slab[i].state == SLAB_TAKEN && st->slab[i].addr == addr) {
			st->slab[i].state = SLAB_FREE;
			return 0;
		}
	}
	return -ENOENT;
}

int rdma_staging_use_range(struct rdma_staging *st, const void *addr, uint64_t length,
			   struct rdma_block_key *ret, char *reason, size_t reason_len)
{
	return rdma_regtable_use_range(st->table, addr, length, ret, reason, reason_len);
}

int rdma_staging_trim(struct rdma_staging *st)
{
	int n = 0;

	for (uint32_t i = 0; i < st->max_slabs; i++) {
		struct slab *s = &st->slab[i];

		if (s->state == SLAB_FREE && !s->taken_since_trim) {
			rdma_regtable_remove(st->table, i, NULL, 0); /* it is in the table */
			s->state = SLAB_LEAVING;
			if (!rdma_regtable_registered(st->table, i))
				unmap(st, s); /* never registered: no purge will come for it */
			n++;
		}
		s->taken_since_trim = false;
	}
	return n;
}

int rdma_staging_purge(struct rdma_staging *st, char *reason, size_t reason_len)
{
	int r = rdma_regtable_purge(st->table, reason, reason_len);

	for (uint32_t i = 0; i < st->max_slabs; i++)
		if (st->slab[i].state == SLAB_LEAVING && !rdma_regtable_registered(st->table, i))
			unmap(st, &st->slab[i]);
	return r;
}

void rdma_staging_count(const struct rdma_staging *st, struct rdma_regtable_counts *ret)
{
	rdma_regtable_count(st->table, ret);
}

void rdma_staging_get_stats(const struct rdma_staging *st, struct rdma_staging_stats *ret)
{
	*ret = (struct rdma_staging_stats){ .allocated = st->allocated, .released = st->released };
	for (uint32_t i = 0; i < st->max_slabs; i++) {
		ret->slabs += st->slab[i].state != SLAB_NONE;
		ret->taken += st->slab[i].state == SLAB_TAKEN;
	}
}
