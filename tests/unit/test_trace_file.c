/* Trace files (common/trace_file.h, common/TRACE.md): round trips through a
 * real file, the torn tail a crash leaves, and every way a file can be bad,
 * each named with file, record number and problem. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "crc32c.h"
#include "trace_file.h"

static char dir[] = "/tmp/ftvm-test-trace.XXXXXX";
static char path[256];

static uint8_t *slurp(const char *p, size_t *ret_len)
{
	FILE *f = fopen(p, "rb");
	struct stat st;
	uint8_t *buf;

	if (!f || fstat(fileno(f), &st) < 0)
		die("open trace");
	buf = xmalloc((size_t)st.st_size + 1);
	if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
		die("read trace");
	fclose(f);
	*ret_len = (size_t)st.st_size;
	return buf;
}

static void write_sample(void)
{
	struct trace_writer *w;
	uint8_t big[5000];

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)rng();
	unlink(path);
	CHECK_INT("create", 0,
		  trace_writer_create(path, "protocol=1\nnode=b\npage_size=4096\n", &w));
	CHECK_INT("append 1", 0,
		  trace_writer_append(w, TRACE_CHANNEL_PARTNER, TRACE_IN, "a", "\x08\x01", 2));
	CHECK_INT("append 2", 0,
		  trace_writer_append(w, TRACE_CHANNEL_CLIENT, TRACE_OUT, "client 1 pid 7", big,
				      sizeof(big)));
	CHECK_INT("append 3 (empty payload)", 0,
		  trace_writer_append(w, TRACE_CHANNEL_PARTNER, TRACE_OUT, "", "", 0));
	CHECK_INT("records", 3, trace_writer_records(w));
	CHECK_INT("close", 0, trace_writer_close(w));
}

static void test_round_trip(void)
{
	struct trace_reader *r;
	struct trace_record rec;
	const char *k, *v;
	char err[512] = "";
	uint64_t last_t = 0;

	write_sample();
	CHECK_INT("open", 0, trace_reader_open(path, &r, err, sizeof(err)));
	if (failures)
		return;
	CHECK_INT("version", TRACE_FORMAT_VERSION, trace_reader_format_version(r));
	CHECK_STR("node", "b", trace_reader_header_get(r, "node"));
	CHECK_STR("page_size", "4096", trace_reader_header_get(r, "page_size"));
	CHECK(trace_reader_header_get(r, "started_monotonic_us"), "writer adds its time base");
	CHECK(!trace_reader_header_get(r, "nothing"), "absent key");
	CHECK_INT("header entries", 4, trace_reader_header_count(r));
	trace_reader_header_entry(r, 1, &k, &v);
	CHECK_STR("entry 1 key", "node", k);
	CHECK_STR("entry 1 value", "b", v);

	CHECK_INT("record 1", 1, trace_reader_next(r, &rec, err, sizeof(err)));
	CHECK_INT("number", 1, rec.number);
	CHECK_INT("channel", TRACE_CHANNEL_PARTNER, rec.channel);
	CHECK_INT("direction", TRACE_IN, rec.direction);
	CHECK_STR("peer", "a", rec.peer);
	CHECK(rec.len == 2 && memcmp(rec.payload, "\x08\x01", 2) == 0, "payload 1");
	last_t = rec.t_us;
	CHECK_INT("record 2", 1, trace_reader_next(r, &rec, err, sizeof(err)));
	CHECK_INT("len 2", 5000, rec.len);
	CHECK_STR("peer 2", "client 1 pid 7", rec.peer);
	CHECK_INT("channel 2", TRACE_CHANNEL_CLIENT, rec.channel);
	CHECK(rec.t_us >= last_t, "time is monotonic");
	CHECK_INT("record 3", 1, trace_reader_next(r, &rec, err, sizeof(err)));
	CHECK_INT("len 3", 0, rec.len);
	CHECK_STR("peer 3", "", rec.peer);
	CHECK_INT("end", 0, trace_reader_next(r, &rec, err, sizeof(err)));
	CHECK_INT("no torn tail", 0, trace_reader_torn(r));
	trace_reader_free(r);
}

static void test_exists(void)
{
	struct trace_writer *w;

	write_sample();
	CHECK_INT("create over a file", -EEXIST, trace_writer_create(path, "node=b\n", &w));
}

/* Every cut inside the records reads the whole ones and stops, clean. */
static void test_torn_tail(void)
{
	size_t len, whole = 0;
	uint8_t *data;

	write_sample();
	data = slurp(path, &len);
	for (size_t cut = len; cut > 0; cut--) {
		struct trace_reader *r;
		struct trace_record rec;
		char err[512] = "";
		int n = 0, rc;

		if (trace_reader_open_mem(path, data, cut, &r, err, sizeof(err)) < 0) {
			CHECK(strstr(err, "record 0:") != NULL, "header error names record 0: %s",
			      err);
			whole = whole ? whole : cut;
			continue;
		}
		while ((rc = trace_reader_next(r, &rec, err, sizeof(err))) == 1)
			n++;
		CHECK_INT("a cut trace reads cleanly", 0, rc);
		if (cut == len)
			CHECK_INT("whole file", 3, n);
		else
			CHECK(n < 3, "cut at %zu: %d records", cut, n);
		trace_reader_free(r);
	}
	CHECK(whole > 0, "a cut inside the header is an error");
	free(data);
}

