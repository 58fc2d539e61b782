/* The backing store from the memory manager's side: extents for new
 * allocations, the destage queue, and page-in (vmm/VMM.md, "Replacement").
 *
 * Destage (the owner of an allocation does it, in the background): a page
 * released modified is queued; DESTAGE_DELAY_MS later a round writes the
 * blocks and records (version, CRC-32C) of everything queued to their extents,
 * with one barrier behind them; then each page that has not changed meanwhile
 * is clean here, and one batch of Destaged messages makes them clean on the
 * partner too. A page that changed is queued again. A write-locked page is
 * not written (a pointer may be half way through it, or the owner's own write
 * not yet acknowledged): it is queued when the lock goes.
 *
 * Page-in: at start only the records are read (each page's version and
 * CRC-32C as the store holds them), and every page stays non-resident; a
 * request that needs a page's contents reads its block into frames through
 * the queue, and the block must match the page table's CRC-32C. So a clean
 * restart of both nodes (each destages everything first) loses nothing. */
#include "vmm_state.h"

#include <event2/event.h>

#include <endian.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "crc32c.h"
#include "log.h"
#include "session.h"
#include "store.h"
#include "store_queue.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM
/* A dirty page waits this long before it is written: rewrites of a hot page
 * in between cost nothing, and a round shares one barrier. */
#define DESTAGE_DELAY_MS 50
#define STORE_THREADS 2

struct vmm_destage {
	struct vmm_destage *next;
	struct destage_round *round;
	char guid[128];
	uint64_t page;
	/* What is being written: a snapshot, the page may change meanwhile. */
	uint64_t version;
	struct store_page_record record;
	bool posted; /* its block is on its way: its record follows the round's fence */
	int result;
	uint8_t block[];
};

static void on_destage_timer(evutil_socket_t fd, short what, void *arg);

/* A page table whose extents are in another store (a new or a foreign file
 * at [store] path) would read garbage back: refuse it. The first store a
 * table meets is recorded. */
static int check_store_id(struct vmm *v)
{
	uint64_t mine[2], recorded[2];
	int r;

	store_id(v->store, mine);
	r = pagetable_store_id(v->pt, recorded);
	if (r < 0)
		return log_error_errno(r, "page table: %s", pagetable_last_error(v->pt));
	if (recorded[0] == 0 && recorded[1] == 0) {
		r = pagetable_set_store_id(v->pt, mine);
		return r < 0 ? r : pagetable_commit(v->pt);
	}
	if (recorded[0] != mine[0] || recorded[1] != mine[1]) {
		log_error("%s is not the store this node's page table was made with "
			  "(store id %016llx%016llx, the page table has "
			  "%016llx%016llx): point [store] path at the pair's store",
			  v->config->store_path, (unsigned long long)mine[0],
			  (unsigned long long)mine[1], (unsigned long long)recorded[0],
			  (unsigned long long)recorded[1]);
		return -EINVAL;
	}
	return 0;
}

int vmm_store_open(struct vmm *v)
{
	const struct ftvm_config *c = v->config;
	char err[512], dir[4096];
	uint64_t recorded[2];
	int r;

	/* The store's folder (shared by the pair) is made when missing. */
	snprintf(dir, sizeof(dir), "%s", c->store_path);
	if (mkdir(dirname(dir), 0750) < 0 && errno != EEXIST)
		return log_error_errno(-errno, "store folder %s", dir);
	/* A node whose page table has met a store must find that one. */
	r = pagetable_store_id(v->pt, recorded);
	if (r < 0)
		return log_error_errno(r, "page table: %s", pagetable_last_error(v->pt));
	r = store_open(c->store_path, c->store_size, c->page_size, c->id,
		       recorded[0] == 0 && recorded[1] == 0, &v->store, err, sizeof(err));
	if (r < 0) {
		log_error("%s", err); /* err says it all, errno included */
		return r;
	}
	r = check_store_id(v);
	if (r < 0)
		return r;
	r = store_queue_new(v->base, store_fd(v->store), STORE_THREADS, &v->store_queue);
	if (r < 0)
		return log_error_errno(r, "store queue for %s", c->store_path);
	vmm_store_access(v);
	v->destage_tail = &v->destage_waiting;
	v->destage_timer = evtimer_new(v->base, on_destage_timer, v);
	if (!v->destage_timer)
		return log_error_errno(-ENOMEM, "destage timer");
	log_info("store %s: partition of %llu bytes at %llu", c->store_path,
		 (unsigned long long)store_partition_length(v->store),
		 (unsigned long long)store_partition_start(v->store));
	return 0;
}

