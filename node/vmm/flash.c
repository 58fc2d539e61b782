/* This node's flash from the memory manager's side (node/vmm/MEDIA.md):
 * where a flash-resting allocation's copy here is kept, between the frames
 * and the store.
 *
 * An allocation resting on flash has an extent in the flash's partition laid
 * out as a store extent (records, then blocks: storage/store.h). Every node
 * keeps its own copy there, owner or not: the flash is not shared.
 *
 * Writes go in rounds, one at a time, as the store's destage does: a page
 * changed here (resident, not write-locked) is queued; FLASH_DELAY_MS later a
 * round snapshots the blocks of everything queued and writes them, a fence,
 * then the record chunks holding their records (each a whole page of
 * records, rebuilt from what memory knows flash holds, so a write is always
 * aligned for direct I/O), then a barrier. Each page whose version has not
 * moved meanwhile is then on flash (flash_version), and may give its frames
 * back though it is dirty (vmm/replacement.c).
 *
 * A page-in of such a page reads flash first (vmm/destage.c); a block that
 * fails its CRC-32C there is read from the store instead. At start each
 * page takes from flash's records what flash holds of it, when that is its
 * version and CRC-32C exactly: a record ahead of or behind the page table
 * is not believed, so a crash between a block and its record loses nothing
 * but the flash copy. */
#include "vmm_state.h"

#include <event2/event.h>

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "log.h"
#include "store.h"
#include "store_queue.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM
#define FLASH_THREADS 2
/* A round takes what changed meanwhile: short, flash is the fast level. */
#define FLASH_DELAY_MS 2
/* The zeroes a new extent's records get, per write. */
#define ZEROS_BYTES 65536u

/* A page to write, and then what was written. */
struct flash_write {
	struct flash_write *next;
	char guid[128];
	uint64_t incarnation;
	uint64_t page;
	bool posted;
	uint64_t version;
	uint32_t crc;
	uint8_t *block; /* the snapshot, aligned for direct I/O */
};

/* A page of records (page_size bytes): those of pages first.. of one
 * allocation. */
struct flash_chunk {
	struct flash_chunk *next;
	const struct vmm_alloc *alloc;
	uint64_t first;
	struct store_page_record *rec;
};

struct flash_round {
	struct vmm *vmm;
	struct flash_write *pages;
	struct flash_chunk *chunks;
	unsigned pending;
	int result;
};

static void on_flash_timer(evutil_socket_t fd, short what, void *arg);

static uint32_t page_size(const struct vmm *v)
{
	return v->config->page_size;
}

/* Memory that direct I/O takes: aligned to the page (the probe at open
 * checked that this is enough). NULL on ENOMEM. */
static void *aligned(const struct vmm *v, size_t len, bool zero)
{
	void *p = NULL;

	if (posix_memalign(&p, page_size(v), len))
		return NULL;
	if (zero)
		memset(p, 0, len);
	return p;
}

static uint64_t records_per_chunk(const struct vmm *v)
{
	return page_size(v) / sizeof(struct store_page_record);
}

static uint64_t block_offset(const struct vmm *v, const struct vmm_alloc *a, uint64_t page)
{
	return store_block_offset(a->flash_offset, page_size(v), a->pages, a->block_size, page);
}

int vmm_flash_open(struct vmm *v)
{
	const struct ftvm_config *c = v->config;
	char err[512];
	uint64_t start, length;
	int r;

	v->flash_tail = &v->flash_waiting;
	if (!c->flash_path)
		return 0;
	r = store_open_flash(c->flash_path, c->flash_size, c->page_size, c->id, &v->flash, err,
			     sizeof(err));
	if (r < 0) {
		log_error("%s", err);
		return r;
	}
	r = store_queue_new(v->base, store_fd(v->flash), FLASH_THREADS, &v->flash_queue);
	if (r < 0)
		return log_error_errno(r, "flash queue for %s", c->flash_path);
	store_partition_range(v->flash, false, &start, &length);
	store_queue_set_writable(v->flash_queue, &(struct store_range){ start, length }, 1);
	v->flash_timer = evtimer_new(v->base, on_flash_timer, v);
	if (!v->flash_timer)
		return log_error_errno(-ENOMEM, "flash timer");
	log_info("flash %s: partition of %llu bytes at %llu, %s", c->flash_path,
		 (unsigned long long)length, (unsigned long long)start,
		 store_direct(v->flash) ? "direct I/O" : "through the page cache");
	return 0;
}

