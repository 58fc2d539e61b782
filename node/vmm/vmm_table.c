#include "vmm_table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "crc32c.h"

#define BUCKETS 1024u

struct vmm_table {
	struct vmm_alloc *bucket[BUCKETS];
	size_t count;
	uint64_t inserted; /* the last incarnation given */
};

static size_t hash(const char *s)
{
	size_t h = 5381; /* djb2: guids are short and well spread */

	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h % BUCKETS;
}

int vmm_table_new(struct vmm_table **ret)
{
	*ret = calloc(1, sizeof(**ret));
	return *ret ? 0 : -ENOMEM;
}

void vmm_table_free(struct vmm_table *t)
{
	if (!t)
		return;
	for (size_t b = 0; b < BUCKETS; b++)
		while (t->bucket[b]) {
			struct vmm_alloc *a = t->bucket[b];
			t->bucket[b] = a->next;
			vmm_alloc_free(a);
		}
	free(t);
}

struct vmm_alloc *vmm_table_find(const struct vmm_table *t, const char *guid)
{
	struct vmm_alloc *a = t->bucket[hash(guid)];

	while (a && strcmp(a->guid, guid) != 0)
		a = a->next;
	return a;
}

/* A scan: a pair has few volumes, and this is asked at a volume's making and
 * an NBD client's choice of export, not per request. */
struct vmm_alloc *vmm_table_find_volume(const struct vmm_table *t, const char *name)
{
	for (size_t b = 0; b < BUCKETS; b++)
		for (struct vmm_alloc *a = t->bucket[b]; a; a = a->next)
			if (a->volume[0] && strcmp(a->volume, name) == 0)
				return a;
	return NULL;
}

const char *vmm_media_name(enum vmm_media m)
{
	return m == VMM_MEDIA_FLASH ? "flash" : m == VMM_MEDIA_DRAM ? "dram" : "store";
}

int vmm_media_parse(const char *s)
{
	if (strcmp(s, "store") == 0)
		return VMM_MEDIA_STORE;
	if (strcmp(s, "flash") == 0)
		return VMM_MEDIA_FLASH;
	if (strcmp(s, "dram") == 0)
		return VMM_MEDIA_DRAM;
	return -EINVAL;
}

bool vmm_page_on_flash(const struct vmm_page *p)
{
	return p->alloc->media == VMM_MEDIA_FLASH && p->version && p->flash_version == p->version &&
	       p->flash_crc == p->crc32c;
}

struct vmm_page *vmm_alloc_page(struct vmm_alloc *a, uint64_t page)
{
	return a && page < a->pages ? &a->page[page] : NULL;
}

struct vmm_alloc *vmm_alloc_new(const char *guid, const char *home, const char *owner,
				const char *policy, uint64_t size, uint32_t block_size,
				const uint8_t *header, size_t header_len)
{
	struct vmm_alloc *a = calloc(1, sizeof(*a));
	uint32_t zero_crc;

	if (!a)
		return NULL;
	a->guid = strdup(guid);
	a->home = strdup(home);
	a->owner = strdup(owner);
	a->policy = strdup(policy);
	a->client = strdup("");
	a->session = strdup("");
	a->volume = strdup("");
	a->size = size;
	a->block_size = block_size;
	a->pages = (size + block_size - 1) / block_size;
	a->header = malloc(header_len ? header_len : 1);
	a->header_len = header_len;
	a->page = calloc(a->pages, sizeof(*a->page));
	if (!a->guid || !a->home || !a->owner || !a->policy || !a->client || !a->session ||
	    !a->volume || !a->header || !a->page) {
		vmm_alloc_free(a);
		return NULL;
	}
	if (header_len)
		memcpy(a->header, header, header_len);
	zero_crc = vmm_zero_crc(block_size);
	for (uint64_t i = 0; i < a->pages; i++) {
		a->page[i].alloc = a;
		a->page[i].crc32c = zero_crc;
	}
	return a;
}

void vmm_alloc_free(struct vmm_alloc *a)
{
	if (!a)
		return;
	for (uint64_t i = 0; a->page && i < a->pages; i++) {
		for (size_t o = 0; o < a->page[i].n_owners; o++)
			free(a->page[i].owners[o]);
		free(a->page[i].owners);
	}
	free(a->page);
	free(a->guid);
	free(a->home);
	free(a->owner);
	free(a->policy);
	free(a->client);
	free(a->session);
	free(a->volume);
	free(a->header);
	free(a);
}

