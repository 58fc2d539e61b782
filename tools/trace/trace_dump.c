/* trace_dump.h: one line (or JSON object) per record, a Batch's envelopes
 * each on a line of their own under it. */
#include "trace_dump.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "partner.pb-c.h"
#include "trace_file.h"
#include "trace_message.h"
#include "trace_render.h"

void trace_warn_torn(const struct trace_reader *r, unsigned long long next_record)
{
	if (trace_reader_torn(r))
		fprintf(stderr,
			"ftvmctl: warning: %s: record %llu: torn: the file ends %zu bytes into it "
			"(a crash while recording); the trace ends at record %llu\n",
			trace_reader_name(r), next_record, trace_reader_torn(r), next_record - 1);
}

static const Ftvm__Partner__Batch *batch_of(const ProtobufCMessage *m)
{
	const Ftvm__Partner__Envelope *env = (const Ftvm__Partner__Envelope *)m;

	if (m->descriptor != &ftvm__partner__envelope__descriptor ||
	    env->message_case != FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH)
		return NULL;
	return env->batch;
}

/* The text dump only: INTERFACES.md makes --json one object per record. */
static void print_header(const struct trace_reader *r)
{
	printf("# ftvm trace %s, format %u\n", trace_reader_name(r),
	       trace_reader_format_version(r));
	for (size_t i = 0; i < trace_reader_header_count(r); i++) {
		const char *k, *v;

		trace_reader_header_entry(r, i, &k, &v);
		printf("# %s=%s\n", k, v);
	}
}

static json_object *json_message(json_object *o, const ProtobufCMessage *m)
{
	json_object_object_add(o, "type", json_object_new_string(trace_message_type(m)));
	json_object_object_add(o, "message", trace_render_json(m));
	return o;
}

/* The envelopes of a batch, decoded; -EBADMSG names the one at fault. */
static int print_batch(FILE *f, const char *prefix, const struct trace_record *rec,
		       const Ftvm__Partner__Batch *b, json_object *json_list, char *err,
		       size_t err_len)
{
	for (size_t i = 0; i < b->n_envelopes; i++) {
		ProtobufCMessage *inner;
		char why[200];

		if (trace_message_decode_envelope(b->envelopes[i].data, b->envelopes[i].len, &inner,
						  why, sizeof(why)) < 0) {
			snprintf(err, err_len, "envelope %zu of its batch does not decode: %s",
				 i + 1, why);
			return -EBADMSG;
		}
		if (json_list) {
			json_object_array_add(json_list,
					      json_message(json_object_new_object(), inner));
		} else {
			fprintf(f, "%s%6" PRIu64 ".%-3zu %*s", prefix, rec->number, i + 1, 30, "");
			trace_render_text(f, inner);
			fputc('\n', f);
		}
		trace_message_free(inner);
	}
	return 0;
}

int trace_dump_record(FILE *f, const char *prefix, const struct trace_record *rec, bool json,
		      char *err, size_t err_len)
{
	ProtobufCMessage *m;
	const Ftvm__Partner__Batch *b;
	json_object *o = NULL, *list = NULL;
	int r;

	r = trace_message_decode(rec, &m, err, err_len);
	if (r < 0)
		return r;
	b = batch_of(m);
	if (json) {
		o = json_object_new_object();
		json_object_object_add(o, "record", json_object_new_uint64(rec->number));
		json_object_object_add(o, "t_us", json_object_new_uint64(rec->t_us));
		json_object_object_add(o, "channel",
				       json_object_new_string(trace_channel_name(rec->channel)));
		json_object_object_add(
			o, "direction",
			json_object_new_string(trace_direction_name(rec->direction)));
		json_object_object_add(o, "peer", json_object_new_string(rec->peer));
		json_message(o, m);
		if (b) {
			list = json_object_new_array();
			json_object_object_add(o, "batch", list);
		}
	} else {
		fprintf(f, "%s%6" PRIu64 " %11.6f %-7s %-3s %-16s ", prefix, rec->number,
			(double)rec->t_us / 1e6, trace_channel_name(rec->channel),
			trace_direction_name(rec->direction), rec->peer);
		if (b)
			fprintf(f, "Batch of %zu\n", b->n_envelopes);
		else
			trace_render_text(f, m);
		if (!b)
			fputc('\n', f);
	}
	if (b)
		r = print_batch(f, prefix, rec, b, list, err, err_len);
	if (o && r == 0)
		fprintf(f, "%s\n",
			json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
								  JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	trace_message_free(m);
	return r;
}

int trace_walk(const char *path, void (*header)(const struct trace_reader *r, void *arg),
	       int (*record)(const struct trace_record *rec, void *arg, char *why, size_t len),
	       void *arg)
{
	struct trace_reader *r;
	struct trace_record rec;
	char err[512], why[300];
	uint64_t last = 0;
	int rc;

	if (trace_reader_open(path, &r, err, sizeof(err)) < 0) {
		fprintf(stderr, "ftvmctl: %s\n", err);
		return 1;
	}
	header(r, arg);
	while ((rc = trace_reader_next(r, &rec, err, sizeof(err))) == 1) {
		last = rec.number;
		if (record(&rec, arg, why, sizeof(why)) < 0) {
			snprintf(err, sizeof(err), "%s: record %" PRIu64 ": %s", path, rec.number,
				 why);
			rc = -EBADMSG;
			break;
		}
	}
	fflush(stdout);
	if (rc < 0)
		fprintf(stderr, "ftvmctl: %s\n", err);
	else
		trace_warn_torn(r, last + 1);
	trace_reader_free(r);
	return rc < 0 ? 1 : 0;
}

static void dump_header(const struct trace_reader *r, void *arg)
{
	if (!*(bool *)arg)
		print_header(r);
}

static int dump_record(const struct trace_record *rec, void *arg, char *why, size_t len)
{
	return trace_dump_record(stdout, "", rec, *(bool *)arg, why, len);
}

int trace_dump_run(const char *path, bool json)
{
	return trace_walk(path, dump_header, dump_record, &json);
}