void vmm_store_access(struct vmm *v)
{
	struct store_range w[2];
	bool partner = vmm_table_count_adopted(v->table, vmm_node_id(v)) > 0;

	store_partition_range(v->store, false, &w[0].start, &w[0].length);
	store_partition_range(v->store, true, &w[1].start, &w[1].length);
	store_queue_set_writable(v->store_queue, w, partner ? 2 : 1);
	if (partner != v->partner_partition_writable)
		log_info("store: the partner's partition is %s here %s",
			 partner ? "writable" : "read-only",
			 partner ? "(this node owns allocations homed there)" : "again");
	v->partner_partition_writable = partner;
}

static uint64_t block_offset(const struct vmm *v, const struct vmm_alloc *a, uint64_t page)
{
	return store_block_offset(a->store_offset, v->config->page_size, a->pages, a->block_size,
				  page);
}

/* Completion of one posted read or write whose result only needs checking. */
static void on_sync_done(int result, void *arg)
{
	int *worst = arg;

	if (result < 0 && *worst == 0)
		*worst = result;
}

static void on_extent_cleared(int result, void *arg)
{
	if (result < 0)
		log_warning("zeroing the records of %s's new extent failed: %s", (char *)arg,
			    strerror(-result));
	free(arg);
}

static void on_extent_fenced(int result, void *arg)
{
	if (result < 0)
		log_warning("the fence behind a new extent's zeroes failed: %s", strerror(-result));
}

void vmm_store_extent_clear(struct vmm *v, const struct vmm_alloc *a)
{
	static const uint8_t zeros[65536];
	uint64_t at = a->store_offset, end = block_offset(v, a, 0);

	for (; at < end; at += sizeof(zeros)) {
		char *guid = strdup(a->guid);
		size_t len = end - at < sizeof(zeros) ? end - at : sizeof(zeros);

		if (!guid || store_queue_write(v->store_queue, zeros, len, at, on_extent_cleared,
					       guid) < 0) {
			log_warning("%s: cannot zero the records of its new extent", a->guid);
			free(guid);
			return;
		}
	}
	/* Nothing destaged later starts before the zeroes are written. */
	if (store_queue_fence(v->store_queue, on_extent_fenced, NULL) < 0)
		log_warning("%s: cannot fence the zeroing of its records", a->guid);
}

/* ---- page-in at start: the records alone ---- */

/* What the store holds of page i: a newer version is taken (the page table
 * lost a commit); the page table's contents (its CRC-32C, under this version
 * or an older one that held the same bytes) make the page clean. True when
 * the record leaves the page in doubt: the page table is ahead of the record
 * with other contents, and the block decides (settle_doubts()). */
static bool take_record(struct vmm_alloc *a, uint64_t i, const struct store_page_record *rec)
{
	struct vmm_page *p = &a->page[i];
	uint64_t version = le64toh(rec->version);
	uint32_t crc = le32toh(rec->crc32c);

	p->durable_version = version;
	if (version > p->version) {
		p->version = version;
		p->crc32c = crc;
		p->dirty = false;
		return false;
	}
	if (version && crc == p->crc32c) {
		p->dirty = false;
		return false;
	}
	return p->version != 0; /* 0: never written, zeroes */
}

/* The blocks of the pages in doubt, read together (one drain for up to
 * DOUBTS_AT_ONCE of them, at most DOUBTS_BYTES of blocks): one
 * holding the page table's CRC-32C is the page table's version, its record
 * left behind by a destage cut between the two (on_destage_timer), and the
 * page is clean; otherwise the page table is ahead of the store and the page
 * is stale: its contents are on the partner. */
#define DOUBTS_AT_ONCE 32
#define DOUBTS_BYTES ((size_t)1 << 20)

