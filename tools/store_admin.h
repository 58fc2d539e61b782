/* ftvmctl store init / store show, and flash init / flash show: seed 004's
 * management interface for the shared store and for a node's own flash
 * device (one header, storage/STORAGE.md), read and written in place, with
 * no node. Each returns ftvmctl's exit code and prints its own errors, which
 * name the command by kind ("store init", "flash show"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "store_layout.h"

struct store_admin_init {
	enum store_kind kind; /* what init makes: a store or a flash device */
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
/* Shows what is at path whatever its kind (the kind is printed); kind names
 * the command in errors. */
int store_admin_show(const char *path, enum store_kind kind, bool json);