/* ---- extents ---- */

static void on_records_zeroed(int result, void *arg)
{
	if (result < 0)
		log_warning("zeroing the records of %s's new flash extent failed: %s", (char *)arg,
			    strerror(-result));
	free(arg);
}

static void on_zeroes_fenced(int result, void *arg)
{
	(void)arg;
	if (result < 0)
		log_warning("the fence behind a new flash extent's zeroes failed: %s",
			    strerror(-result));
}

/* The new extent may hold an older allocation's records: zeroes first,
 * fenced, before anything of a's is written there. */
static void clear_records(struct vmm *v, const struct vmm_alloc *a)
{
	static uint8_t *zeros;
	uint64_t at = a->flash_offset, end = block_offset(v, a, 0);

	if (!zeros)
		zeros = aligned(v, ZEROS_BYTES > page_size(v) ? ZEROS_BYTES : page_size(v), true);
	for (; zeros && at < end; at += ZEROS_BYTES) {
		char *guid = strdup(a->guid);
		size_t len = end - at < ZEROS_BYTES ? end - at : ZEROS_BYTES;

		if (!guid || store_queue_write(v->flash_queue, zeros, len, at, on_records_zeroed,
					       guid) < 0) {
			free(guid);
			break;
		}
	}
	if (at < end)
		log_warning("%s: cannot zero the records of its new flash extent", a->guid);
	if (store_queue_fence(v->flash_queue, on_zeroes_fenced, NULL) < 0)
		log_warning("%s: cannot fence the zeroing of its flash records", a->guid);
}

int vmm_flash_place(struct vmm *v, struct vmm_alloc *a)
{
	int r;

	if (!v->flash)
		return -ENODEV;
	r = vmm_extent_find(v, vmm_alloc_is_volume(a) ? VMM_DEVICE_FLASH_CACHE : VMM_DEVICE_FLASH,
			    a, &a->flash_offset);
	if (r < 0)
		return r;
	a->media = VMM_MEDIA_FLASH;
	clear_records(v, a);
	log_debug("allocation %s: flash extent at %llu", a->guid,
		  (unsigned long long)a->flash_offset);
	return 0;
}

/* ---- across a resync ---- */

/* What flash holds of a copy a resync dropped, kept until the resync ends:
 * the copy that replaces it (same guid and shape) takes its extent back,
 * with the records there, instead of starting empty. */
struct flash_kept {
	struct flash_kept *next;
	char *guid;
	uint64_t offset, pages;
	uint32_t block_size;
	uint64_t *version;
	uint32_t *crc;
};

static void kept_free(struct flash_kept *k)
{
	free(k->guid);
	free(k->version);
	free(k->crc);
	free(k);
}

void vmm_flash_keep(struct vmm *v, const struct vmm_alloc *a)
{
	struct flash_kept *k;

	if (a->media != VMM_MEDIA_FLASH || !v->flash)
		return;
	k = calloc(1, sizeof(*k));
	if (k) {
		k->guid = strdup(a->guid);
		k->version = calloc(a->pages, sizeof(*k->version));
		k->crc = calloc(a->pages, sizeof(*k->crc));
	}
	if (!k || !k->guid || !k->version || !k->crc) {
		if (k)
			kept_free(k);
		return; /* its replacement starts with empty records */
	}
	k->offset = a->flash_offset;
	k->pages = a->pages;
	k->block_size = a->block_size;
	for (uint64_t i = 0; i < a->pages; i++) {
		k->version[i] = a->page[i].flash_version;
		k->crc[i] = a->page[i].flash_crc;
	}
	k->next = v->flash_kept;
	v->flash_kept = k;
}

