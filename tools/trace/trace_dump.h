/* ftvmctl trace dump FILE [--json] (common/TRACE.md, "Dump"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Prints the trace; returns ftvmctl's exit code: 0 when every record read
 * (a torn tail is a warning), 1 for a bad file or record, said on stderr. */
int trace_dump_run(const char *path, bool json);

struct trace_reader;
struct trace_record;

/* Reads the trace at path: header(), then record() for each record until one
 * fails (-EBADMSG with why). Problems are said on stderr naming file and
 * record, a torn tail as a warning. Returns ftvmctl's exit code (0, 1). */
int trace_walk(const char *path, void (*header)(const struct trace_reader *r, void *arg),
	       int (*record)(const struct trace_record *rec, void *arg, char *why, size_t len),
	       void *arg);

/* One record as dump prints it (a Batch's envelopes on lines of their own),
 * each line starting with prefix. -EBADMSG with err when it does not decode. */
int trace_dump_record(FILE *f, const char *prefix, const struct trace_record *rec, bool json,
		      char *err, size_t err_len);

/* The warning for a trace a crash cut short, on stderr; next_record is the
 * number the torn record would have had. */
void trace_warn_torn(const struct trace_reader *r, unsigned long long next_record);
