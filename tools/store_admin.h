/* ftvmctl store init / store show: seed 004's management interface for the
 * shared store, read and written in place, with no node (storage/STORAGE.md).
 * Each returns ftvmctl's exit code and prints its own errors. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct store_admin_init {
	const char *path;
	const char *size;      /* --size; NULL: the file's or device's own */
	const char *page_size; /* --page-size; NULL: 4096 */
	const char *const *partitions;
	size_t n_partitions;
	const char *const *access;
	size_t n_access;
	bool force;
	bool json;
};

int store_admin_init(const struct store_admin_init *o);
int store_admin_show(const char *path, bool json);
