#include "store_layout.h"

#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "crc32c.h"

#define STORE_MAGIC "FTVMSTOR"
#define VERSION_CURRENT 2u

/* On disk, little-endian, at offset 0 (storage/STORAGE.md, "The header").
 * Both versions begin alike: magic, version, page size, id, size. */
struct partition_v1 {
	char id[CONFIG_ID_MAX + 1]; /* "" = free */
	uint8_t pad[7];
	uint64_t start;
	uint64_t length;
};

struct header_v1 {
	char magic[8];
	uint32_t version;
	uint32_t page_size;
	uint8_t id[16];
	uint64_t size;
	struct partition_v1 partition[2];
	uint32_t crc32c; /* of everything before it */
};

struct partition_v2 {
	char id[CONFIG_ID_MAX + 1]; /* "" = free */
	uint8_t access;		    /* enum store_access */
	uint8_t pad[6];
	uint64_t start;
	uint64_t length;
	uint64_t reserved;
};

struct header_v2 {
	char magic[8];
	uint32_t version;
	uint32_t page_size;
	uint8_t id[16];
	uint64_t size;
	uint32_t kind; /* enum store_kind */
	uint32_t n_partitions;
	struct partition_v2 partition[STORE_PARTITIONS_MAX];
	uint32_t crc32c; /* of everything before it */
	uint32_t pad;
};

_Static_assert(sizeof(struct header_v1) == STORE_HEADER_V1_SIZE, "store_layout.h has its size");
_Static_assert(sizeof(struct header_v2) <= STORE_HEADER_SECTOR, "a header fits its sector");
_Static_assert(sizeof(struct partition_v2) == 64, "partitions are 64 bytes apart");

__attribute__((format(printf, 4, 5))) static int fail(int r, char *err, size_t err_len,
						      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, err_len, fmt, ap);
	va_end(ap);
	return r;
}

const char *store_kind_name(enum store_kind kind)
{
	return kind == STORE_KIND_FLASH ? "flash" : "store";
}

const char *store_access_name(enum store_access access)
{
	return access == STORE_ACCESS_RO ? "ro" : "rw";
}

static void new_id(uint8_t id[16])
{
	if (getrandom(id, 16, 0) != 16)
		for (size_t i = 0; i < 16; i++)
			id[i] = (uint8_t)rand();
}

void store_layout_default(struct store_layout *l, enum store_kind kind, uint64_t size,
			  uint32_t page_size)
{
	uint64_t space = (size - STORE_HEADER_SPACE) / page_size * page_size;
	uint64_t half = (size - STORE_HEADER_SPACE) / 2 / page_size * page_size;

	memset(l, 0, sizeof(*l));
	l->version = VERSION_CURRENT;
	l->kind = kind;
	l->page_size = page_size;
	new_id(l->id);
	l->size = size;
	l->part[0].start = STORE_HEADER_SPACE;
	if (kind == STORE_KIND_FLASH) {
		l->n = 1;
		l->part[0].length = space;
		return;
	}
	l->n = 2;
	l->part[0].length = half;
	l->part[1].start = STORE_HEADER_SPACE + half;
	l->part[1].length = half;
}

/* ---- the rules ---- */

static unsigned writable_count(const struct store_layout *l)
{
	unsigned n = 0;

	for (unsigned i = 0; i < l->n; i++)
		n += l->part[i].access == STORE_ACCESS_RW;
	return n;
}