static void settle_doubts(struct vmm *v, struct vmm_alloc *a, const uint64_t *doubt, size_t n,
			  const struct store_page_record *rec)
{
	uint8_t *blocks = malloc(n * a->block_size);
	int result[DOUBTS_AT_ONCE] = { 0 };

	for (size_t k = 0; blocks && k < n; k++)
		if (store_queue_read(v->store_queue, blocks + k * a->block_size, a->block_size,
				     block_offset(v, a, doubt[k]), on_sync_done, &result[k]) < 0)
			result[k] = -EIO;
	store_queue_drain(v->store_queue);
	for (size_t k = 0; k < n; k++) {
		struct vmm_page *p = &a->page[doubt[k]];
		uint64_t version = le64toh(rec[doubt[k]].version);

		if (blocks && result[k] >= 0 &&
		    crc32c(0, blocks + k * a->block_size, a->block_size) == p->crc32c) {
			log_warning(
				"%s page %llu: the store's record says version %llu, its block "
				"holds the page table's %llu (crc32c 0x%08x): a destage was cut "
				"before its record; the page is clean at %llu",
				a->guid, (unsigned long long)doubt[k], (unsigned long long)version,
				(unsigned long long)p->version, p->crc32c,
				(unsigned long long)p->version);
			p->durable_version = p->version;
			p->dirty = false;
			continue;
		}
		p->stale = true;
		log_warning(
			"%s page %llu: the store has version %llu (crc32c 0x%08x), the page "
			"table %llu (crc32c 0x%08x): its contents are not served here until the "
			"partner resyncs them",
			a->guid, (unsigned long long)doubt[k], (unsigned long long)version,
			le32toh(rec[doubt[k]].crc32c), (unsigned long long)p->version, p->crc32c);
	}
	free(blocks);
}

struct store_page_record *vmm_store_read_records(struct vmm *v, const struct vmm_alloc *a)
{
	struct store_page_record *rec = calloc(a->pages, sizeof(*rec));
	int r = 0;

	if (!rec) {
		log_warning("%s: out of memory to read its records from the store", a->guid);
		return NULL;
	}
	if (store_queue_read(v->store_queue, rec, a->pages * sizeof(*rec),
			     store_record_offset(a->store_offset, 0), on_sync_done, &r) < 0)
		r = -EIO;
	store_queue_drain(v->store_queue);
	if (r < 0) {
		log_warning("%s: cannot read its records from the store: %s", a->guid,
			    strerror(-r));
		free(rec);
		return NULL;
	}
	return rec;
}

static void read_records(struct vmm *v, struct vmm_alloc *a)
{
	struct store_page_record *rec = vmm_store_read_records(v, a);
	size_t at_once = DOUBTS_BYTES / a->block_size, n = 0;
	uint64_t doubt[DOUBTS_AT_ONCE];

	at_once = at_once < 1 ? 1 : at_once > DOUBTS_AT_ONCE ? DOUBTS_AT_ONCE : at_once;
	for (uint64_t i = 0; rec && i < a->pages; i++) {
		if (!take_record(a, i, &rec[i]))
			continue;
		doubt[n++] = i;
		if (n == at_once) {
			settle_doubts(v, a, doubt, n, rec);
			n = 0;
		}
	}
	if (n)
		settle_doubts(v, a, doubt, n, rec);
	free(rec);
}

void vmm_store_page_in(struct vmm *v)
{
	size_t n = 0;
	struct vmm_alloc **all = vmm_table_sorted(v->table, &n);

	for (size_t i = 0; all && i < n; i++)
		read_records(v, all[i]);
	free(all);
}

/* ---- page-in on demand ---- */

/* A block on its way from the store into frames that are its own until it
 * completes: the page may be freed, or overwritten by a WritePage, meanwhile. */
struct vmm_pagein {
	struct vmm *vmm;
	char guid[128];
	uint64_t page;
	uint64_t frame;
	uint32_t block_size;
	bool from_flash; /* this node's flash holds it (vmm/flash.c); else the store */
};

static int post_page_in(struct vmm *v, const struct vmm_alloc *a, struct vmm_pagein *pi);

static void page_in_failed(struct vmm *v, struct vmm_pagein *pi, int result, uint32_t crc,
			   const struct vmm_page *p)
{
	char reason[256];

	if (result < 0)
		snprintf(reason, sizeof(reason), "reading it from the store failed: %s",
			 strerror(-result));
	else if (p->stale)
		snprintf(reason, sizeof(reason),
			 "version %llu is not in the store (its block has crc32c 0x%08x, the "
			 "page table 0x%08x) and this node lost its copy: it needs the "
			 "partner's resync",
			 (unsigned long long)p->version, crc, p->crc32c);
	else
		snprintf(reason, sizeof(reason),
			 "the store's block fails its checksum (crc32c 0x%08x, the page table "
			 "has 0x%08x): not served",
			 crc, p->crc32c);
	log_warning("%s page %llu: page-in: %s", pi->guid, (unsigned long long)pi->page, reason);
	vmm_frames_give(v, pi->frame, pi->block_size);
	vmm_page_in_failed(v, pi->guid, pi->page, reason);
}

