/* Starting ftvmd by hand, for ftvmctl's drills (a node started again) and
 * trace replays (a fresh node or pair). */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* The ftvmd to run: given (--ftvmd) when not NULL, else the one installed
 * beside ftvmctl, else the build tree's (../node/ftvmd). */
int ftvmd_find(const char *given, char *buf, size_t len);

/* Starts ftvmd --config config_path in a session of its own, its output
 * appended to log_path. *ret_pid (may be NULL) is its pid. */
int ftvmd_spawn(const char *ftvmd, const char *config_path, const char *log_path, pid_t *ret_pid);
