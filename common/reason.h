/* Errors returned with a reason in a caller's buffer: the convention of the
 * modules that report why as well as what (a negative errno). */
#pragma once

#include <stddef.h>

/* Writes the reason into reason (when it is not NULL and reason_len > 0) and
 * returns r. */
__attribute__((format(printf, 4, 5))) int reason_fail(char *reason, size_t reason_len, int r,
						      const char *fmt, ...);
