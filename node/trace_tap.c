/* Recording (trace_tap.h). Every call runs on the event loop: one writev per
 * record, no thread, no buffer of our own (TRACE.md, "Recording"). */
#include "trace_tap.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftvm_build.h"
#include "log.h"
#include "partner.pb-c.h"
#include "trace_file.h"

#define LOG_SUBSYSTEM "trace"

struct trace_tap {
	struct trace_writer *writer;
	char *path;
	int channels;
	bool failed; /* a write failed: recording stopped, said once */
};

static int header_text(const struct ftvm_config *c, const char *partner_id, int channels,
		       char **ret)
{
	char stamp[64] = "", *text = NULL;
	size_t len = 0;
	struct tm tm;
	time_t now = time(NULL);
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return -ENOMEM;
	if (gmtime_r(&now, &tm))
		strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	fprintf(f, "protocol=%d\n", FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
	fprintf(f, "node=%s\n", c->id);
	if (partner_id[0])
		fprintf(f, "partner=%s\n", partner_id);
	fprintf(f, "partner_endpoint=%s\n", c->partner);
	fprintf(f, "page_size=%" PRIu32 "\n", c->page_size);
	fprintf(f, "memory_size=%" PRIu64 "\n", c->memory_size);
	fprintf(f, "store_size=%" PRIu64 "\n", c->store_size);
	fprintf(f, "heartbeat_ms=%" PRIu32 "\n", c->heartbeat_ms);
	fprintf(f, "dead_after_ms=%" PRIu32 "\n", c->dead_after_ms);
	fprintf(f, "request_timeout_ms=%" PRIu32 "\n", c->request_timeout_ms);
	fprintf(f, "solo=%s\n", c->solo_refuse ? "refuse" : "serve");
	for (size_t i = 0; i < c->n_policies; i++)
		fprintf(f, "policy.%s=%" PRIu32 "\n", c->policies[i].name,
			c->policies[i].block_size);
	fprintf(f, "channels=%s\n", config_trace_channels_name(channels));
	fprintf(f, "ftvmd_version=%s\n", FTVM_VERSION);
	fprintf(f, "started_realtime=%s\n", stamp);
	if (fclose(f) != 0) {
		free(text);
		return -ENOMEM;
	}
	*ret = text;
	return 0;
}

int trace_tap_start(const struct ftvm_config *config, const char *partner_id, const char *path,
		    int channels, struct trace_tap **ret)
{
	struct trace_tap *t = calloc(1, sizeof(*t));
	char *text = NULL;
	int r;

	if (!t)
		return -ENOMEM;
	t->channels = channels;
	t->path = strdup(path);
	r = t->path ? header_text(config, partner_id, channels, &text) : -ENOMEM;
	if (r < 0)
		goto fail;
	r = trace_writer_create(path, text, &t->writer);
	free(text);
	if (r < 0)
		goto fail;
	*ret = t;
	return 0;
fail:
	free(t->path);
	free(t);
	return r;
}

static void append(struct trace_tap *t, enum trace_channel channel, bool out, const char *peer,
		   const uint8_t *payload, size_t len)
{
	int r;

	if (t->failed)
		return;
	r = trace_writer_append(t->writer, channel, out ? TRACE_OUT : TRACE_IN, peer, payload, len);
	if (r < 0) {
		t->failed = true;
		log_warning_errno(r, "trace %s: cannot write record %" PRIu64 ", recording stopped",
				  t->path, trace_writer_records(t->writer) + 1);
	}
}

void trace_tap_partner(struct trace_tap *t, bool out, const char *peer, const uint8_t *payload,
		       size_t len)
{
	if (t->channels & CONFIG_TRACE_PARTNER)
		append(t, TRACE_CHANNEL_PARTNER, out, peer, payload, len);
}

void trace_tap_client(struct trace_tap *t, uint64_t client_id, pid_t pid, bool out,
		      const uint8_t *payload, size_t len)
{
	char peer[64];

	if (!(t->channels & CONFIG_TRACE_CLIENT))
		return;
	snprintf(peer, sizeof(peer), "client %" PRIu64 " pid %ld", client_id, (long)pid);
	append(t, TRACE_CHANNEL_CLIENT, out, peer, payload, len);
}

const char *trace_tap_path(const struct trace_tap *t)
{
	return t->path;
}

int64_t trace_tap_stop(struct trace_tap *t)
{
	uint64_t records = trace_writer_records(t->writer);
	int r = trace_writer_close(t->writer);

	free(t->path);
	free(t);
	return r < 0 ? r : (int64_t)records;
}
