#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int max_level = LOG_LEVEL_INFO;
static log_sink_fn sink;
static void *sink_arg;
static pthread_t sink_thread;
static bool in_sink;

void log_set_sink(log_sink_fn fn, void *arg)
{
	sink = fn;
	sink_arg = arg;
	sink_thread = pthread_self();
}

void log_set_max_level(int level)
{
	max_level = level;
}

int log_get_max_level(void)
{
	return max_level;
}

static const struct {
	const char *name;
	int level;
} levels[] = {
	{ "error", LOG_LEVEL_ERROR },
	{ "warning", LOG_LEVEL_WARNING },
	{ "info", LOG_LEVEL_INFO },
	{ "debug", LOG_LEVEL_DEBUG },
};

int log_level_from_string(const char *s)
{
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
		if (strcmp(s, levels[i].name) == 0)
			return levels[i].level;
	return -EINVAL;
}

const char *log_level_name(int level)
{
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
		if (levels[i].level == level)
			return levels[i].name;
	return "unknown";
}

__attribute__((format(printf, 4, 0))) static void
log_vprintf(int level, const char *subsystem, const char *suffix, const char *fmt, va_list ap)
{
	char msg[2048];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* One fprintf per line so lines from concurrent writers do not interleave. */
	fprintf(stderr, "<%d>%s: %s%s\n", level, subsystem, msg, suffix ? suffix : "");
	if (sink && level <= LOG_LEVEL_WARNING && pthread_equal(pthread_self(), sink_thread) &&
	    !in_sink) {
		if (suffix)
			strncat(msg, suffix, sizeof(msg) - strlen(msg) - 1);
		in_sink = true;
		sink(level, subsystem, msg, sink_arg);
		in_sink = false;
	}
}

void log_printf(int level, const char *subsystem, const char *fmt, ...)
{
	va_list ap;

	if (level > max_level)
		return;
	va_start(ap, fmt);
	log_vprintf(level, subsystem, NULL, fmt, ap);
	va_end(ap);
}

int log_printf_errno(int level, int r, const char *subsystem, const char *fmt, ...)
{
	char suffix[256];
	va_list ap;

	if (level > max_level)
		return r;
	snprintf(suffix, sizeof(suffix), ": %s", strerror(r < 0 ? -r : r));
	va_start(ap, fmt);
	log_vprintf(level, subsystem, suffix, fmt, ap);
	va_end(ap);
	return r;
}