static void on_page_in(int result, void *arg)
{
	struct vmm_pagein *pi = arg;
	struct vmm *v = pi->vmm;
	struct vmm_alloc *a = vmm_table_find(v->table, pi->guid);
	struct vmm_page *p = vmm_alloc_page(a, pi->page);
	uint32_t crc;

	if (!p || p->pagein != pi) {
		vmm_frames_give(v, pi->frame, pi->block_size); /* freed, or overwritten */
	} else {
		crc = crc32c(0, frame_pool_addr(v->pool, pi->frame), pi->block_size);
		if ((result < 0 || crc != p->crc32c) && pi->from_flash) {
			/* Flash lost it (a crash between a block and its
			 * record, or the device): the store may have it. */
			log_warning("%s page %llu: its block on flash %s: read from the store",
				    pi->guid, (unsigned long long)pi->page,
				    result < 0 ? strerror(-result) : "fails its checksum");
			p->flash_version = 0;
			pi->from_flash = false;
			if (post_page_in(v, a, pi) == 0)
				return;
		}
		p->pagein = NULL;
		if (result < 0 || crc != p->crc32c) {
			page_in_failed(v, pi, result, crc, p);
		} else {
			/* A stale page the owner destaged since is whole again;
			 * flash's copy of a dirty page is not in the store yet. */
			p->stale = false;
			if (!pi->from_flash)
				p->dirty = false;
			vmm_page_attach(v, p, pi->frame);
			v->counted.page_ins++;
			v->counted.flash_page_ins += pi->from_flash;
			log_debug("paged in %s page %llu (version %llu)", pi->guid,
				  (unsigned long long)pi->page, (unsigned long long)p->version);
		}
	}
	vmm_paging_kick(v);
	free(pi);
}

static int post_page_in(struct vmm *v, const struct vmm_alloc *a, struct vmm_pagein *pi)
{
	void *frame = frame_pool_addr(v->pool, pi->frame);

	if (pi->from_flash)
		return vmm_flash_post_read(v, a, pi->page, frame, on_page_in, pi);
	return store_queue_read(v->store_queue, frame, a->block_size, block_offset(v, a, pi->page),
				on_page_in, pi);
}

static int page_in(struct vmm *v, struct vmm_alloc *a, uint64_t page, uint64_t frame)
{
	struct vmm_pagein *pi = calloc(1, sizeof(*pi));
	int r;

	if (!pi)
		return -ENOMEM;
	pi->vmm = v;
	snprintf(pi->guid, sizeof(pi->guid), "%s", a->guid);
	pi->page = page;
	pi->frame = frame;
	pi->block_size = a->block_size;
	pi->from_flash = vmm_page_on_flash(&a->page[page]);
	r = post_page_in(v, a, pi);
	if (r < 0) {
		free(pi);
		return r;
	}
	a->page[page].pagein = pi;
	return 0;
}

int vmm_page_make_resident(struct vmm *v, struct vmm_alloc *a, uint64_t page, char *reason,
			   size_t len)
{
	struct vmm_page *p = &a->page[page];
	uint64_t frame;
	int r;

	if (p->resident)
		return 1;
	if (p->pagein || p->filling)
		return 0;
	if (vmm_frames_take(v, a, &frame, reason, len) < 0)
		return -ENOSPC;
	if (p->version == 0) {
		memset(frame_pool_addr(v->pool, frame), 0, a->block_size);
		vmm_page_attach(v, p, frame);
		return 1;
	}
	r = page_in(v, a, page, frame);
	if (r < 0) {
		vmm_frames_give(v, frame, a->block_size);
		snprintf(reason, len, "cannot read it from the %s: %s",
			 vmm_page_on_flash(p) ? "flash device" : "store", strerror(-r));
	}
	return r;
}

bool vmm_page_contents(struct vmm *v, const struct vmm_page_request *req, struct vmm_alloc *a)
{
	char reason[256];
	int r = vmm_page_make_resident(v, a, req->page, reason, sizeof(reason));

	if (r == 1) {
		vmm_replace_touch(v, &a->page[req->page]);
		return true;
	}
	if (r == 0)
		vmm_page_wait(v, req, VMM_WAIT_CONTENTS, NULL);
	else if (r == -ENOSPC)
		vmm_frames_short(v, req, reason);
	else
		vmm_reply_error(req->call, FTVM__PARTNER__STATUS__STATUS_INTERNAL,
				"%s page %llu: %s", a->guid, (unsigned long long)req->page, reason);
	return false;
}

