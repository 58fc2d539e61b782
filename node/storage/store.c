#define _GNU_SOURCE /* fallocate */
#include "store.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "log.h"

#define LOG_SUBSYSTEM "store"

#define STORE_MAGIC "FTVMSTOR"
#define STORE_VERSION 1u

/* On disk, little-endian, at offset 0. */
struct store_partition_disk {
	char node[CONFIG_ID_MAX + 1]; /* "" = free */
	uint8_t pad[7];
	uint64_t start;
	uint64_t length;
};

struct store_header_disk {
	char magic[8];
	uint32_t version;
	uint32_t page_size;
	uint8_t store_id[16];
	uint64_t size;
	struct store_partition_disk partition[2];
	uint32_t crc32c; /* of everything before it */
};

_Static_assert(sizeof(struct store_header_disk) == STORE_HEADER_SIZE,
	       "storage/store.h has the size");
_Static_assert(offsetof(struct store_header_disk, crc32c) == STORE_HEADER_CRC_OFFSET,
	       "storage/store.h has the checksum's place");

struct store {
	int fd;
	unsigned index; /* of this node's partition in the header */
	uint64_t start, length;
	uint64_t partner_start, partner_length; /* the other partition */
	uint64_t id[2];
};

static uint32_t header_crc(const struct store_header_disk *h)
{
	return crc32c(0, h, offsetof(struct store_header_disk, crc32c));
}

static void header_init(struct store_header_disk *h, uint64_t size, uint32_t page_size)
{
	uint64_t half = (size - STORE_HEADER_SPACE) / 2 / page_size * page_size;

	memset(h, 0, sizeof(*h));
	memcpy(h->magic, STORE_MAGIC, sizeof(h->magic));
	h->version = htole32(STORE_VERSION);
	h->page_size = htole32(page_size);
	if (getrandom(h->store_id, sizeof(h->store_id), 0) != sizeof(h->store_id))
		for (size_t i = 0; i < sizeof(h->store_id); i++)
			h->store_id[i] = (uint8_t)rand();
	h->size = htole64(size);
	h->partition[0].start = htole64(STORE_HEADER_SPACE);
	h->partition[0].length = htole64(half);
	h->partition[1].start = htole64(STORE_HEADER_SPACE + half);
	h->partition[1].length = htole64(half);
	h->crc32c = htole32(header_crc(h));
}

/* The partitions a header gives out must name their node in a string that
 * ends, and lie after the header's space, inside the store and apart: a node destages into its own,
 * and one reaching over the header or the other's would overwrite them. The checksum only says the
 * header is as written, not that whoever wrote it got this right. */
static int partitions_check(const struct store_header_disk *h, const char *path, char *err,
			    size_t err_len)
{
	uint64_t size = le64toh(h->size), start[2], length[2];

	for (int i = 0; i < 2; i++) {
		/* claim() compares and prints the names. */
		if (!memchr(h->partition[i].node, '\0', sizeof(h->partition[i].node))) {
			snprintf(err, err_len,
				 "%s: the store header's partition %d has a node name with no end",
				 path, i);
			return -EBADMSG;
		}
		start[i] = le64toh(h->partition[i].start);
		length[i] = le64toh(h->partition[i].length);
		if (start[i] < STORE_HEADER_SPACE || length[i] > size ||
		    start[i] > size - length[i]) {
			snprintf(err, err_len,
				 "%s: the store header's partition %d (%llu bytes at %llu) is not "
				 "inside the store's %llu bytes after the header",
				 path, i, (unsigned long long)length[i],
				 (unsigned long long)start[i], (unsigned long long)size);
			return -EBADMSG;
		}
	}
	if (start[0] < start[1] + length[1] && start[1] < start[0] + length[0]) {
		snprintf(err, err_len, "%s: the store header's two partitions overlap", path);
		return -EBADMSG;
	}
	return 0;
}

