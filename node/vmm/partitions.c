/* The memory partition table (seed 003 Fig. 12; vmm/MEDIA.md, "The memory
 * partition table"): this node's DRAM (the frame pool) and its flash each
 * split between server memory, which clients' allocations use, and the
 * storage cache, as [memory] cache and [flash] cache say. The split is
 * recorded in the page table.
 *
 *   start (vmm_partitions_open, after the table is loaded, before any frame
 *   is taken):
 *     configured split == recorded  -> taken
 *     server memory grows            -> taken when no volume's extent on
 *                                       flash's cache lies below the new
 *                                       boundary (DRAM's cache holds
 *                                       nothing at a start)
 *     server memory shrinks          -> taken when what it holds fits:
 *                                       DRAM: the frames promised to copies
 *                                       resting in DRAM; flash: every extent
 *                                       ends below the new end
 *                                    -> else the node does not start, and
 *                                       says which allocations are in the way
 *
 * Server memory is [0, S) of each: the pool takes allocations' frames there
 * only and volumes' frames from [S, end) only (frame_pool_set_cache,
 * vmm_alloc_partition), flash extents are placed there only
 * (v->flash_server_length). */
#include "vmm_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM
#define IN_THE_WAY_NAMED 3 /* allocations a refusal names; the rest are counted */

struct recorded {
	uint64_t dram_server, flash_server; /* bytes; 0: none recorded */
};

static int take_recorded(const struct pt_partition *part, void *arg)
{
	struct recorded *rec = arg;

	if (strcmp(part->type, VMM_PARTITION_SERVER) != 0)
		return 0;
	if (strcmp(part->media, "dram") == 0)
		rec->dram_server = part->length;
	else if (strcmp(part->media, "flash") == 0)
		rec->flash_server = part->length;
	return 0;
}

/* The largest block of any policy: server memory must hold one. */
static uint64_t largest_block(const struct vmm *v)
{
	uint64_t max = v->config->page_size;

	for (size_t i = 0; i < v->config->n_policies; i++)
		if (v->config->policies[i].block_size > max)
			max = v->config->policies[i].block_size;
	return max;
}

/* Appends to names, up to IN_THE_WAY_NAMED, "a-12 (uid 1000 app-1)". */
static void name_in_the_way(char *names, size_t len, unsigned *n, const struct vmm_alloc *a)
{
	size_t at = strlen(names);

	if ((*n)++ >= IN_THE_WAY_NAMED || at + 1 >= len)
		return;
	snprintf(names + at, len - at, "%s%s (uid %u%s%s)", at ? ", " : "", a->guid, a->uid,
		 a->client[0] ? " " : "", a->client);
}

static void and_more(char *names, size_t len, unsigned n)
{
	size_t at = strlen(names);

	if (n > IN_THE_WAY_NAMED && at + 1 < len)
		snprintf(names + at, len - at, " and %u more", n - IN_THE_WAY_NAMED);
}

/* What keeps server memory from shrinking to server bytes on media (or,
 * grows, flash's storage cache from shrinking to what lies past server
 * bytes); 0 when nothing does. */
static unsigned in_the_way(struct vmm *v, enum vmm_media media, uint64_t server, bool grows,
			   char *names, size_t len)
{
	uint32_t page = v->config->page_size;
	uint64_t promised = 0, flash_start = 0, flash_length;
	struct vmm_alloc **all;
	unsigned n = 0;
	size_t count = 0;

	names[0] = '\0';
	all = vmm_table_sorted(v->table, &count);
	if (media == VMM_MEDIA_FLASH)
		store_partition_range(v->flash, false, &flash_start, &flash_length);
	for (size_t i = 0; all && i < count; i++) {
		struct vmm_alloc *a = all[i];

		if (a->media != media)
			continue;
		if (media == VMM_MEDIA_DRAM)
			promised += a->pages * (a->block_size / page);
		else if (grows ? vmm_alloc_is_volume(a) && a->flash_offset < flash_start + server
			       : !vmm_alloc_is_volume(a) &&
					 a->flash_offset + store_extent_size(page, a->pages,
									     a->block_size) >
						 flash_start + server)
			name_in_the_way(names, len, &n, a);
	}
	if (media == VMM_MEDIA_DRAM && promised * page > server)
		for (size_t i = 0; all && i < count; i++)
			if (all[i]->media == VMM_MEDIA_DRAM)
				name_in_the_way(names, len, &n, all[i]);
	free(all);
	and_more(names, len, n);
	return n;
}