static int set_text(char **field, const char *value, bool (*valid)(const char *))
{
	char *copy;

	if (!valid(value))
		return -EINVAL;
	copy = strdup(value);
	if (!copy)
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

int vmm_alloc_set_client(struct vmm_alloc *a, const char *client)
{
	return set_text(&a->client, client, config_client_name_valid);
}

int vmm_alloc_set_session(struct vmm_alloc *a, const char *session)
{
	return set_text(&a->session, session, config_session_id_valid);
}

static bool volume_or_none(const char *s)
{
	return !s[0] || config_volume_name_valid(s);
}

int vmm_alloc_set_volume(struct vmm_alloc *a, const char *volume)
{
	return set_text(&a->volume, volume, volume_or_none);
}

void vmm_table_insert(struct vmm_table *t, struct vmm_alloc *a)
{
	size_t b = hash(a->guid);

	a->next = t->bucket[b];
	t->bucket[b] = a;
	t->count++;
	a->incarnation = ++t->inserted;
}

struct vmm_alloc *vmm_table_find_incarnation(const struct vmm_table *t, const char *guid,
					     uint64_t incarnation)
{
	struct vmm_alloc *a = vmm_table_find(t, guid);

	return a && a->incarnation == incarnation ? a : NULL;
}

void vmm_table_remove(struct vmm_table *t, struct vmm_alloc *a)
{
	struct vmm_alloc **p = &t->bucket[hash(a->guid)];

	while (*p && *p != a)
		p = &(*p)->next;
	if (*p) {
		*p = a->next;
		t->count--;
	}
}

size_t vmm_table_size(const struct vmm_table *t)
{
	return t->count;
}

size_t vmm_table_count(const struct vmm_table *t, const char *node, bool owned)
{
	size_t n = 0;

	for (size_t b = 0; b < BUCKETS; b++)
		for (const struct vmm_alloc *a = t->bucket[b]; a; a = a->next)
			if ((strcmp(a->owner, node) == 0) == owned)
				n++;
	return n;
}

size_t vmm_table_count_adopted(const struct vmm_table *t, const char *node)
{
	size_t n = 0;

	for (size_t b = 0; b < BUCKETS; b++)
		for (const struct vmm_alloc *a = t->bucket[b]; a; a = a->next)
			n += strcmp(a->owner, node) == 0 && strcmp(a->home, node) != 0;
	return n;
}

static int by_guid(const void *x, const void *y)
{
	return strcmp((*(struct vmm_alloc *const *)x)->guid, (*(struct vmm_alloc *const *)y)->guid);
}

struct vmm_alloc **vmm_table_sorted(const struct vmm_table *t, size_t *ret_n)
{
	struct vmm_alloc **all = calloc(t->count ? t->count : 1, sizeof(*all));
	size_t n = 0;

	if (!all)
		return NULL;
	for (size_t b = 0; b < BUCKETS; b++)
		for (struct vmm_alloc *a = t->bucket[b]; a; a = a->next)
			all[n++] = a;
	qsort(all, n, sizeof(*all), by_guid);
	*ret_n = n;
	return all;
}

const char *vmm_page_conflict(const struct vmm_alloc *a, const struct vmm_page *p, int mode)
{
	if (a->freeing)
		return "the allocation is being freed";
	if (a->moving)
		return "the allocation is being handed back to its home node";
	if (p->lock_mode == FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE)
		return "write-locked";
	if (p->lock_mode == FTVM__PARTNER__LOCK_MODE__LOCK_MODE_READ &&
	    mode == FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE)
		return "read-locked";
	return NULL;
}

int vmm_page_lock(struct vmm_page *p, int mode, const char *owner)
{
	char **owners = realloc(p->owners, (p->n_owners + 1) * sizeof(*owners));

	if (!owners)
		return -ENOMEM;
	p->owners = owners;
	owners[p->n_owners] = strdup(owner);
	if (!owners[p->n_owners])
		return -ENOMEM;
	p->n_owners++;
	p->lock_mode = mode;
	return 0;
}

bool vmm_page_locked_by(const struct vmm_page *p, const char *owner)
{
	for (size_t i = 0; i < p->n_owners; i++)
		if (strcmp(p->owners[i], owner) == 0)
			return true;
	return false;
}

int vmm_page_unlock(struct vmm_page *p, const char *owner)
{
	for (size_t i = 0; i < p->n_owners; i++) {
		if (strcmp(p->owners[i], owner) != 0)
			continue;
		free(p->owners[i]);
		p->owners[i] = p->owners[--p->n_owners];
		if (p->n_owners == 0)
			p->lock_mode = FTVM__PARTNER__LOCK_MODE__LOCK_MODE_NONE;
		return 0;
	}
	return -ENOENT;
}

bool vmm_alloc_locked(const struct vmm_alloc *a)
{
	for (uint64_t i = 0; i < a->pages; i++)
		if (a->page[i].n_owners)
			return true;
	return false;
}

bool vmm_page_write_locked(const struct vmm_page *p)
{
	return p->lock_mode == FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE;
}

bool vmm_lock_owner_of(const char *lock_owner, const char *node)
{
	size_t n = strlen(node);

	return strncmp(lock_owner, node, n) == 0 && lock_owner[n] == '/';
}

bool vmm_page_write_locked_by(const struct vmm_page *p, const char *node)
{
	return vmm_page_write_locked(p) && p->n_owners && vmm_lock_owner_of(p->owners[0], node);
}

uint64_t vmm_page_index(const struct vmm_page *p)
{
	return (uint64_t)(p - p->alloc->page);
}

uint32_t vmm_zero_crc(uint32_t block_size)
{
	static const uint8_t zeros[4096];
	uint32_t crc = 0;

	for (uint32_t done = 0; done < block_size; done += sizeof(zeros))
		crc = crc32c(crc, zeros,
			     block_size - done < sizeof(zeros) ? block_size - done : sizeof(zeros));
	return crc;
}

void vmm_alloc_header(const struct vmm_alloc *a, Ftvm__Partner__Header *h)
{
	ftvm__partner__header__init(h);
	h->guid = a->guid;
	h->size = a->size;
	h->block_size = a->block_size;
	h->pages = a->pages;
	h->policy = a->policy;
	h->home = a->home;
	h->owner = a->owner;
	h->uid = a->uid;
	h->client = a->client;
	h->session = a->session[0] != '\0';
	h->media = (char *)vmm_media_name(a->media);
	h->partition = vmm_alloc_is_volume(a)	     ? VMM_PARTITION_CACHE
		       : a->media == VMM_MEDIA_STORE ? a->home
						     : VMM_PARTITION_SERVER;
	h->volume = a->volume;
	h->header.data = a->header;
	h->header.len = a->header_len;
}
