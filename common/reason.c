#include "reason.h"

#include <stdarg.h>
#include <stdio.h>

int reason_fail(char *reason, size_t reason_len, int r, const char *fmt, ...)
{
	va_list ap;

	if (reason && reason_len) {
		va_start(ap, fmt);
		vsnprintf(reason, reason_len, fmt, ap);
		va_end(ap);
	}
	return r;
}
