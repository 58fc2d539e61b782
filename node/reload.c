/* SIGHUP: the configuration read again (reload.h). Only the log level can
 * change under a running node: the others shape what it holds (its memory,
 * its store, its sockets, its partner), so a change to them waits for a
 * restart, and the log says which. */
#include "reload.h"

#include <stdio.h>
#include <string.h>

#include "config.h"
#include "log.h"

#define LOG_SUBSYSTEM "node"

static void on_change(const char *where, const char *old_value, const char *new_value, void *arg)
{
	unsigned *changes = arg;
	char what[600];

	if (strcmp(where, "[node] log_level") == 0)
		return; /* applied by value, below */
	(*changes)++;
	if (!old_value)
		snprintf(what, sizeof(what), "set (%s, was the default)", new_value);
	else if (!new_value)
		snprintf(what, sizeof(what), "removed (was %s, now the default)", old_value);
	else
		snprintf(what, sizeof(what), "changed (was %s, now %s)", old_value, new_value);
	log_warning("reload: %s %s: it takes effect when the node restarts", where, what);
}

void reload_config(const struct ftvm_config *running)
{
	struct ftvm_config *fresh = NULL;
	unsigned changes = 0;
	char err[512];
	int level;

	if (config_load(running->path, &fresh, err, sizeof(err)) < 0 ||
	    config_load_key(fresh, err, sizeof(err)) < 0) {
		log_error("reload: %s; the node goes on as it is", err);
		config_free(fresh);
		return;
	}
	level = log_get_max_level();
	if (fresh->log_level != level) {
		changes++;
		/* Said under the more verbose of the two, so that it shows. */
		log_set_max_level(fresh->log_level > level ? fresh->log_level : level);
		log_info("reload: log_level %s, was %s", log_level_name(fresh->log_level),
			 log_level_name(level));
		log_set_max_level(fresh->log_level);
	}
	config_diff(running, fresh, on_change, &changes);
	if (!changes)
		log_info("reload: %s: nothing changed", running->path);
	config_free(fresh);
}
