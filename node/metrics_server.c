/* GET /metrics over HTTP (metrics_server.h). */
#define _GNU_SOURCE
#define LOG_SUBSYSTEM "metrics"

#include "metrics_server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "log.h"
#include "metrics_text.h"
#include "tcp_listen.h"

#define METRICS_BACKLOG 16
#define METRICS_PATH "/metrics"

struct metrics_server {
	struct evhttp *http;
	metrics_gather_fn gather;
	void *arg;
};

/* A short text answer (an error); the request is done. */
static void answer_text(struct evhttp_request *req, int code, const char *reason, const char *text)
{
	struct evbuffer *body = evbuffer_new();

	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "text/plain; charset=utf-8");
	if (body)
		evbuffer_add_printf(body, "%s\n", text);
	evhttp_send_reply(req, code, reason, body);
	if (body)
		evbuffer_free(body);
}

static void log_refused(struct evhttp_request *req, int code, const char *what)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	char *host = NULL;
	ev_uint16_t port = 0;

	if (conn)
		evhttp_connection_get_peer(conn, &host, &port);
	log_debug("%s:%u: %s %d", host ? host : "?", (unsigned)port, what, code);
}

/* The metrics as text into a new buffer; NULL when out of memory. */
static struct evbuffer *render(struct metrics_server *s)
{
	struct ftvm_node_status st;
	struct ftvm_sense sense;
	struct evbuffer *body;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int r;

	s->gather(s->arg, &st, &sense);
	f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	r = metrics_text_write(f, &st, &sense);
	if (fclose(f) != 0 || r < 0) {
		free(text);
		return NULL;
	}
	body = evbuffer_new();
	if (body && evbuffer_add(body, text, len) < 0) {
		evbuffer_free(body);
		body = NULL;
	}
	free(text);
	return body;
}

static void on_request(struct evhttp_request *req, void *arg)
{
	struct metrics_server *s = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	struct evbuffer *body;

	if (!path || strcmp(path, METRICS_PATH) != 0) {
		log_refused(req, HTTP_NOTFOUND, path ? path : "(no path)");
		answer_text(req, HTTP_NOTFOUND, "Not Found",
			    "not found: the metrics are at " METRICS_PATH);
		return;
	}
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		log_refused(req, 405, "a method other than GET or HEAD");
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
		answer_text(req, 405, "Method Not Allowed",
			    "method not allowed: " METRICS_PATH " answers GET and HEAD");
		return;
	}
	body = render(s);
	if (!body) {
		log_warning("out of memory for the metrics' text");
		answer_text(req, HTTP_INTERNAL, "Internal Server Error", "out of memory");
		return;
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  METRICS_TEXT_CONTENT_TYPE);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
	/* HEAD: the headers a GET gets, its length too, and no body (libevent
	 * 2.1 would send one it is given, and no length without it). */
	if (cmd == EVHTTP_REQ_HEAD) {
		char len[24];

		snprintf(len, sizeof(len), "%zu", evbuffer_get_length(body));
		evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Length", len);
	}
	evhttp_send_reply(req, HTTP_OK, "OK", cmd == EVHTTP_REQ_HEAD ? NULL : body);
	evbuffer_free(body);
}

int metrics_server_new(struct event_base *base, const char *endpoint, metrics_gather_fn gather,
		       void *arg, struct metrics_server **ret)
{
	struct metrics_server *s = calloc(1, sizeof(*s));
	struct evconnlistener *listener;
	int fd;

	if (!s)
		return -ENOMEM;
	s->gather = gather;
	s->arg = arg;
	s->http = evhttp_new(base);
	if (!s->http) {
		free(s);
		return -ENOMEM;
	}
	evhttp_set_max_headers_size(s->http, METRICS_HEADERS_MAX);
	evhttp_set_max_body_size(s->http, METRICS_BODY_MAX);
	evhttp_set_timeout(s->http, METRICS_TIMEOUT_S);
	/* Every method libevent knows reaches on_request, which answers 405
	 * itself (libevent's own refusal would be 501, and without Allow). */
	evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
						    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
						    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
						    EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_default_content_type(s->http, NULL);
	evhttp_set_gencb(s->http, on_request, s);

	fd = tcp_listen(endpoint, METRICS_BACKLOG);
	if (fd < 0) {
		metrics_server_free(s);
		return fd;
	}
	listener = evconnlistener_new(base, NULL, NULL,
				      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (!listener) {
		close(fd);
		metrics_server_free(s);
		return -ENOMEM;
	}
	/* evhttp owns the listener from here, and frees it with itself. */
	if (!evhttp_bind_listener(s->http, listener)) {
		evconnlistener_free(listener);
		metrics_server_free(s);
		return -ENOMEM;
	}
	log_info("serving http://%s" METRICS_PATH, endpoint);
	*ret = s;
	return 0;
}

void metrics_server_free(struct metrics_server *s)
{
	if (!s)
		return;
	if (s->http)
		evhttp_free(s->http);
	free(s);
}