/* Checks a change of media's server memory from was to now bytes (was 0:
 * none recorded); logs it. -EBUSY, logged, when what it holds does not fit. */
static int may_change(struct vmm *v, enum vmm_media media, const char *section, uint64_t was,
		      uint64_t now)
{
	char names[512];
	unsigned n;

	if (!was || was == now)
		return 0;
	if (now > was) {
		/* DRAM's cache holds nothing at a start; flash's holds volumes. */
		n = media == VMM_MEDIA_FLASH ? in_the_way(v, media, now, true, names, sizeof(names))
					     : 0;
		if (n) {
			log_error(
				"partitions: flash's storage cache cannot shrink below %llu bytes "
				"from its start ([%s] cache): these volumes' extents lie before "
				"it: %s",
				(unsigned long long)now, section, names);
			return -EBUSY;
		}
		log_info("partitions: %s server memory grows from %llu to %llu bytes",
			 vmm_media_name(media), (unsigned long long)was, (unsigned long long)now);
		return 0;
	}
	n = in_the_way(v, media, now, false, names, sizeof(names));
	if (n) {
		log_error("partitions: %s server memory cannot shrink from %llu to %llu bytes "
			  "([%s] cache): %s %s",
			  vmm_media_name(media), (unsigned long long)was, (unsigned long long)now,
			  section,
			  media == VMM_MEDIA_DRAM ? "the frames promised to copies resting in DRAM "
						    "do not fit; they are"
						  : "the extents of these allocations lie past it:",
			  names);
		return -EBUSY;
	}
	log_info("partitions: %s server memory shrinks from %llu to %llu bytes",
		 vmm_media_name(media), (unsigned long long)was, (unsigned long long)now);
	return 0;
}

static int record(struct vmm *v, const char *media, uint64_t start, uint64_t server, uint64_t cache)
{
	struct pt_partition s = { media, VMM_PARTITION_SERVER, start, server };
	struct pt_partition c = { media, VMM_PARTITION_CACHE, start + server, cache };
	int r = pagetable_partition_put(v->pt, &s);

	return r < 0 ? r : pagetable_partition_put(v->pt, &c);
}

int vmm_partitions_open(struct vmm *v)
{
	const struct ftvm_config *c = v->config;
	uint32_t page = c->page_size;
	uint64_t total = frame_pool_total(v->pool), cache_frames, server, block = largest_block(v);
	uint64_t flash_start = 0, flash_length = 0, flash_cache = 0;
	struct recorded rec = { 0 };
	int r;

	cache_frames = total * c->memory_cache_percent / 100;
	server = (total - cache_frames) * page;
	if (server < block)
		return log_error_errno(-EINVAL,
				       "partitions: [memory] cache = %u%% leaves %llu bytes of "
				       "server memory, less than a block of %llu",
				       c->memory_cache_percent, (unsigned long long)server,
				       (unsigned long long)block);
	if (v->flash) {
		store_partition_range(v->flash, false, &flash_start, &flash_length);
		flash_cache = flash_length * c->flash_cache_percent / 100 / page * page;
	}
	r = pagetable_partition_list(v->pt, take_recorded, &rec);
	if (r == 0)
		r = may_change(v, VMM_MEDIA_DRAM, "memory", rec.dram_server, server);
	if (r == 0 && v->flash)
		r = may_change(v, VMM_MEDIA_FLASH, "flash", rec.flash_server,
			       flash_length - flash_cache);
	if (r < 0)
		return r;
	r = frame_pool_set_cache(v->pool, cache_frames);
	if (r == 0)
		r = record(v, "dram", 0, server, cache_frames * page);
	if (r == 0 && v->flash)
		r = record(v, "flash", flash_start, flash_length - flash_cache, flash_cache);
	if (r == 0)
		r = pagetable_commit(v->pt);
	if (r < 0)
		return log_error_errno(r, "partitions: cannot record them: %s",
				       pagetable_last_error(v->pt));
	v->flash_server_length = flash_length - flash_cache;
	log_info("partitions: dram %llu bytes of server memory, %llu of storage cache; flash "
		 "%llu and %llu",
		 (unsigned long long)server, (unsigned long long)(cache_frames * page),
		 (unsigned long long)v->flash_server_length, (unsigned long long)flash_cache);
	return 0;
}