/* ---- destage ---- */

/* A destage round: the pages queued DESTAGE_DELAY_MS ago or more (writes to a
 * hot page in the meantime cost nothing extra), their blocks and records
 * written, one barrier behind them all. */
struct destage_round {
	struct vmm *vmm;
	struct vmm_destage *pages;
	unsigned pending; /* posted operations not yet completed */
};

static void on_destaged_answer(const CommandComplete *cc, void *arg)
{
	if (cc->status != FTVM__PARTNER__STATUS__STATUS_OK)
		log_debug("partner did not take a Destaged: %s", cc->reason);
}

/* One batch of Destaged messages for the pages a round made clean. */
static void tell_partner(struct vmm *v, struct vmm_destage **clean, size_t n)
{
	Ftvm__Partner__Destaged *m = calloc(n, sizeof(*m));
	Envelope *env = calloc(n, sizeof(*env)), **envs = calloc(n, sizeof(*envs));
	void **args = calloc(n, sizeof(*args));

	if (m && env && envs && args) {
		for (size_t i = 0; i < n; i++) {
			ftvm__partner__destaged__init(&m[i]);
			m[i].guid = clean[i]->guid;
			m[i].page = clean[i]->page;
			m[i].version = clean[i]->version;
			m[i].crc32c = le32toh(clean[i]->record.crc32c);
			ftvm__partner__envelope__init(&env[i]);
			env[i].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_DESTAGED;
			env[i].destaged = &m[i];
			envs[i] = &env[i];
		}
		vmm_flush(v);
		/* Without the link the partner's table stays dirty; its page-in
		 * reads the store anyway, so nothing is lost. */
		vmm_partner_send(v, envs, n, NULL, 0, on_destaged_answer, args);
	}
	free(m);
	free(env);
	free(envs);
	free(args);
}

static void arm(struct vmm *v);

static void round_done(struct destage_round *rd)
{
	struct vmm *v = rd->vmm;
	struct vmm_destage **clean = NULL, *d, *next;
	size_t n = 0, n_pages = 0;

	for (d = rd->pages; d; d = d->next)
		n_pages++;
	clean = calloc(n_pages ? n_pages : 1, sizeof(*clean));
	for (d = rd->pages; d; d = d->next) {
		struct vmm_alloc *a = vmm_table_find(v->table, d->guid);
		struct vmm_page *p = vmm_alloc_page(a, d->page);
		struct pt_origin o = { .node = vmm_node_id(v), .own = true };

		if (!p)
			continue;
		p->destaging = false;
		vmm_replace_update(v, p);
		if (d->result == 0 && d->version > p->durable_version)
			p->durable_version = d->version;
		if (d->result < 0) {
			log_warning("destage of %s page %llu failed: %s", d->guid,
				    (unsigned long long)d->page, strerror(-d->result));
		} else if (p->version == d->version && p->dirty) {
			p->dirty = false;
			vmm_replace_update(v, p);
			o.lsn = pagetable_reserve_lsn(v->pt);
			vmm_persist_page(v, a, d->page, &o);
			if (clean)
				clean[n++] = d;
		}
		if (p->dirty) /* changed meanwhile, held back, or failed: again */
			vmm_destage_page(v, a, d->page);
	}
	if (n)
		tell_partner(v, clean, n);
	free(clean);
	for (d = rd->pages; d; d = next) {
		next = d->next;
		free(d);
	}
	v->destage_round = NULL;
	free(rd);
	arm(v);
	vmm_flush_check(v);
}

static void on_store_done(int result, void *arg)
{
	struct vmm_destage *d = arg;

	if (result < 0 && d->result == 0)
		d->result = result;
	if (--d->round->pending == 0)
		round_done(d->round);
}

/* A failed fence or barrier fails every page of the round not failed yet. */
static void round_failed(struct destage_round *rd, int result)
{
	for (struct vmm_destage *d = rd->pages; d; d = d->next)
		if (d->result == 0)
			d->result = result;
}

/* The barrier's completion: after every write of the round, stable. */
static void on_round_barrier(int result, void *arg)
{
	struct destage_round *rd = arg;

	if (result < 0)
		round_failed(rd, result);
	if (--rd->pending == 0)
		round_done(rd);
}

static void post_record(struct vmm *v, struct destage_round *rd, struct vmm_destage *d);