static int header_check(const struct store_header_disk *h, const char *path, uint32_t page_size,
			char *err, size_t err_len)
{
	if (memcmp(h->magic, STORE_MAGIC, sizeof(h->magic)) != 0) {
		snprintf(err, err_len, "%s is not an ftvm store (no store header)", path);
		return -EBADMSG;
	}
	if (le32toh(h->crc32c) != header_crc(h)) {
		snprintf(err, err_len, "%s: the store header fails its checksum", path);
		return -EBADMSG;
	}
	if (le32toh(h->version) != STORE_VERSION) {
		snprintf(err, err_len, "%s: store version %u, this ftvmd knows %u", path,
			 le32toh(h->version), STORE_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (le32toh(h->page_size) != page_size) {
		snprintf(err, err_len, "%s: store made for page_size %u, this node has %u", path,
			 le32toh(h->page_size), page_size);
		return -EINVAL;
	}
	return partitions_check(h, path, err, err_len);
}

/* Finds node_id's partition, or claims a free one for it. */
static int claim(struct store_header_disk *h, const char *path, const char *node_id,
		 bool *ret_changed, char *err, size_t err_len)
{
	int free_slot = -1;

	for (int i = 0; i < 2; i++) {
		if (strcmp(h->partition[i].node, node_id) == 0)
			return i;
		if (!h->partition[i].node[0] && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0) {
		snprintf(err, err_len, "%s belongs to nodes '%s' and '%s', not to '%s'", path,
			 h->partition[0].node, h->partition[1].node, node_id);
		return -EPERM;
	}
	snprintf(h->partition[free_slot].node, sizeof(h->partition[free_slot].node), "%s", node_id);
	h->crc32c = htole32(header_crc(h));
	*ret_changed = true;
	return free_slot;
}

int store_header_decode(void *header, const char *path, uint32_t page_size, const char *node_id,
			struct store_partition *ret, bool *ret_changed, char *err, size_t err_len)
{
	struct store_header_disk *h = header;
	int r, slot;

	r = header_check(h, path, page_size, err, err_len);
	if (r < 0)
		return r;
	slot = claim(h, path, node_id, ret_changed, err, err_len);
	if (slot < 0)
		return slot;
	ret->index = (unsigned)slot;
	ret->start = le64toh(h->partition[slot].start);
	ret->length = le64toh(h->partition[slot].length);
	return 0;
}

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

int store_open(const char *path, uint64_t size, uint32_t page_size, const char *node_id,
	       bool may_create, struct store **ret, char *err, size_t err_len)
{
	struct store_header_disk h;
	struct store_partition part;
	struct store *s = NULL;
	bool changed = false;
	struct stat st;
	ssize_t n;
	int fd, r;

	fd = open(path, O_RDWR | O_CLOEXEC | (may_create ? O_CREAT : 0), 0640);
	if (fd < 0) {
		r = -errno;
		snprintf(err, err_len, "%s: cannot open the store: %s", path, strerror(errno));
		return r;
	}
	/* Both nodes may open a new store at once: one initialises it. */
	if (flock(fd, LOCK_EX) < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		snprintf(err, err_len, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (st.st_size == 0 && S_ISREG(st.st_mode) && !may_create) {
		r = -ENOENT;
		snprintf(err, err_len, "%s is empty, and this node's data is in an existing store",
			 path);
		goto fail;
	}
	if (st.st_size == 0 && S_ISREG(st.st_mode)) {
		header_init(&h, size, page_size);
		r = reserve(fd, path, size, err, err_len);
		if (r < 0)
			goto fail;
		changed = true;
	} else {
		n = pread(fd, &h, sizeof(h), 0);
		if (n != (ssize_t)sizeof(h)) {
			r = n < 0 ? -errno : -EBADMSG;
			snprintf(err, err_len, "%s: cannot read the store header%s%s", path,
				 n < 0 ? ": " : " (too short)", n < 0 ? strerror(errno) : "");
			goto fail;
		}
	}
	/* A new header passes its checks, and gets this node's partition. */
	r = store_header_decode(&h, path, page_size, node_id, &part, &changed, err, err_len);
	if (r < 0)
		goto fail;
	if (changed && (pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || fdatasync(fd) < 0)) {
		r = -errno;
		snprintf(err, err_len, "%s: cannot write the store header: %s", path,
			 strerror(errno));
		goto fail;
	}
	flock(fd, LOCK_UN);
	s = calloc(1, sizeof(*s));
	if (!s) {
		r = -ENOMEM;
		snprintf(err, err_len, "out of memory");
		goto fail;
	}
	s->fd = fd;
	memcpy(s->id, h.store_id, sizeof(s->id));
	s->index = part.index;
	s->start = part.start;
	s->length = part.length;
	s->partner_start = le64toh(h.partition[1 - part.index].start);
	s->partner_length = le64toh(h.partition[1 - part.index].length);
	*ret = s;
	return 0;
fail:
	close(fd);
	return r;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	close(s->fd);
	free(s);
}

int store_fd(const struct store *s)
{
	return s->fd;
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