/* ---- the table, to a client ---- */

struct table {
	Ftvm__Client__Partition *rows, **ptrs;
	size_t n, cap;
};

static Ftvm__Client__Partition *row(struct table *t, const char *media, const char *type,
				    uint64_t start, uint64_t length)
{
	Ftvm__Client__Partition *p;

	if (t->n == t->cap)
		return NULL;
	p = &t->rows[t->n];
	ftvm__client__partition__init(p);
	p->media = (char *)media;
	p->type = (char *)type;
	p->start = start;
	p->length = length;
	t->ptrs[t->n++] = p;
	return p;
}

void vmm_op_partitions(struct vmm *v, struct client_call *call)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__PartitionsReply pr = FTVM__CLIENT__PARTITIONS_REPLY__INIT;
	uint32_t page = frame_pool_page_size(v->pool);
	uint64_t server = frame_pool_server_frames(v->pool) * page;
	uint64_t cache = frame_pool_total(v->pool) * page - server;
	uint64_t start = 0, length = 0, free_bytes = 0, total;
	size_t n = 0;
	struct vmm_alloc **all = vmm_table_sorted(v->table, &n);
	struct table t = { .cap = n + 4 };
	Ftvm__Client__Partition *p;

	t.rows = calloc(t.cap, sizeof(*t.rows));
	t.ptrs = calloc(t.cap, sizeof(*t.ptrs));
	if (!all || !t.rows || !t.ptrs) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		goto out;
	}
	p = row(&t, "dram", VMM_PARTITION_SERVER, 0, server);
	p->free = frame_pool_free_count(v->pool) * page;
	p = row(&t, "dram", VMM_PARTITION_CACHE, server, cache);
	p->free = frame_pool_cache_free_count(v->pool) * page;
	if (v->flash) {
		store_partition_range(v->flash, false, &start, &length);
		vmm_extent_space(v, VMM_DEVICE_FLASH, &free_bytes, &total);
		p = row(&t, "flash", VMM_PARTITION_SERVER, start, v->flash_server_length);
		p->free = free_bytes;
		/* Fig. 12's remote device: who holds each range of it. */
		for (size_t i = 0; i < n; i++) {
			struct vmm_alloc *a = all[i];

			if (a->media != VMM_MEDIA_FLASH || vmm_alloc_is_volume(a))
				continue;
			p = row(&t, "flash", VMM_PARTITION_SERVER, a->flash_offset,
				store_extent_size(page, a->pages, a->block_size));
			p->guid = a->guid;
			p->uid = a->uid;
			p->client = a->client;
		}
		p = row(&t, "flash", VMM_PARTITION_CACHE, start + v->flash_server_length,
			length - v->flash_server_length);
		vmm_extent_space(v, VMM_DEVICE_FLASH_CACHE, &p->free, &total);
		/* The volumes it holds, whose pages go there first (fast destage). */
		for (size_t i = 0; i < n; i++) {
			struct vmm_alloc *a = all[i];

			if (a->media != VMM_MEDIA_FLASH || !vmm_alloc_is_volume(a))
				continue;
			p = row(&t, "flash", VMM_PARTITION_CACHE, a->flash_offset,
				store_extent_size(page, a->pages, a->block_size));
			p->guid = a->guid;
			p->uid = a->uid;
			p->client = a->client;
		}
	}
	pr.partitions = t.ptrs;
	pr.n_partitions = t.n;
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_PARTITIONS;
	reply.partitions = &pr;
	client_call_reply(call, &reply);
out:
	free(all);
	free(t.rows);
	free(t.ptrs);
}