static void expect_bad(const char *what, const uint8_t *data, size_t len, const char *want)
{
	struct trace_reader *r;
	struct trace_record rec;
	char err[512] = "";
	int rc;

	rc = trace_reader_open_mem("t.trace", data, len, &r, err, sizeof(err));
	if (rc == 0) {
		while ((rc = trace_reader_next(r, &rec, err, sizeof(err))) == 1)
			;
		trace_reader_free(r);
	}
	CHECK_INT(what, -EBADMSG, rc);
	CHECK(strncmp(err, "t.trace: record ", 16) == 0, "%s: names file and record: %s", what,
	      err);
	CHECK(strstr(err, want) != NULL, "%s: says '%s': %s", what, want, err);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Fixes the header's checksum after a change to its text. */
static void reseal_header(uint8_t *data)
{
	uint32_t text_len = (uint32_t)data[12] << 24 | (uint32_t)data[13] << 16 |
			    (uint32_t)data[14] << 8 | data[15];

	put32(data + 16 + text_len, crc32c(0, data, 16 + text_len));
}

static void test_bad(void)
{
	size_t len, hdr_end;
	uint8_t *data, *copy;
	uint32_t text_len;

	write_sample();
	data = slurp(path, &len);
	copy = xmalloc(len);
	text_len = (uint32_t)data[12] << 24 | (uint32_t)data[13] << 16 | (uint32_t)data[14] << 8 |
		   data[15];
	hdr_end = 16 + text_len + 4;

	expect_bad("empty file", data, 0, "too short");
	memcpy(copy, data, len);
	memcpy(copy, "GIF89a\0\0", 8);
	expect_bad("foreign file", copy, len, "not an ftvm trace");
	memcpy(copy, data, len);
	copy[9] = 2;
	expect_bad("wrong version", copy, len, "format version 2");
	memcpy(copy, data, len);
	copy[20] ^= 1;
	expect_bad("header bit flip", copy, len, "header checksum");
	memcpy(copy, data, len);
	memcpy(copy + 16, "protocol=1\nprotocol=1\n", 22);
	reseal_header(copy);
	expect_bad("repeated key", copy, len, "given twice");
	memcpy(copy, data, len);
	copy[16 + 8] = '\n'; /* "protocol" then a line without '=' */
	reseal_header(copy);
	expect_bad("not key=value", copy, len, "not key=value");

	/* Each bit of the first record's bytes flipped: caught by its checksum
	 * or its length, never returned as a record. */
	for (size_t i = hdr_end; i < hdr_end + 16 + 1 + 2 + 4; i++) { /* head, peer, payload, crc */
		for (int bit = 0; bit < 8; bit++) {
			struct trace_reader *r;
			struct trace_record rec;
			char err[512] = "";
			int rc;

			memcpy(copy, data, len);
			copy[i] ^= (uint8_t)(1u << bit);
			if (trace_reader_open_mem("t.trace", copy, len, &r, err, sizeof(err)) < 0)
				die("header changed");
			rc = trace_reader_next(r, &rec, err, sizeof(err));
			CHECK(rc == -EBADMSG || (rc == 0 && trace_reader_torn(r) > 0),
			      "flip at %zu bit %d: %d", i, bit, rc);
			if (rc == -EBADMSG)
				CHECK(strstr(err, "record 1:") != NULL, "names record 1: %s", err);
			trace_reader_free(r);
		}
	}
	/* The second record corrupt: the first still reads, the error names 2. */
	memcpy(copy, data, len);
	copy[len - 20 - 10] ^= 0x40; /* in record 2; record 3 is the last 20 bytes */
	{
		struct trace_reader *r;
		struct trace_record rec;
		char err[512] = "";

		if (trace_reader_open_mem("t.trace", copy, len, &r, err, sizeof(err)) < 0)
			die("open");
		CHECK_INT("record 1 still reads", 1, trace_reader_next(r, &rec, err, sizeof(err)));
		CHECK_INT("record 2 is bad", -EBADMSG,
			  trace_reader_next(r, &rec, err, sizeof(err)));
		CHECK(strstr(err, "t.trace: record 2: checksum mismatch") != NULL, "%s", err);
		trace_reader_free(r);
	}
	free(copy);
	free(data);
}

static void test_missing(void)
{
	struct trace_reader *r;
	char err[512] = "";

	CHECK_INT("missing file", -ENOENT,
		  trace_reader_open("/nonexistent/x.trace", &r, err, sizeof(err)));
	CHECK(strstr(err, "/nonexistent/x.trace") != NULL, "names the file: %s", err);
	CHECK_INT("directory", -EINVAL, trace_reader_open("/tmp", &r, err, sizeof(err)));
}

int main(void)
{
	if (!mkdtemp(dir))
		die("mkdtemp");
	snprintf(path, sizeof(path), "%s/t.trace", dir);
	rng_seed(6);
	test_round_trip();
	test_exists();
	test_torn_tail();
	test_bad();
	test_missing();
	unlink(path);
	rmdir(dir);
	printf("%d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