/* The round's second half: the records of the blocks written, then one
 * barrier behind the whole round (clean means stable). */
static void records_and_barrier(struct vmm *v, struct destage_round *rd)
{
	for (struct vmm_destage *d = rd->pages; d; d = d->next)
		post_record(v, rd, d);
	rd->pending++;
	if (store_queue_barrier(v->store_queue, on_round_barrier, rd) < 0)
		on_round_barrier(-EIO, rd);
}

/* The fence's completion: every block of the round is written (or failed).
 * Until now the fence kept the round's count above 0. */
static void on_blocks_written(int result, void *arg)
{
	struct destage_round *rd = arg;

	if (result < 0)
		round_failed(rd, result);
	rd->pending--;
	records_and_barrier(rd->vmm, rd);
}

/* A write-locked page waits for its unlock; a stale one has nothing here
 * (one that gave its frames back is on flash); an allocation handed to its
 * other node is that node's to write. */
static bool destageable(struct vmm *v, const struct vmm_alloc *a, const struct vmm_page *p)
{
	return (p->resident || vmm_page_on_flash(p)) && !vmm_page_write_locked(p) &&
	       vmm_is_owner(v, a);
}

/* The block to destage: the frames', or flash's when it gave them back. */
static int block_of(struct vmm *v, const struct vmm_alloc *a, uint64_t page, void *buf)
{
	if (!a->page[page].resident)
		return vmm_flash_read_block(v, a, page, buf);
	memcpy(buf, vmm_block_addr(v, a, page), a->block_size);
	return 0;
}

static void post(struct vmm *v, struct destage_round *rd, struct vmm_destage *d)
{
	struct vmm_alloc *a = vmm_table_find(v->table, d->guid);
	struct vmm_page *p = vmm_alloc_page(a, d->page);

	d->round = rd;
	if (!p || !p->dirty || !destageable(v, a, p))
		return; /* freed, clean already, or held back: nothing to write */
	if (block_of(v, a, d->page, d->block) < 0) {
		/* Its contents here are lost: the partner's are the page's. */
		p->flash_version = 0;
		p->stale = true;
		return;
	}
	d->version = p->version;
	d->record.version = htole64(p->version);
	d->record.crc32c = htole32(crc32c(0, d->block, a->block_size));
	d->posted = true;
	rd->pending++;
	if (store_queue_write(v->store_queue, d->block, a->block_size, block_offset(v, a, d->page),
			      on_store_done, d) < 0) {
		rd->pending--;
		d->result = -EIO;
	}
}

/* The record of a block written (post()), once the round's fence found
 * every block written; none for a block that failed. */
static void post_record(struct vmm *v, struct destage_round *rd, struct vmm_destage *d)
{
	struct vmm_alloc *a = vmm_table_find(v->table, d->guid);

	if (!d->posted || d->result < 0 || !a)
		return;
	rd->pending++;
	if (store_queue_write(v->store_queue, &d->record, sizeof(d->record),
			      store_record_offset(a->store_offset, d->page), on_store_done,
			      d) < 0) {
		rd->pending--;
		d->result = -EIO;
	}
}

static void on_destage_timer(evutil_socket_t fd, short what, void *arg)
{
	struct vmm *v = arg;
	struct destage_round *rd;

	if (v->destage_round || !v->destage_waiting)
		return;
	rd = calloc(1, sizeof(*rd));
	if (!rd) {
		arm(v);
		return;
	}
	rd->vmm = v;
	rd->pages = v->destage_waiting;
	v->destage_waiting = NULL;
	v->destage_tail = &v->destage_waiting;
	v->destage_round = rd;
	for (struct vmm_destage *d = rd->pages; d; d = d->next)
		post(v, rd, d);
	/* A record never names a block that is not written yet: the records
	 * start once every block is (a fence), so a node killed between a
	 * block and its record leaves the old record, and a start that finds
	 * the block newer than its record takes it (settle_doubts()). Written
	 * side by side, a record could also land before its block, naming a
	 * version the store did not hold: seen once as a page neither node
	 * would serve after both were killed (e2e-ack_levels, durable). */
	rd->pending++;
	if (store_queue_fence(v->store_queue, on_blocks_written, rd) < 0) {
		rd->pending--;
		round_failed(rd, -EIO);
		records_and_barrier(v, rd);
	}
}

/* A round DESTAGE_DELAY_MS from now; at once while a flush waits (vmm/flush.c),
 * and always at ack = durable, where each write's answer waits for its round:
 * the writes of the time a round takes share its barrier. */
