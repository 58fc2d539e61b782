/* libFuzzer target: a node's INI configuration file (common/config.c), read
 * by config_load() as ftvmd reads it at start: libinih through read_line(),
 * every key's value parser, then the checks of the keys against each other
 * and the paths resolved against the file's directory.
 *
 * config_load() takes only a path, so each input is written to one file in
 * a scratch directory under /tmp first. Nothing may crash or leak; a
 * configuration that loads keeps every promise config.h makes (paths
 * absolute, sizes whole pages, a dead time above the heartbeat), and a
 * refused one returns -EINVAL with a message naming the file and nothing
 * else. Loading must not create anything: the defaults put state_dir and
 * the store beside the file, and the directory must still hold only it. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "config.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *path;

static void check_absolute(const char *p)
{
	if (!p || p[0] != '/')
		abort();
}

static void check_loaded(const struct ftvm_config *c)
{
	if (!c->id[0] || strcmp(c->path, path) != 0)
		abort();
	check_absolute(c->dir);
	check_absolute(c->socket_path);
	check_absolute(c->state_dir);
	check_absolute(c->store_path);
	if (c->trace_path)
		check_absolute(c->trace_path);
	if (strlen(c->socket_path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
		abort();
	if (!c->listen || !c->partner || !config_transport_name(c->transport))
		abort();
	if (c->page_size == 0 || (c->page_size & (c->page_size - 1)) ||
	    c->memory_size % c->page_size || c->pool_block_size % c->page_size)
		abort();
	if (c->memory_size == 0 || c->store_size < 2 * c->memory_size + STORE_HEADER_SPACE)
		abort();
	if (c->dead_after_ms <= c->heartbeat_ms || c->n_policies > CONFIG_POLICIES_MAX)
		abort();
	for (size_t i = 0; i < c->n_policies; i++)
		if (!c->policies[i].name[0] || c->policies[i].block_size == 0 ||
		    c->policies[i].block_size % c->page_size)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ftvm_config *c = NULL;
	char err[512];
	int r;

	if (!path)
		path = fuzz_tmp_path("ftvm.conf");
	fuzz_write_file(path, fuzz_data(data), size);
	r = config_load(path, &c, err, sizeof(err));
	if (r == 0) {
		if (!c)
			abort();
		check_loaded(c);
		config_free(c);
	} else if (r != -EINVAL || c || strncmp(err, path, strlen(path)) != 0) {
		abort();
	}
	if (fuzz_tmp_entries() != 1)
		abort();
	return 0;
}
