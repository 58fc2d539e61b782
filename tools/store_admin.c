#include "store_admin.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "config.h"
#include "store.h"
#include "store_layout.h"

/* ftvmctl's exit codes (INTERFACES.md). */
#define DONE 0
#define FAILED 1
#define USAGE 2

#define DEFAULT_PAGE_SIZE 4096u

/* The size of what is at path now: a file's length, a device's capacity
 * (*ret_device); 0 when there is nothing yet. */
static int current_size(const char *path, uint64_t *ret, bool *ret_device)
{
	struct stat st;
	off_t end;
	int fd;

	*ret = 0;
	*ret_device = false;
	if (stat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	*ret_device = !S_ISREG(st.st_mode);
	if (S_ISREG(st.st_mode)) {
		*ret = (uint64_t)st.st_size;
		return 0;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	end = lseek(fd, 0, SEEK_END);
	close(fd);
	if (end < 0)
		return -errno;
	*ret = (uint64_t)end;
	return 0;
}

/* cmd: the command, named as its kind is ("store" or "flash"). */
__attribute__((format(printf, 2, 3))) static int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ftvmctl: %s init: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'ftvmctl %s --help'.\n", cmd);
	return USAGE;
}

static void print_text(const char *path, const struct store_layout *l)
{
	printf("%s %s: version %u, page size %u, %" PRIu64 " bytes, id ", store_kind_name(l->kind),
	       path, l->version, l->page_size, l->size);
	for (size_t i = 0; i < sizeof(l->id); i++)
		printf("%02x", l->id[i]);
	printf("\n  %-32s  %14s  %14s  %s\n", "partition", "offset", "size", "access");
	for (unsigned i = 0; i < l->n; i++)
		printf("  %-32s  %14" PRIu64 "  %14" PRIu64 "  %s\n",
		       l->part[i].id[0] ? l->part[i].id : "(free)", l->part[i].start,
		       l->part[i].length, store_access_name(l->part[i].access));
}

static int print_json(const char *path, const struct store_layout *l)
{
	json_object *o = json_object_new_object(), *parts = json_object_new_array();
	char id[33];

	for (size_t i = 0; i < sizeof(l->id); i++)
		snprintf(id + 2 * i, 3, "%02x", l->id[i]);
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "kind", json_object_new_string(store_kind_name(l->kind)));
	json_object_object_add(o, "version", json_object_new_int64(l->version));
	json_object_object_add(o, "page_size", json_object_new_int64(l->page_size));
	json_object_object_add(o, "size", json_object_new_uint64(l->size));
	json_object_object_add(o, "id", json_object_new_string(id));
	for (unsigned i = 0; i < l->n; i++) {
		json_object *p = json_object_new_object();

		json_object_object_add(p, "id", json_object_new_string(l->part[i].id));
		json_object_object_add(p, "offset", json_object_new_uint64(l->part[i].start));
		json_object_object_add(p, "size", json_object_new_uint64(l->part[i].length));
		json_object_object_add(
			p, "access", json_object_new_string(store_access_name(l->part[i].access)));
		json_object_array_add(parts, p);
	}
	json_object_object_add(o, "partitions", parts);
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return DONE;
}

int store_admin_show(const char *path, enum store_kind kind, bool json)
{
	struct store_layout l;
	char err[512];

	if (store_read_layout(path, &l, err, sizeof(err)) < 0) {
		fprintf(stderr, "ftvmctl: %s show: %s\n", store_kind_name(kind), err);
		return FAILED;
	}
	if (json)
		return print_json(path, &l);
	print_text(path, &l);
	return DONE;
}

int store_admin_init(const struct store_admin_init *o)
{
	struct store_settings set = { .kind = o->kind,
				      .page_size = DEFAULT_PAGE_SIZE,
				      .partitions = o->partitions,
				      .n_partitions = o->n_partitions,
				      .access = o->access,
				      .n_access = o->n_access };
	const char *cmd = store_kind_name(o->kind);
	struct store_layout l;
	bool device;
	uint64_t n;
	char err[512];
	int r;

	if (o->page_size) {
		if (config_parse_size(o->page_size, &n) < 0 || n > UINT32_MAX)
			return usage_error(cmd, "--page-size '%s' is not a size", o->page_size);
		set.page_size = (uint32_t)n;
	}
	if (o->size && config_parse_size(o->size, &set.size) < 0)
		return usage_error(cmd, "--size '%s' is not a size (bytes with K, M or G)",
				   o->size);
	r = current_size(o->path, &n, &device);
	if (r < 0) {
		fprintf(stderr, "ftvmctl: %s init: %s: %s\n", cmd, o->path, strerror(-r));
		return FAILED;
	}
	if (!o->size)
		set.size = n;
	if (!set.size)
		return usage_error(cmd, "%s is new or empty: --size says how large to make it",
				   o->path);
	if (device && set.size > n) {
		fprintf(stderr,
			"ftvmctl: %s init: --size %s is more than %s holds (%" PRIu64 " bytes)\n",
			cmd, o->size, o->path, n);
		return FAILED;
	}
	r = store_layout_from_settings(&set, &l, err, sizeof(err));
	if (r == 0)
		r = store_init(o->path, &l, o->force, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "ftvmctl: %s init: %s\n", cmd, err);
		return FAILED;
	}
	if (o->json) {
		puts("{}");
		return DONE;
	}
	print_text(o->path, &l);
	return DONE;
}
