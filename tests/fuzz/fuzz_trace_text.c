/* libFuzzer target: the text form of a trace (tools/trace/trace_text.c), as
 * `ftvmctl trace binary TEXT OUT` reads it: each input is the TEXT file, run
 * through trace_binary_run() into OUT, both in a scratch directory in /tmp.
 *
 * Nothing may crash or leak. A text that converts makes a binary trace that
 * the trace reader (common/trace_file.c) takes whole, with no torn tail and
 * one record per "record" line; a text that is refused leaves no OUT behind,
 * as trace_text.h promises. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "trace_file.h"
#include "trace_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *in_path, *out_path;

/* Lines of the text that start a record: what the binary file must hold. */
static uint64_t record_lines(const uint8_t *data, size_t size)
{
	static const char word[] = "record ";
	uint64_t n = 0;

	for (size_t i = 0; i + sizeof(word) - 1 <= size; i++)
		if ((i == 0 || data[i - 1] == '\n') &&
		    memcmp(data + i, word, sizeof(word) - 1) == 0)
			n++;
	return n;
}

static void check_binary(uint64_t want_records)
{
	struct trace_reader *r;
	struct trace_record rec;
	uint64_t n = 0;
	char err[512];
	int rc;

	if (trace_reader_open(out_path, &r, err, sizeof(err)) < 0)
		abort();
	if (trace_reader_format_version(r) != TRACE_FORMAT_VERSION)
		abort();
	while ((rc = trace_reader_next(r, &rec, err, sizeof(err))) == 1)
		n++;
	if (rc != 0 || trace_reader_torn(r) != 0 || n != want_records)
		abort();
	trace_reader_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!in_path) {
		in_path = fuzz_tmp_path("in.txt");
		out_path = fuzz_tmp_path("out.trace");
	}
	data = fuzz_data(data);
	fuzz_write_file(in_path, data, size);
	if (trace_binary_run(in_path, out_path) == 0) {
		check_binary(record_lines(data, size));
		if (unlink(out_path) < 0)
			abort();
	} else if (access(out_path, F_OK) == 0 || errno != ENOENT) {
		abort();
	}
	return 0;
}
