/* ftvmctl trace dump FILE [--json] (common/TRACE.md, "Dump"). */
#pragma once

#include <stdbool.h>

/* Prints the trace; returns ftvmctl's exit code: 0 when every record read
 * (a torn tail is a warning), 1 for a bad file or record, said on stderr. */
int trace_dump_run(const char *path, bool json);

struct trace_reader;
/* The warning for a trace a crash cut short, on stderr; next_record is the
 * number the torn record would have had. */
void trace_warn_torn(const struct trace_reader *r, unsigned long long next_record);
