/* libFuzzer target: a trace file (common/TRACE.md) as ftvmctl trace dump and
 * replay read it. The reader must never crash, must end in a record count,
 * a clean end or an error naming the file and record, and must never hand
 * out a record that reaches past the input. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "fuzz_util.h"
#include "trace_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trace_reader *r;
	struct trace_record rec;
	uint64_t expect = 1;
	char err[512];
	int rc;

	data = fuzz_data(data);
	err[0] = '\0';
	rc = trace_reader_open_mem("fuzz.trace", data, size, &r, err, sizeof(err));
	if (rc < 0) {
		if ((rc != -EBADMSG && rc != -ENOMEM) || strncmp(err, "fuzz.trace: ", 12) != 0)
			abort();
		return 0;
	}
	for (size_t i = 0; i < trace_reader_header_count(r); i++) {
		const char *k, *v;

		trace_reader_header_entry(r, i, &k, &v);
		if (!k[0] || trace_reader_header_get(r, k) != v)
			abort();
	}
	while ((rc = trace_reader_next(r, &rec, err, sizeof(err))) == 1) {
		if (rec.number != expect++ || rec.len > size || strlen(rec.peer) > TRACE_PEER_MAX)
			abort();
		/* Read every byte: ASan catches a record reaching past the reader's
		 * copy of the input. */
		(void)crc32c(0, rec.payload, rec.len);
	}
	if (rc < 0 && (rc != -EBADMSG || strncmp(err, "fuzz.trace: record ", 19) != 0))
		abort();
	trace_reader_free(r);
	return 0;
}