static int partition_check(const struct store_layout *l, unsigned i, const char *path, char *err,
			   size_t err_len)
{
	const struct store_layout_partition *p = &l->part[i];

	if (p->id[0] && !config_id_valid(p->id))
		return fail(-EBADMSG, err, err_len,
			    "%s: partition %u's id is not a node id ([a-z0-9-]{1,%d})", path, i,
			    CONFIG_ID_MAX);
	if (p->access != STORE_ACCESS_RW && p->access != STORE_ACCESS_RO)
		return fail(-EBADMSG, err, err_len, "%s: partition %u has an unknown access (%d)",
			    path, i, (int)p->access);
	if (!p->length || p->start < STORE_HEADER_SPACE || p->length > l->size ||
	    p->start > l->size - p->length)
		return fail(-EBADMSG, err, err_len,
			    "%s: partition %u (%llu bytes at %llu) is not inside the %llu bytes "
			    "after the header's %u",
			    path, i, (unsigned long long)p->length, (unsigned long long)p->start,
			    (unsigned long long)l->size, STORE_HEADER_SPACE);
	for (unsigned j = 0; j < i; j++) {
		const struct store_layout_partition *q = &l->part[j];

		if (p->start < q->start + q->length && q->start < p->start + p->length)
			return fail(-EBADMSG, err, err_len, "%s: partitions %u and %u overlap",
				    path, j, i);
		if (p->id[0] && strcmp(p->id, q->id) == 0)
			return fail(-EBADMSG, err, err_len,
				    "%s: partitions %u and %u are both named '%s'", path, j, i,
				    p->id);
	}
	return 0;
}

int store_layout_check(const struct store_layout *l, const char *path, char *err, size_t err_len)
{
	int r;

	if (l->kind != STORE_KIND_STORE && l->kind != STORE_KIND_FLASH)
		return fail(-EBADMSG, err, err_len, "%s: unknown device kind %d", path,
			    (int)l->kind);
	if (l->page_size < CONFIG_PAGE_SIZE_MIN || l->page_size > CONFIG_PAGE_SIZE_MAX ||
	    (l->page_size & (l->page_size - 1)))
		return fail(-EBADMSG, err, err_len,
			    "%s: page size %u is not a power of two from %u to %u", path,
			    l->page_size, CONFIG_PAGE_SIZE_MIN, CONFIG_PAGE_SIZE_MAX);
	if (l->n == 0 || l->n > STORE_PARTITIONS_MAX)
		return fail(-EBADMSG, err, err_len, "%s: %u partitions (1 to %u)", path, l->n,
			    STORE_PARTITIONS_MAX);
	for (unsigned i = 0; i < l->n; i++) {
		r = partition_check(l, i, path, err, err_len);
		if (r < 0)
			return r;
	}
	/* Each node of the pair destages into a partition of its own. */
	if (l->kind == STORE_KIND_STORE && writable_count(l) != 2)
		return fail(-EBADMSG, err, err_len,
			    "%s: a store needs two writable partitions, one for each node; it "
			    "has %u",
			    path, writable_count(l));
	/* ... and a flash device is one node's, which writes one of them. */
	if (l->kind == STORE_KIND_FLASH && writable_count(l) == 0)
		return fail(-EBADMSG, err, err_len,
			    "%s: a flash device needs a writable partition for its node; it has "
			    "none",
			    path);
	return 0;
}

/* ---- to and from the disk's bytes ---- */

static void id_from_disk(char *to, const char *from)
{
	memcpy(to, from, CONFIG_ID_MAX + 1);
}

static int decode_v1(const struct header_v1 *h, const char *path, struct store_layout *l, char *err,
		     size_t err_len)
{
	if (le32toh(h->crc32c) != crc32c(0, h, offsetof(struct header_v1, crc32c)))
		return fail(-EBADMSG, err, err_len, "%s: the store header fails its checksum",
			    path);
	l->kind = STORE_KIND_STORE;
	l->n = 2;
	for (unsigned i = 0; i < 2; i++) {
		if (!memchr(h->partition[i].id, '\0', sizeof(h->partition[i].id)))
			return fail(-EBADMSG, err, err_len,
				    "%s: the store header's partition %u has a node name with no "
				    "end",
				    path, i);
		id_from_disk(l->part[i].id, h->partition[i].id);
		l->part[i].start = le64toh(h->partition[i].start);
		l->part[i].length = le64toh(h->partition[i].length);
		l->part[i].access = STORE_ACCESS_RW;
	}
	return 0;
}