bool vmm_flash_recall(struct vmm *v, struct vmm_alloc *a)
{
	struct flash_kept **p = &v->flash_kept, *k;

	while (*p && strcmp((*p)->guid, a->guid) != 0)
		p = &(*p)->next;
	k = *p;
	if (!k || k->pages != a->pages || k->block_size != a->block_size)
		return false;
	*p = k->next;
	a->media = VMM_MEDIA_FLASH;
	a->flash_offset = k->offset;
	for (uint64_t i = 0; i < a->pages; i++) {
		a->page[i].flash_version = k->version[i];
		a->page[i].flash_crc = k->crc[i];
	}
	kept_free(k);
	log_debug("allocation %s keeps its flash extent at %llu through the resync", a->guid,
		  (unsigned long long)a->flash_offset);
	return true;
}

void vmm_flash_forget_kept(struct vmm *v)
{
	while (v->flash_kept) {
		struct flash_kept *k = v->flash_kept;

		v->flash_kept = k->next;
		kept_free(k);
	}
}

size_t vmm_flash_kept_extents(const struct vmm *v, struct store_range *ret)
{
	size_t n = 0;

	for (const struct flash_kept *k = v->flash_kept; k; k = k->next, n++)
		if (ret)
			ret[n] = (struct store_range){
				k->offset, store_extent_size(page_size(v), k->pages, k->block_size)
			};
	return n;
}

/* ---- at start ---- */

/* What flash's records say of a's pages, taken where they hold exactly the
 * page table's version: those pages are on flash (a stale one, its newer
 * contents lost with the store, has them there). */
static void take_records(struct vmm *v, struct vmm_alloc *a)
{
	uint64_t len = block_offset(v, a, 0) - a->flash_offset, on = 0;
	struct store_page_record *rec = aligned(v, len, false);
	ssize_t n = rec ? pread(store_fd(v->flash), rec, len, (off_t)a->flash_offset) : -1;

	if (n != (ssize_t)len) {
		log_warning("%s: cannot read its records on flash (%s): its pages are read "
			    "from the store",
			    a->guid, n < 0 ? strerror(errno) : "short read");
		free(rec);
		return;
	}
	for (uint64_t i = 0; i < a->pages; i++) {
		struct vmm_page *p = &a->page[i];

		if (!p->version || le64toh(rec[i].version) != p->version ||
		    le32toh(rec[i].crc32c) != p->crc32c)
			continue;
		p->flash_version = p->version;
		p->flash_crc = p->crc32c;
		p->stale = false;
		on++;
	}
	log_debug("%s: %llu of %llu pages on flash", a->guid, (unsigned long long)on,
		  (unsigned long long)a->pages);
	free(rec);
}

void vmm_flash_page_in(struct vmm *v)
{
	size_t n = 0;
	struct vmm_alloc **all = vmm_table_sorted(v->table, &n);

	for (size_t i = 0; all && i < n; i++) {
		if (all[i]->media != VMM_MEDIA_FLASH)
			continue;
		if (v->flash)
			take_records(v, all[i]);
		else
			/* [flash] went from the config: the store has the pages. */
			all[i]->media = VMM_MEDIA_STORE;
	}
	free(all);
}

/* ---- reads ---- */

int vmm_flash_post_read(struct vmm *v, const struct vmm_alloc *a, uint64_t page, void *buf,
			void (*done)(int result, void *arg), void *arg)
{
	return store_queue_read(v->flash_queue, buf, a->block_size, block_offset(v, a, page), done,
				arg);
}

int vmm_flash_read_block(struct vmm *v, const struct vmm_alloc *a, uint64_t page, void *buf)
{
	uint8_t *bounce = aligned(v, a->block_size, false);
	ssize_t n;
	int r = 0;

	if (!bounce)
		return -ENOMEM;
	n = pread(store_fd(v->flash), bounce, a->block_size, (off_t)block_offset(v, a, page));
	if (n != (ssize_t)a->block_size)
		r = n < 0 ? -errno : -EIO;
	else if (crc32c(0, bounce, a->block_size) != a->page[page].crc32c)
		r = -EBADMSG;
	if (r < 0)
		log_warning("%s page %llu: cannot read its block on flash: %s", a->guid,
			    (unsigned long long)page,
			    r == -EBADMSG ? "it fails its checksum" : strerror(-r));
	else
		memcpy(buf, bounce, a->block_size);
	free(bounce);
	return r;
}

