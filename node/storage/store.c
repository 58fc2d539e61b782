#define _GNU_SOURCE /* fallocate, O_DIRECT */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "store_layout.h"

#define LOG_SUBSYSTEM "store"

struct store {
	int fd;	   /* the header's, and the locks' */
	int io_fd; /* the queue's: fd, or a flash device's O_DIRECT one */
	bool direct;
	unsigned index; /* 0 or 1: its partition is the first or the second writable */
	uint64_t start, length;
	uint64_t partner_start, partner_length; /* the other writable partition */
	uint64_t id[2];
};

/* A new store file gets all its blocks now: a sparse one would find its
 * file system full only at destage, with acknowledged pages held in memory
 * alone (and lost at a stop, were the partner gone). Where the file system
 * cannot reserve (no fallocate), it is sparse, as it was, with a warning.
 * Refused, the file is left empty, as found. */
static int reserve(int fd, const char *path, uint64_t size, char *err, size_t err_len)
{
	int r;

	if (fallocate(fd, 0, 0, (off_t)size) == 0)
		return 0;
	if (errno == EOPNOTSUPP) {
		log_warning("%s: the file system cannot reserve the store's %llu bytes: the "
			    "file is sparse, and destage may find the disk full",
			    path, (unsigned long long)size);
		if (ftruncate(fd, (off_t)size) == 0)
			return 0;
	}
	r = -errno;
	snprintf(err, err_len, "%s: cannot reserve %llu bytes for the store: %s", path,
		 (unsigned long long)size, strerror(errno));
	if (ftruncate(fd, 0) < 0) {
		size_t len = strlen(err);

		snprintf(err + len, err_len - len, " (and cannot empty it again: %s)",
			 strerror(errno));
	}
	return r;
}

/* Two one-byte locks on the store file (open file description locks, so
 * each open has its own): byte 0, taken for writing, lets one process at a
 * time set up or rewrite the header; byte 1 is held for reading by every
 * node that has the store open, so `ftvmctl store init`, which needs it for
 * writing, cannot remake a store under a running node on this host. */
#define LOCK_SETUP 0
#define LOCK_IN_USE 1

static int lock_byte(int fd, short type, off_t at, bool wait)
{
	struct flock l = { .l_type = type, .l_whence = SEEK_SET, .l_start = at, .l_len = 1 };

	return fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &l) < 0 ? -errno : 0;
}

/* The header sector at offset 0 of fd, decoded and checked. */
static int read_layout(int fd, const char *path, struct store_layout *ret, char *err,
		       size_t err_len)
{
	uint8_t buf[STORE_HEADER_SECTOR];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);

	if (n < (ssize_t)STORE_HEADER_V1_SIZE) {
		snprintf(err, err_len, "%s: cannot read the store header%s%s", path,
			 n < 0 ? ": " : " (too short)", n < 0 ? strerror(errno) : "");
		return n < 0 ? -errno : -EBADMSG;
	}
	return store_layout_decode(buf, (size_t)n, path, ret, err, err_len);
}

static int write_layout(int fd, const char *path, const struct store_layout *l, char *err,
			size_t err_len)
{
	uint8_t buf[STORE_HEADER_SECTOR];

	store_layout_encode(l, buf);
	if (pwrite(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf) || fdatasync(fd) < 0) {
		snprintf(err, err_len, "%s: cannot write the store header: %s", path,
			 strerror(errno));
		return -errno;
	}
	return 0;
}

/* What the node needs of l: a device of the kind it wants, for its page
 * size, and its partition. */
static int take_partition(struct store_layout *l, const char *path, enum store_kind kind,
			  uint32_t page_size, const char *node_id, struct store *s,
			  bool *ret_claimed, char *err, size_t err_len)
{
	int mine;

	if (l->kind != kind) {
		snprintf(err, err_len, "%s is a %s device, not a %s", path,
			 store_kind_name(l->kind),
			 kind == STORE_KIND_STORE ? "store" : "flash device");
		return -EINVAL;
	}
	if (l->page_size != page_size) {
		snprintf(err, err_len, "%s: %s made for page_size %u, this node has %u", path,
			 store_kind_name(kind), l->page_size, page_size);
		return -EINVAL;
	}
	mine = store_layout_claim(l, path, node_id, ret_claimed, err, err_len);
	if (mine < 0)
		return mine;
	s->index = store_layout_partner(l, (unsigned)mine) < (unsigned)mine;
	s->start = l->part[mine].start;
	s->length = l->part[mine].length;
	s->partner_start = l->part[store_layout_partner(l, (unsigned)mine)].start;
	s->partner_length = l->part[store_layout_partner(l, (unsigned)mine)].length;
	memcpy(s->id, l->id, sizeof(s->id));
	return 0;
}