static int decode_v2(const struct header_v2 *h, const char *path, struct store_layout *l, char *err,
		     size_t err_len)
{
	if (le32toh(h->crc32c) != crc32c(0, h, offsetof(struct header_v2, crc32c)))
		return fail(-EBADMSG, err, err_len, "%s: the store header fails its checksum",
			    path);
	l->kind = (enum store_kind)le32toh(h->kind);
	l->n = le32toh(h->n_partitions);
	if (l->n > STORE_PARTITIONS_MAX)
		return fail(-EBADMSG, err, err_len, "%s: %u partitions (at most %u)", path, l->n,
			    STORE_PARTITIONS_MAX);
	for (unsigned i = 0; i < l->n; i++) {
		const struct partition_v2 *p = &h->partition[i];

		if (!memchr(p->id, '\0', sizeof(p->id)))
			return fail(-EBADMSG, err, err_len,
				    "%s: partition %u has a node name with no end", path, i);
		id_from_disk(l->part[i].id, p->id);
		l->part[i].start = le64toh(p->start);
		l->part[i].length = le64toh(p->length);
		l->part[i].access = (enum store_access)p->access;
	}
	return 0;
}

bool store_layout_is_header(const void *buf, size_t len)
{
	return len >= STORE_MAGIC_SIZE && memcmp(buf, STORE_MAGIC, STORE_MAGIC_SIZE) == 0;
}

int store_layout_decode(const void *buf, size_t len, const char *path, struct store_layout *ret,
			char *err, size_t err_len)
{
	/* Copied: buf need not be aligned, and a short one reads as zeroes. */
	union {
		struct header_v1 v1;
		struct header_v2 v2;
		uint8_t bytes[STORE_HEADER_SECTOR];
	} h = { .bytes = { 0 } };
	int r;

	memcpy(h.bytes, buf, len < sizeof(h) ? len : sizeof(h));
	memset(ret, 0, sizeof(*ret));
	if (!store_layout_is_header(h.bytes, sizeof(h.bytes)))
		return fail(-EBADMSG, err, err_len, "%s is not an ftvm store (no store header)",
			    path);
	ret->version = le32toh(h.v1.version);
	ret->page_size = le32toh(h.v1.page_size);
	memcpy(ret->id, h.v1.id, sizeof(ret->id));
	ret->size = le64toh(h.v1.size);
	if (ret->version == 1)
		r = decode_v1(&h.v1, path, ret, err, err_len);
	else if (ret->version == 2)
		r = decode_v2(&h.v2, path, ret, err, err_len);
	else
		r = fail(-EPROTONOSUPPORT, err, err_len,
			 "%s: store version %u, this build knows 1 and %u", path, ret->version,
			 VERSION_CURRENT);
	return r < 0 ? r : store_layout_check(ret, path, err, err_len);
}

static void encode_v1(const struct store_layout *l, struct header_v1 *h)
{
	for (unsigned i = 0; i < 2; i++) {
		memcpy(h->partition[i].id, l->part[i].id, sizeof(h->partition[i].id));
		h->partition[i].start = htole64(l->part[i].start);
		h->partition[i].length = htole64(l->part[i].length);
	}
	h->crc32c = htole32(crc32c(0, h, offsetof(struct header_v1, crc32c)));
}

static void encode_v2(const struct store_layout *l, struct header_v2 *h)
{
	h->kind = htole32(l->kind);
	h->n_partitions = htole32(l->n);
	for (unsigned i = 0; i < l->n; i++) {
		memcpy(h->partition[i].id, l->part[i].id, sizeof(h->partition[i].id));
		h->partition[i].access = (uint8_t)l->part[i].access;
		h->partition[i].start = htole64(l->part[i].start);
		h->partition[i].length = htole64(l->part[i].length);
	}
	h->crc32c = htole32(crc32c(0, h, offsetof(struct header_v2, crc32c)));
}

void store_layout_encode(const struct store_layout *l, void *buf)
{
	union {
		struct header_v1 v1;
		struct header_v2 v2;
	} *h = buf;

	memset(buf, 0, STORE_HEADER_SECTOR);
	memcpy(h->v1.magic, STORE_MAGIC, sizeof(h->v1.magic));
	h->v1.version = htole32(l->version);
	h->v1.page_size = htole32(l->page_size);
	memcpy(h->v1.id, l->id, sizeof(h->v1.id));
	h->v1.size = htole64(l->size);
	if (l->version == 1)
		encode_v1(l, &h->v1);
	else
		encode_v2(l, &h->v2);
}