/* ---- writes ---- */

static void arm(struct vmm *v)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = FLASH_DELAY_MS * 1000 };

	if (v->flash_waiting && !v->flash_round && !evtimer_pending(v->flash_timer, NULL))
		evtimer_add(v->flash_timer, &tv);
}

void vmm_flash_page(struct vmm *v, struct vmm_alloc *a, uint64_t page)
{
	struct vmm_page *p = &a->page[page];
	struct flash_write *w;

	/* Version 0 is zeroes: nothing to keep. */
	if (!v->flash_queue || a->media != VMM_MEDIA_FLASH || p->flashing || !p->resident ||
	    !p->version || vmm_page_write_locked(p) || vmm_page_on_flash(p))
		return;
	w = calloc(1, sizeof(*w));
	if (!w) {
		log_warning("out of memory: %s page %llu is not written to flash", a->guid,
			    (unsigned long long)page);
		return;
	}
	snprintf(w->guid, sizeof(w->guid), "%s", a->guid);
	w->incarnation = a->incarnation;
	w->page = page;
	p->flashing = true;
	vmm_replace_update(v, p);
	*v->flash_tail = w;
	v->flash_tail = &w->next;
	arm(v);
}

static struct vmm_page *page_of(struct vmm *v, const struct flash_write *w,
				struct vmm_alloc **ret_alloc)
{
	*ret_alloc = vmm_table_find_incarnation(v->table, w->guid, w->incarnation);
	return vmm_alloc_page(*ret_alloc, w->page);
}

static void round_free(struct flash_round *rd)
{
	while (rd->pages) {
		struct flash_write *w = rd->pages;

		rd->pages = w->next;
		free(w->block);
		free(w);
	}
	while (rd->chunks) {
		struct flash_chunk *c = rd->chunks;

		rd->chunks = c->next;
		free(c->rec);
		free(c);
	}
	free(rd);
}

static void round_done(struct flash_round *rd)
{
	struct vmm *v = rd->vmm;

	if (rd->result < 0)
		log_warning("a flash write round failed: %s (its pages stay in memory)",
			    strerror(-rd->result));
	for (struct flash_write *w = rd->pages; w; w = w->next) {
		struct vmm_alloc *a;
		struct vmm_page *p = page_of(v, w, &a);

		if (!p)
			continue; /* freed meanwhile */
		p->flashing = false;
		if (rd->result == 0 && w->posted && p->version == w->version &&
		    p->crc32c == w->crc) {
			p->flash_version = w->version;
			p->flash_crc = w->crc;
			v->counted.flash_writes++;
		}
		vmm_replace_update(v, p);
		if (rd->result == 0 && p->dirty)
			vmm_flash_page(v, a, w->page); /* changed meanwhile: again */
	}
	v->flash_round = NULL;
	round_free(rd);
	arm(v);
	vmm_paging_kick(v); /* frames may be free to take now */
}

static void on_write_done(int result, void *arg)
{
	struct flash_round *rd = arg;

	if (result < 0 && rd->result == 0)
		rd->result = result;
	if (--rd->pending == 0)
		round_done(rd);
}

static void post(struct flash_round *rd, void *buf, size_t len, uint64_t offset)
{
	rd->pending++;
	if (store_queue_write(rd->vmm->flash_queue, buf, len, offset, on_write_done, rd) < 0) {
		rd->pending--;
		rd->result = -EIO;
	}
}

/* Snapshots w's block and posts its write; false when there is nothing to
 * write (freed, not resident, write-locked, or on flash already). */