static int open_device(const char *path, enum store_kind kind, uint64_t size, uint32_t page_size,
		       const char *node_id, bool may_create, struct store **ret, char *err,
		       size_t err_len)
{
	struct store_layout l;
	struct store *s = calloc(1, sizeof(*s));
	bool changed = false;
	struct stat st;
	int fd, r;

	if (!s) {
		snprintf(err, err_len, "out of memory");
		return -ENOMEM;
	}
	fd = open(path, O_RDWR | O_CLOEXEC | (may_create ? O_CREAT : 0), 0640);
	if (fd < 0) {
		r = -errno;
		snprintf(err, err_len, "%s: cannot open the %s: %s", path,
			 kind == STORE_KIND_STORE ? "store" : "flash device", strerror(errno));
		free(s);
		return r;
	}
	/* Both nodes may open a new store at once: one initialises it. */
	r = lock_byte(fd, F_WRLCK, LOCK_SETUP, true);
	if (r == 0)
		r = lock_byte(fd, F_RDLCK, LOCK_IN_USE, true);
	if (r == 0 && fstat(fd, &st) < 0)
		r = -errno;
	if (r < 0) {
		snprintf(err, err_len, "%s: %s", path, strerror(-r));
		goto fail;
	}
	if (st.st_size == 0 && S_ISREG(st.st_mode) && !may_create) {
		r = -ENOENT;
		snprintf(err, err_len, "%s is empty, and this node's data is in an existing store",
			 path);
		goto fail;
	}
	if (st.st_size == 0 && S_ISREG(st.st_mode)) {
		/* A first start without `ftvmctl store init`: the default layout. */
		store_layout_default(&l, kind, size, page_size);
		r = reserve(fd, path, size, err, err_len);
		if (r < 0)
			goto fail;
		changed = true;
	} else {
		r = read_layout(fd, path, &l, err, err_len);
		if (r < 0)
			goto fail;
	}
	r = take_partition(&l, path, kind, page_size, node_id, s, &changed, err, err_len);
	if (r == 0 && changed)
		r = write_layout(fd, path, &l, err, err_len);
	if (r < 0)
		goto fail;
	lock_byte(fd, F_UNLCK, LOCK_SETUP, false); /* in use stays held till close */
	s->fd = fd;
	s->io_fd = fd;
	*ret = s;
	return 0;
fail:
	close(fd);
	free(s);
	return r;
}

int store_open(const char *path, uint64_t size, uint32_t page_size, const char *node_id,
	       bool may_create, struct store **ret, char *err, size_t err_len)
{
	return open_device(path, STORE_KIND_STORE, size, page_size, node_id, may_create, ret, err,
			   err_len);
}

/* Whether direct I/O on fd takes what the queue will ask of it: runs of
 * whole pages at page-aligned offsets into page-aligned memory (a frame's).
 * The probe's buffer and offset are aligned to the page and no more, so a
 * device that needs more refuses it. */
static bool direct_fits(int fd, uint64_t start, uint32_t page_size)
{
	uint8_t *buf;
	bool ok;

	if (posix_memalign((void **)&buf, 2 * (size_t)page_size, 2 * (size_t)page_size))
		return false;
	ok = pread(fd, buf + page_size, page_size, (off_t)(start + page_size)) >= 0;
	free(buf);
	return ok;
}

int store_open_flash(const char *path, uint64_t size, uint32_t page_size, const char *node_id,
		     struct store **ret, char *err, size_t err_len)
{
	struct store *s;
	int r = open_device(path, STORE_KIND_FLASH, size, page_size, node_id, true, &s, err,
			    err_len);
	int fd;

	if (r < 0)
		return r;
	/* The page cache would hold a second copy of what the frames hold. */
	fd = open(path, O_RDWR | O_CLOEXEC | O_DIRECT);
	if (fd >= 0 && direct_fits(fd, s->start, page_size)) {
		s->io_fd = fd;
		s->direct = true;
	} else if (fd >= 0) {
		log_info("%s: direct I/O does not take runs of %u-byte pages here: the page "
			 "cache is used",
			 path, page_size);
		close(fd);
	} else {
		log_info("%s: the file system has no direct I/O (%s): the page cache is used", path,
			 strerror(errno));
	}
	*ret = s;
	return 0;
}