/* ---- which partition is whose ---- */

int store_layout_claim(struct store_layout *l, const char *path, const char *node_id,
		       bool *ret_claimed, char *err, size_t err_len)
{
	int free_one = -1;
	size_t used = 0;

	for (unsigned i = 0; i < l->n; i++) {
		bool named = strcmp(l->part[i].id, node_id) == 0;

		/* Its name on a partition it may not write: taking another
		 * would name two partitions alike. */
		if (named && l->part[i].access != STORE_ACCESS_RW)
			return fail(-EPERM, err, err_len,
				    "%s: the partition named '%s' is read-only, so node '%s' "
				    "has none it may write",
				    path, node_id, node_id);
		if (named)
			return (int)i;
		if (l->part[i].access == STORE_ACCESS_RW && !l->part[i].id[0] && free_one < 0)
			free_one = (int)i;
	}
	if (free_one < 0) {
		used = (size_t)snprintf(err, err_len, "%s belongs to nodes", path);
		for (unsigned i = 0, k = 0; i < l->n && used < err_len; i++)
			if (l->part[i].access == STORE_ACCESS_RW)
				used += (size_t)snprintf(err + used, err_len - used, "%s '%s'",
							 k++ ? " and" : "", l->part[i].id);
		if (used < err_len)
			snprintf(err + used, err_len - used, ", not to '%s'", node_id);
		return -EPERM;
	}
	snprintf(l->part[free_one].id, sizeof(l->part[free_one].id), "%s", node_id);
	*ret_claimed = true;
	return free_one;
}

unsigned store_layout_partner(const struct store_layout *l, unsigned mine)
{
	for (unsigned i = 0; i < l->n; i++)
		if (i != mine && l->part[i].access == STORE_ACCESS_RW)
			return i;
	return mine; /* a flash device: no partner's */
}

/* ---- from `ftvmctl store init`'s settings ---- */

/* "ID=VALUE" into id (checked) and *value. */
static int split_setting(const char *what, const char *s, char *id, const char **value, char *err,
			 size_t err_len)
{
	const char *eq = strchr(s, '=');
	size_t n = eq ? (size_t)(eq - s) : 0;

	if (!eq || n == 0 || n > CONFIG_ID_MAX)
		return fail(-EINVAL, err, err_len, "%s '%s': want ID=%s", what, s,
			    strcmp(what, "--access") == 0 ? "rw|ro" : "SIZE[@OFFSET]");
	memcpy(id, s, n);
	id[n] = '\0';
	if (!config_id_valid(id))
		return fail(-EINVAL, err, err_len,
			    "%s '%s': '%s' is not a node id ([a-z0-9-]{1,%d})", what, s, id,
			    CONFIG_ID_MAX);
	*value = eq + 1;
	return 0;
}

/* SIZE: bytes (config_parse_size) or N% of space. */
static int parse_share(const char *s, uint64_t space, uint64_t *ret)
{
	char *end;
	unsigned long pct;

	if (strchr(s, '%')) {
		if (s[0] < '0' || s[0] > '9')
			return -EINVAL;
		pct = strtoul(s, &end, 10);
		if (strcmp(end, "%") != 0 || pct == 0 || pct > 100)
			return -EINVAL;
		*ret = space / 100 * pct + space % 100 * pct / 100;
		return 0;
	}
	return config_parse_size(s, ret);
}