static bool post_block(struct flash_round *rd, struct flash_write *w)
{
	struct vmm *v = rd->vmm;
	struct vmm_alloc *a;
	struct vmm_page *p = page_of(v, w, &a);

	if (!p || !p->resident || vmm_page_write_locked(p) || vmm_page_on_flash(p))
		return false;
	w->block = aligned(v, a->block_size, false);
	if (!w->block)
		return false;
	memcpy(w->block, vmm_block_addr(v, a, w->page), a->block_size);
	w->version = p->version;
	w->crc = crc32c(0, w->block, a->block_size);
	post(rd, w->block, a->block_size, block_offset(v, a, w->page));
	return true;
}

/* The chunk of records holding w's page, made (from what flash holds of
 * each page in it) the first time. */
static struct flash_chunk *chunk_of(struct flash_round *rd, const struct vmm_alloc *a,
				    uint64_t page)
{
	struct vmm *v = rd->vmm;
	uint64_t per = records_per_chunk(v), first = page / per * per;
	struct flash_chunk *c;

	for (c = rd->chunks; c; c = c->next)
		if (c->alloc == a && c->first == first)
			return c;
	c = calloc(1, sizeof(*c));
	if (c)
		c->rec = aligned(v, page_size(v), true);
	if (!c || !c->rec) {
		free(c);
		return NULL;
	}
	c->alloc = a;
	c->first = first;
	for (uint64_t i = first; i < first + per && i < a->pages; i++) {
		c->rec[i - first].version = htole64(a->page[i].flash_version);
		c->rec[i - first].crc32c = htole32(a->page[i].flash_crc);
	}
	c->next = rd->chunks;
	rd->chunks = c;
	return c;
}

static void on_flash_timer(evutil_socket_t fd, short what, void *arg)
{
	struct vmm *v = arg;
	struct flash_round *rd;

	(void)fd;
	(void)what;
	if (v->flash_round || !v->flash_waiting)
		return;
	rd = calloc(1, sizeof(*rd));
	if (!rd) {
		arm(v);
		return;
	}
	rd->vmm = v;
	rd->pages = v->flash_waiting;
	v->flash_waiting = NULL;
	v->flash_tail = &v->flash_waiting;
	v->flash_round = rd;
	rd->pending++; /* the round's own, until everything is posted */
	for (struct flash_write *w = rd->pages; w; w = w->next)
		w->posted = post_block(rd, w);
	/* A record never names a block not yet written. */
	rd->pending++;
	if (store_queue_fence(v->flash_queue, on_write_done, rd) < 0) {
		rd->pending--;
		rd->result = -EIO;
	}
	for (struct flash_write *w = rd->pages; w; w = w->next) {
		struct vmm_alloc *a;
		struct flash_chunk *c;

		if (!w->posted || !page_of(v, w, &a))
			continue;
		c = chunk_of(rd, a, w->page);
		if (!c) {
			rd->result = -ENOMEM;
			continue;
		}
		c->rec[w->page - c->first].version = htole64(w->version);
		c->rec[w->page - c->first].crc32c = htole32(w->crc);
	}
	for (struct flash_chunk *c = rd->chunks; c; c = c->next)
		post(rd, c->rec, page_size(v),
		     store_record_offset(c->alloc->flash_offset, c->first));
	rd->pending++;
	if (store_queue_barrier(v->flash_queue, on_write_done, rd) < 0) {
		rd->pending--;
		rd->result = -EIO;
	}
	on_write_done(0, rd); /* the round's own */
}

uint64_t vmm_flash_depth(const struct vmm *v)
{
	uint64_t n = 0;

	for (const struct flash_write *w = v->flash_waiting; w; w = w->next)
		n++;
	if (v->flash_round)
		for (const struct flash_write *w = v->flash_round->pages; w; w = w->next)
			n++;
	return n;
}

void vmm_flash_close(struct vmm *v)
{
	/* The round in flight completes (its pages may be freed already). */
	store_queue_free(v->flash_queue);
	v->flash_queue = NULL;
	if (v->flash_timer)
		event_free(v->flash_timer);
	v->flash_timer = NULL;
	while (v->flash_waiting) {
		struct flash_write *w = v->flash_waiting;

		v->flash_waiting = w->next;
		free(w);
	}
	vmm_flash_forget_kept(v);
	store_close(v->flash);
	v->flash = NULL;
}
