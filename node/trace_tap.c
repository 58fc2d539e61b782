/* Recording (trace_tap.h; TRACE.md, "Recording"). The event loop only
 * encodes each record into a buffer (a copy and a checksum); a thread of the
 * trace's own writes the buffer out, so the file system's cost of a write
 * (about 9 us for a 4 KiB record on ext4 here, against 0.3 us for the copy)
 * stays off the messages' path, and the thread writes in batches
 * (TAP_BATCH, or what came in TAP_LINGER_MS), which costs the machine far
 * less than a write per record. The loop waits only when the thread is
 * TAP_BUFFER_MAX behind: a trace loses nothing while the node runs.
 *
 *   loop:   encode into fill ──signal──> thread: swap fill and its own
 *                                                 buffer, write(2) it out */
#include "trace_tap.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftvm_build.h"
#include "log.h"
#include "partner.pb-c.h"
#include "trace_file.h"

#define LOG_SUBSYSTEM "trace"
#define TAP_BUFFER_MAX (16u << 20)
/* The thread writes when this much is waiting, or the oldest record waited
 * TAP_LINGER_MS. */
#define TAP_BATCH (64u << 10)
#define TAP_LINGER_MS 2

struct trace_tap {
	struct trace_writer *writer;
	char *path;
	int channels;
	uint64_t records; /* encoded so far */

	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;	/* the thread: there is work, or stop */
	pthread_cond_t drained; /* the loop: the buffer has room again */
	/* Under lock: */
	uint8_t *fill; /* records encoded, not yet taken by the thread */
	size_t fill_len, fill_cap;
	uint64_t fill_records;
	struct timespec fill_since; /* when fill got its first record (monotonic) */
	bool stopping;
	int error; /* the first write error: recording stopped */
};

static void *writer_thread(void *arg)
{
	struct trace_tap *t = arg;
	uint8_t *buf = NULL;
	size_t cap = 0;

	pthread_mutex_lock(&t->lock);
	for (;;) {
		uint8_t *out;
		size_t len, out_cap;
		uint64_t n;
		bool failed;
		int r;

		while (!t->fill_len && !t->stopping)
			pthread_cond_wait(&t->wake, &t->lock);
		if (!t->fill_len)
			break; /* stopping, everything written */
		if (t->fill_len < TAP_BATCH && !t->stopping) {
			struct timespec until = t->fill_since;

			until.tv_nsec += TAP_LINGER_MS * 1000000L;
			if (until.tv_nsec >= 1000000000L) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000L;
			}
			while (t->fill_len < TAP_BATCH && !t->stopping &&
			       pthread_cond_timedwait(&t->wake, &t->lock, &until) == 0)
				;
		}
		/* Take the filled buffer, leave ours (emptied) to be filled. */
		out = t->fill;
		out_cap = t->fill_cap;
		len = t->fill_len;
		n = t->fill_records;
		t->fill = buf;
		t->fill_cap = cap;
		t->fill_len = 0;
		t->fill_records = 0;
		failed = t->error != 0;
		pthread_cond_signal(&t->drained);
		pthread_mutex_unlock(&t->lock);
		r = failed ? 0 : trace_writer_append_encoded(t->writer, out, len, n);
		buf = out;
		cap = out_cap;
		pthread_mutex_lock(&t->lock);
		if (r < 0 && !t->error) {
			t->error = r;
			log_warning_errno(r, "trace %s: cannot write, recording stopped", t->path);
		}
	}
	pthread_mutex_unlock(&t->lock);
	free(buf);
	return NULL;
}

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
	if (c->flash_path)
		fprintf(f, "flash_size=%" PRIu64 "\n", c->flash_size);
	for (size_t i = 0; i < c->n_policies; i++) {
		fprintf(f, "policy.%s=%" PRIu32 "\n", c->policies[i].name,
			c->policies[i].block_size);
		fprintf(f, "performance.%s=%s\n", c->policies[i].name,
			config_performance_name(c->policies[i].performance));
	}
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
	pthread_condattr_t attr;
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
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&t->wake, &attr);
	pthread_condattr_destroy(&attr);
	pthread_cond_init(&t->drained, NULL);
	r = -pthread_create(&t->thread, NULL, writer_thread, t);
	if (r < 0) {
		trace_writer_close(t->writer);
		unlink(path);
		goto fail;
	}
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
	size_t size = trace_record_size(peer, len);
	uint64_t t_us = trace_writer_now_us(t->writer);

	if (size > TRACE_RECORD_MAX)
		return; /* a frame is smaller: cannot happen */
	pthread_mutex_lock(&t->lock);
	while (!t->error && t->fill_len + size > TAP_BUFFER_MAX)
		pthread_cond_wait(&t->drained, &t->lock);
	if (!t->error && t->fill_len + size > t->fill_cap) {
		size_t cap = t->fill_cap ? t->fill_cap : 65536;
		uint8_t *b;

		while (cap < t->fill_len + size)
			cap *= 2;
		b = realloc(t->fill, cap);
		if (!b) {
			t->error = -ENOMEM;
			log_warning("trace %s: out of memory, recording stopped", t->path);
		} else {
			t->fill = b;
			t->fill_cap = cap;
		}
	}
	if (!t->error) {
		bool was_empty = t->fill_len == 0;

		if (was_empty)
			clock_gettime(CLOCK_MONOTONIC, &t->fill_since);
		t->fill_len += trace_record_encode(t->fill + t->fill_len, t_us, channel,
						   out ? TRACE_OUT : TRACE_IN, peer, payload, len);
		t->fill_records++;
		t->records++;
		/* The thread needs to hear of the first record (it starts its
		 * linger) and of a full batch, not of every one. */
		if (was_empty || (t->fill_len >= TAP_BATCH && t->fill_len - size < TAP_BATCH))
			pthread_cond_signal(&t->wake);
	}
	pthread_mutex_unlock(&t->lock);
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
	int64_t records = (int64_t)t->records;
	int r;

	pthread_mutex_lock(&t->lock);
	t->stopping = true;
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	r = trace_writer_close(t->writer);
	if (r == 0)
		r = t->error;
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->wake);
	pthread_cond_destroy(&t->drained);
	free(t->fill);
	free(t->path);
	free(t);
	return r < 0 ? r : records;
}