static void arm(struct vmm *v)
{
	bool now = v->flushes || v->config->ack == CONFIG_ACK_DURABLE;
	struct timeval tv = { .tv_sec = 0, .tv_usec = now ? 0 : DESTAGE_DELAY_MS * 1000 };

	if (v->destage_waiting && !v->destage_round && !evtimer_pending(v->destage_timer, NULL))
		evtimer_add(v->destage_timer, &tv);
}

void vmm_destage_hurry(struct vmm *v)
{
	if (v->destage_waiting && !v->destage_round && evtimer_pending(v->destage_timer, NULL)) {
		evtimer_del(v->destage_timer);
		arm(v);
	}
}

void vmm_destage_page(struct vmm *v, struct vmm_alloc *a, uint64_t page)
{
	struct vmm_destage *d;

	if (!v->store_queue || a->page[page].destaging || !destageable(v, a, &a->page[page]))
		return;
	d = malloc(sizeof(*d) + a->block_size);
	if (!d) {
		log_warning("out of memory: %s page %llu stays dirty", a->guid,
			    (unsigned long long)page);
		return;
	}
	/* The block is copied in whole before it is read (post()): only the
	 * fields start zero. Zeroing it too cost 4.7k instructions a page. */
	memset(d, 0, sizeof(*d));
	snprintf(d->guid, sizeof(d->guid), "%s", a->guid);
	d->page = page;
	a->page[page].destaging = true;
	vmm_replace_update(v, &a->page[page]);
	*v->destage_tail = d;
	v->destage_tail = &d->next;
	arm(v);
}

uint64_t vmm_destage_depth(const struct vmm *v)
{
	uint64_t n = 0;

	for (const struct vmm_destage *d = v->destage_waiting; d; d = d->next)
		n++;
	if (v->destage_round)
		for (const struct vmm_destage *d = v->destage_round->pages; d; d = d->next)
			n++;
	return n;
}

void vmm_destaged(struct vmm *v, const char *guid, uint64_t page, uint64_t version, uint32_t crc)
{
	struct vmm_alloc *a = vmm_table_find(v->table, guid);
	struct pt_origin o = { .node = vmm_partner_id(v), .lsn = 0, .own = false };

	struct vmm_page *p = vmm_alloc_page(a, page);

	if (p && version > p->durable_version) {
		p->durable_version = version; /* the store has it, whatever our copy */
		if (v->flushes)
			v->flushes_recheck = true; /* once the batch is applied */
	}
	if (!p || p->version != version || !p->dirty)
		return; /* gone, or changed since: nothing to mark */
	/* Only a copy equal to what the store has is clean: a node that came back
	 * with an older block under this version must not believe it current. A
	 * stale page has no copy: the store has its contents now. */
	if (p->resident && vmm_block_crc(v, a, page) != crc) {
		/* Not judged: our client's write pointer is writing into the block
		 * (or its release is on its way); the page stays dirty, and its
		 * next version's destage settles it. */
		if (vmm_page_write_locked_by(p, vmm_node_id(v))) {
			log_debug("%s page %llu: the partner destaged version %llu, which our "
				  "client's write pointer is changing here: left dirty",
				  guid, (unsigned long long)page, (unsigned long long)version);
			return;
		}
		log_warning("%s page %llu: the partner destaged version %llu, our copy differs: "
			    "stale until the pair resyncs it",
			    guid, (unsigned long long)page, (unsigned long long)version);
		return;
	}
	if (!p->resident && p->crc32c != crc)
		return;
	p->dirty = false;
	p->stale = false;
	vmm_replace_update(v, p);
	vmm_persist_page(v, a, page, &o);
}

/* Dirty with its contents here, in its frames or on flash (a stale page
 * has none to write). */
static bool dirty_here(const struct vmm_page *p)
{
	return p->dirty && (p->resident || vmm_page_on_flash(p));
}

/* Written by the last destage: dirty here and not write-locked. A write
 * pointer still out (this node's client's, stopping mirrored; a solo node
 * released its clients' first) may have written the block half way: its
 * acknowledged contents are the partner's, which takes the page over. */
static bool destage_at_stop(const struct vmm_page *p)
{
	return dirty_here(p) && !vmm_page_write_locked(p);
}

/* A clean shutdown: the round in flight finishes, then every dirty page this
 * node owns is written through the queue behind one barrier, and marked clean
 * (committed by the caller's last flush, after the barrier). */
