/* Logging to stderr with journald priority prefixes ("<3>"), so journald keeps
 * the level when ftvmd runs under systemd and a terminal still reads well. */
#pragma once

#include <stdarg.h>
#include <syslog.h>

enum log_level {
	LOG_LEVEL_ERROR = LOG_ERR,
	LOG_LEVEL_WARNING = LOG_WARNING,
	LOG_LEVEL_INFO = LOG_INFO,
	LOG_LEVEL_DEBUG = LOG_DEBUG,
};

void log_set_max_level(int level);
/* Every warning and error logged from now on by the calling thread also
 * goes to fn (the node's event stream: node/EVENTS.md), with the line as
 * logged; lines other threads log do not. fn NULL: none. fn's own logging
 * does not reach it again. */
typedef void (*log_sink_fn)(int level, const char *subsystem, const char *line, void *arg);
void log_set_sink(log_sink_fn fn, void *arg);
int log_get_max_level(void);
/* Parses "error", "warning", "info", "debug"; -EINVAL otherwise. */
int log_level_from_string(const char *s);
/* The name log_level_from_string takes for level; "unknown" for none. */
const char *log_level_name(int level);

void log_printf(int level, const char *subsystem, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Logs with ": <strerror(-r)>" appended and returns r (r < 0). */
int log_printf_errno(int level, int r, const char *subsystem, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Each file that logs defines LOG_SUBSYSTEM ("session", "tcp", ...) first. */
#define log_error(...) log_printf(LOG_LEVEL_ERROR, LOG_SUBSYSTEM, __VA_ARGS__)
#define log_warning(...) log_printf(LOG_LEVEL_WARNING, LOG_SUBSYSTEM, __VA_ARGS__)
#define log_info(...) log_printf(LOG_LEVEL_INFO, LOG_SUBSYSTEM, __VA_ARGS__)
#define log_debug(...) log_printf(LOG_LEVEL_DEBUG, LOG_SUBSYSTEM, __VA_ARGS__)
#define log_error_errno(r, ...) log_printf_errno(LOG_LEVEL_ERROR, (r), LOG_SUBSYSTEM, __VA_ARGS__)
#define log_warning_errno(r, ...) \
	log_printf_errno(LOG_LEVEL_WARNING, (r), LOG_SUBSYSTEM, __VA_ARGS__)
#define log_debug_errno(r, ...) log_printf_errno(LOG_LEVEL_DEBUG, (r), LOG_SUBSYSTEM, __VA_ARGS__)