bool store_direct(const struct store *s)
{
	return s->direct;
}

int store_read_layout(const char *path, struct store_layout *ret, char *err, size_t err_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;

	if (fd < 0) {
		snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
		return -errno;
	}
	r = read_layout(fd, path, ret, err, err_len);
	close(fd);
	return r;
}

/* Whether fd already holds a header (of any version). */
static bool initialised(int fd)
{
	uint8_t buf[STORE_MAGIC_SIZE];

	return pread(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) &&
	       store_layout_is_header(buf, sizeof(buf));
}

int store_init(const char *path, const struct store_layout *l, bool force, char *err,
	       size_t err_len)
{
	static const uint8_t zeros[STORE_HEADER_SECTOR];
	struct stat st;
	int fd, r;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0) {
		snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
		return -errno;
	}
	r = lock_byte(fd, F_WRLCK, LOCK_SETUP, true);
	if (r == 0 && initialised(fd) && !force) {
		r = -EEXIST;
		snprintf(err, err_len,
			 "%s is initialised already: --force makes it new, and loses what it "
			 "holds",
			 path);
		goto out;
	}
	if (r == 0)
		r = lock_byte(fd, F_WRLCK, LOCK_IN_USE, false);
	if (r == 0 && fstat(fd, &st) < 0)
		r = -errno;
	if (r < 0) {
		snprintf(err, err_len, "%s: %s", path,
			 r == -EAGAIN ? "in use: a node on this host has it open" : strerror(-r));
		goto out;
	}
	if (S_ISREG(st.st_mode) && (uint64_t)st.st_size < l->size) {
		r = reserve(fd, path, l->size, err, err_len);
		if (r < 0)
			goto out;
	}
	/* The fence slots and mailboxes start empty (storage/sbd.h). */
	for (uint64_t at = STORE_HEADER_SECTOR; at < STORE_HEADER_SPACE; at += sizeof(zeros))
		if (pwrite(fd, zeros, sizeof(zeros), (off_t)at) != (ssize_t)sizeof(zeros)) {
			r = -errno;
			snprintf(err, err_len, "%s: cannot clear the fence slots: %s", path,
				 strerror(errno));
			goto out;
		}
	r = write_layout(fd, path, l, err, err_len);
out:
	close(fd);
	return r;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	if (s->io_fd != s->fd)
		close(s->io_fd);
	close(s->fd);
	free(s);
}

int store_fd(const struct store *s)
{
	return s->io_fd;
}

void store_id(const struct store *s, uint64_t ret_id[2])
{
	ret_id[0] = s->id[0];
	ret_id[1] = s->id[1];
}

uint64_t store_partition_start(const struct store *s)
{
	return s->start;
}

uint64_t store_partition_length(const struct store *s)
{
	return s->length;
}

bool store_extent_fits(const struct store *s, bool partner, uint64_t offset, uint64_t length)
{
	uint64_t start = partner ? s->partner_start : s->start;
	uint64_t size = partner ? s->partner_length : s->length;

	return offset >= start && length <= size && offset - start <= size - length;
}

static uint64_t records_size(uint32_t page_size, uint64_t pages)
{
	uint64_t bytes = pages * sizeof(struct store_page_record);

	return (bytes + page_size - 1) / page_size * page_size;
}

uint64_t store_extent_size(uint32_t page_size, uint64_t pages, uint32_t block_size)
{
	return records_size(page_size, pages) + pages * block_size;
}

uint64_t store_record_offset(uint64_t extent, uint64_t page)
{
	return extent + page * sizeof(struct store_page_record);
}

uint64_t store_block_offset(uint64_t extent, uint32_t page_size, uint64_t pages,
			    uint32_t block_size, uint64_t page)
{
	return extent + records_size(page_size, pages) + page * block_size;
}

void store_partition_range(const struct store *s, bool partner, uint64_t *ret_start,
			   uint64_t *ret_length)
{
	*ret_start = partner ? s->partner_start : s->start;
	*ret_length = partner ? s->partner_length : s->length;
}

unsigned store_partition_index(const struct store *s)
{
	return s->index;
}

uint64_t store_slot_offset(unsigned index)
{
	return STORE_SLOT_AREA + (uint64_t)index * STORE_SECTOR;
}

uint64_t store_mailbox_offset(unsigned index)
{
	return STORE_SLOT_AREA + (2 + (uint64_t)index) * STORE_SECTOR;
}