static void destage_all(struct vmm *v)
{
	struct pt_origin o = { .node = vmm_node_id(v), .own = true };
	struct store_page_record *rec = NULL;
	uint64_t *rec_at = NULL;     /* where each record goes */
	uint8_t **from_flash = NULL; /* the blocks of pages whose frames went */
	size_t n = 0, dirty = 0, locked = 0, k = 0;
	struct vmm_alloc **all;
	int r = 0;

	store_queue_drain(v->store_queue);
	all = vmm_table_sorted(v->table, &n);
	for (size_t i = 0; all && i < n; i++)
		for (uint64_t p = 0; vmm_is_owner(v, all[i]) && p < all[i]->pages; p++) {
			dirty += destage_at_stop(&all[i]->page[p]);
			locked += dirty_here(&all[i]->page[p]) &&
				  vmm_page_write_locked(&all[i]->page[p]);
		}
	if (locked)
		log_info("shutdown: %zu write-locked dirty pages left to the partner", locked);
	if (!dirty)
		goto out;
	rec = calloc(dirty, sizeof(*rec));
	rec_at = calloc(dirty, sizeof(*rec_at));
	from_flash = calloc(dirty, sizeof(*from_flash));
	if (!all || !rec || !rec_at || !from_flash) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct vmm_alloc *a = all[i];

		for (uint64_t p = 0; vmm_is_owner(v, a) && p < a->pages; p++) {
			const void *block = NULL;

			if (!destage_at_stop(&a->page[p]))
				continue;
			if (a->page[p].resident) {
				block = vmm_block_addr(v, a, p);
			} else if ((from_flash[k] = malloc(a->block_size)) &&
				   vmm_flash_read_block(v, a, p, from_flash[k]) == 0) {
				block = from_flash[k];
			}
			rec[k].version = htole64(a->page[p].version);
			rec[k].crc32c = htole32(block ? crc32c(0, block, a->block_size) : 0);
			rec_at[k] = store_record_offset(a->store_offset, p);
			if (!block ||
			    store_queue_write(v->store_queue, block, a->block_size,
					      block_offset(v, a, p), on_sync_done, &r) < 0)
				r = -EIO;
			k++;
		}
	}
	/* Every block written before any record, as a round does
	 * (on_destage_timer). */
	store_queue_drain(v->store_queue);
	for (size_t i = 0; r == 0 && i < k; i++)
		if (store_queue_write(v->store_queue, &rec[i], sizeof(rec[i]), rec_at[i],
				      on_sync_done, &r) < 0)
			r = -EIO;
	if (store_queue_barrier(v->store_queue, on_sync_done, &r) < 0)
		r = -EIO;
	store_queue_drain(v->store_queue);
	for (size_t i = 0; r == 0 && i < n; i++)
		for (uint64_t p = 0; vmm_is_owner(v, all[i]) && p < all[i]->pages; p++)
			if (destage_at_stop(&all[i]->page[p])) {
				all[i]->page[p].dirty = false;
				o.lsn = pagetable_reserve_lsn(v->pt);
				vmm_persist_page(v, all[i], p, &o);
			}
out:
	if (r < 0)
		log_error("destage at shutdown failed, %zu pages stay dirty: %s", dirty,
			  strerror(-r));
	else if (dirty)
		log_info("shutdown: %zu dirty pages destaged", dirty);
	for (size_t i = 0; from_flash && i < dirty; i++)
		free(from_flash[i]);
	free(from_flash);
	free(rec);
	free(rec_at);
	free(all);
}

unsigned vmm_store_index(const struct vmm *v)
{
	return store_partition_index(v->store);
}

void vmm_store_close(struct vmm *v)
{
	if (v->store_queue) {
		/* Only a node that serves writes the store: a fenced or a
		 * starting one may hold pages older than the survivor's. */
		if (vmm_mode(v) != VMM_MODE_OFFLINE && vmm_mode(v) != VMM_MODE_FENCED)
			destage_all(v);
		store_queue_free(v->store_queue);
		v->store_queue = NULL;
	}
	if (v->destage_timer)
		event_free(v->destage_timer);
	v->destage_timer = NULL;
	while (v->destage_waiting) {
		struct vmm_destage *d = v->destage_waiting;

		v->destage_waiting = d->next;
		free(d);
	}
	store_close(v->store);
	v->store = NULL;
	free(v->extents_reserved);
	v->extents_reserved = NULL;
}