static int add_partition(struct store_layout *l, const char *setting, uint64_t *next, char *err,
			 size_t err_len)
{
	struct store_layout_partition *p = &l->part[l->n];
	char size_text[32];
	const char *value, *at;
	uint64_t length, start = *next;
	int r;

	if (l->n == STORE_PARTITIONS_MAX)
		return fail(-EINVAL, err, err_len, "more than %u partitions", STORE_PARTITIONS_MAX);
	r = split_setting("--partition", setting, p->id, &value, err, err_len);
	if (r < 0)
		return r;
	at = strchr(value, '@');
	if ((at ? (size_t)(at - value) : strlen(value)) >= sizeof(size_text))
		return fail(-EINVAL, err, err_len, "--partition '%s': the size is too long",
			    setting);
	snprintf(size_text, sizeof(size_text), "%.*s",
		 (int)(at ? (size_t)(at - value) : strlen(value)), value);
	if (parse_share(size_text, l->size - STORE_HEADER_SPACE, &length) < 0)
		return fail(-EINVAL, err, err_len,
			    "--partition '%s': '%s' is not a size (bytes with K, M or G, or "
			    "1%%-100%% of the space after the header)",
			    setting, size_text);
	if (at && config_parse_size(at + 1, &start) < 0)
		return fail(-EINVAL, err, err_len,
			    "--partition '%s': '%s' is not an offset (bytes with K, M or G)",
			    setting, at + 1);
	if (start % l->page_size)
		return fail(-EINVAL, err, err_len,
			    "--partition '%s': offset %llu is not a multiple of the page size %u",
			    setting, (unsigned long long)start, l->page_size);
	p->start = start;
	p->length = length / l->page_size * l->page_size;
	if (!p->length)
		return fail(-EINVAL, err, err_len, "--partition '%s': less than a page (%u bytes)",
			    setting, l->page_size);
	*next = p->start + p->length;
	l->n++;
	return 0;
}

static int set_access(struct store_layout *l, const char *setting, char *err, size_t err_len)
{
	char id[CONFIG_ID_MAX + 1];
	const char *value;
	int r = split_setting("--access", setting, id, &value, err, err_len);

	if (r < 0)
		return r;
	for (unsigned i = 0; i < l->n; i++) {
		if (strcmp(l->part[i].id, id) != 0)
			continue;
		if (strcmp(value, "rw") == 0)
			l->part[i].access = STORE_ACCESS_RW;
		else if (strcmp(value, "ro") == 0)
			l->part[i].access = STORE_ACCESS_RO;
		else
			return fail(-EINVAL, err, err_len, "--access '%s': want rw or ro, not '%s'",
				    setting, value);
		return 0;
	}
	return fail(-EINVAL, err, err_len, "--access '%s': no partition '%s' (--partition %s=SIZE)",
		    setting, id, id);
}

int store_layout_from_settings(const struct store_settings *s, struct store_layout *ret, char *err,
			       size_t err_len)
{
	uint64_t next = STORE_HEADER_SPACE;
	int r;

	if (s->page_size < CONFIG_PAGE_SIZE_MIN || s->page_size > CONFIG_PAGE_SIZE_MAX ||
	    (s->page_size & (s->page_size - 1)))
		return fail(-EINVAL, err, err_len,
			    "--page-size %u: want a power of two from %u to %u", s->page_size,
			    CONFIG_PAGE_SIZE_MIN, CONFIG_PAGE_SIZE_MAX);
	if (s->size < STORE_HEADER_SPACE + 2ull * s->page_size)
		return fail(-EINVAL, err, err_len,
			    "--size %llu: too small (the header takes %u bytes, then a page for "
			    "each partition at least)",
			    (unsigned long long)s->size, STORE_HEADER_SPACE);
	store_layout_default(ret, s->kind, s->size, s->page_size);
	if (s->n_partitions)
		ret->n = 0;
	for (size_t i = 0; i < s->n_partitions; i++) {
		r = add_partition(ret, s->partitions[i], &next, err, err_len);
		if (r < 0)
			return r;
	}
	if (!s->n_partitions && s->n_access)
		return fail(-EINVAL, err, err_len,
			    "--access needs the partitions named (--partition ID=SIZE)");
	for (size_t i = 0; i < s->n_access; i++) {
		r = set_access(ret, s->access[i], err, err_len);
		if (r < 0)
			return r;
	}
	/* What the settings make breaks a rule: the settings are wrong. */
	return store_layout_check(ret, "the new layout", err, err_len) < 0 ? -EINVAL : 0;
}
