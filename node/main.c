/* ftvmd: one node of an ftvm pair. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>

#include "build_info.h"
#include "config.h"
#include "log.h"
#include "node.h"

#define LOG_SUBSYSTEM "ftvmd"

static void usage(FILE *out)
{
	fprintf(out, "Usage: ftvmd --config FILE [--check]\n"
		     "Runs one node of an ftvm pair.\n\n"
		     "  -c, --config FILE  the node's configuration (INI, see ftvm.conf(5))\n"
		     "      --check        validate the configuration and exit\n"
		     "  -h, --help         show this help\n"
		     "      --version      show the version and the features built in\n");
}

/* Precise timers: libevent's default coarse clock can fire a deadline or a
 * dead-partner check a few milliseconds early. Three priorities: events
 * take the middle one; the lowest runs only in a turn with nothing else
 * active (the page table's idle fold, node/vmm/vmm.c). */
static struct event_base *new_event_base(void)
{
	struct event_config *cfg = event_config_new();
	struct event_base *base;

	if (!cfg)
		return NULL;
	event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (base && event_base_priority_init(base, 3) < 0) {
		event_base_free(base);
		return NULL;
	}
	return base;
}

/* A page write allocates its op with room for one or two blocks, and the
 * frame reader a buffer for the message, and frees them a round trip later.
 * With glibc's defaults (allocations from 128 KiB up mmap'd until a free
 * raises that threshold, and the heap's top given back past twice it) a
 * write of a 64 KiB block either mapped and unmapped its op, or grew the
 * heap and trimmed it again: in some runs 33 page faults and two brk() on a
 * node per write, and two to three times the latency (tools/BENCHMARKS.md).
 * Allocations up to four of the largest block (1 MiB at least) come from the
 * heap, and its top is kept up to twice that. */
static void tune_malloc(const struct ftvm_config *c)
{
	size_t block = c->page_size, heap_max;

	for (size_t i = 0; i < c->n_policies; i++)
		if (c->policies[i].block_size > block)
			block = c->policies[i].block_size;
	heap_max = 4 * block;
	if (heap_max < (1u << 20))
		heap_max = 1u << 20;
	if (heap_max > (32u << 20)) /* glibc's largest mmap threshold */
		heap_max = 32u << 20;
	if (!mallopt(M_MMAP_THRESHOLD, (int)heap_max) ||
	    !mallopt(M_TRIM_THRESHOLD, (int)(2 * heap_max)))
		log_warning("malloc tuning refused: page writes may map and trim memory each");
}

int main(int argc, char **argv)
{
	enum {
		OPT_CHECK = 0x100,
		OPT_VERSION
	};
	static const struct option options[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, OPT_CHECK },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ 0 },
	};
	const char *config_path = NULL;
	struct ftvm_config *config = NULL;
	struct event_base *base = NULL;
	struct node *node = NULL;
	bool check = false;
	char err[512];
	int c, r;

	while ((c = getopt_long(argc, argv, "c:h", options, NULL)) != -1) {
		switch (c) {
		case 'c':
			config_path = optarg;
			break;
		case OPT_CHECK:
			check = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case OPT_VERSION:
			build_info_print(stdout, "ftvmd");
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!config_path || optind != argc) {
		fprintf(stderr, "ftvmd: %s\n",
			config_path ? "unexpected arguments" : "--config FILE is required");
		usage(stderr);
		return 2;
	}

	r = config_load(config_path, &config, err, sizeof(err));
	if (r == 0)
		r = config_load_key(config, err, sizeof(err));
	if (r < 0) {
		log_error("%s", err);
		config_free(config);
		return 1;
	}
	log_set_max_level(config->log_level);
	if (check) {
		printf("%s: ok (node %s)\n", config_path, config->id);
		config_free(config);
		return 0;
	}

	tune_malloc(config);
	/* A partner that vanishes mid-write must not kill us with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	/* A SIGHUP before the node serves (a long page-in) is let go; from
	 * then on it reloads the configuration (node/reload.h). */
	signal(SIGHUP, SIG_IGN);
	base = new_event_base();
	if (!base) {
		log_error("cannot create the event loop");
		r = -ENOMEM;
		goto out;
	}
	r = node_new(base, config, &node);
	if (r < 0)
		goto out;
	r = node_run(node);
out:
	node_free(node);
	if (base)
		event_base_free(base);
	config_free(config);
	if (r == 0)
		log_info("stopped");
	return r < 0 ? 1 : 0;
}
