/* ftvm-stranger: someone who is not the partner knocks on a node's partner
 * port, for tests/e2e/test_partner_auth.sh.
 *
 *   ftvm-stranger HOST:PORT [--from ADDR] [--id ID] MODE
 *
 * MODE is what it tries:
 *   --key FILE       the handshake as the dialler, proving the key in FILE
 *                    (a wrong one, or the right one from the wrong address)
 *   --no-key         the handshake of a node without a key, then a Hello
 *   --hello-first    a Hello straight away, as an ftvmd before authentication
 *   --replay TRACE   the partner's AuthChallenge and AuthProof as TRACE (a
 *                    trace the node recorded) has them, byte for byte
 * Then it listens until the node closes the connection (or 3 s pass) and
 * prints one line per message it got, "got TYPE epoch=N", and a last line,
 * "closed after N messages" or "open after N messages". It exits 0 when it
 * ran as asked, whatever the node did: the test judges the lines. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "codec.h"
#include "config.h"
#include "frame.h"
#include "keyfile.h"
#include "trace_file.h"

#define WAIT_MS 3000

static int fd = -1;
static uint8_t rbuf[1 << 16];
static size_t rhave;
static int received;

static void die(const char *what)
{
	fprintf(stderr, "ftvm-stranger: %s\n", what);
	exit(2);
}

static int dial(const char *endpoint, const char *from)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
	char host[256], port[8];
	uint16_t portnum;
	int s;

	if (config_parse_endpoint(endpoint, host, sizeof(host), &portnum) < 0)
		die("bad HOST:PORT");
	snprintf(port, sizeof(port), "%u", portnum);
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		die("cannot resolve the node");
	s = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		die("socket");
	if (from) {
		struct sockaddr_in sin = { .sin_family = AF_INET };

		if (ai->ai_family != AF_INET || inet_pton(AF_INET, from, &sin.sin_addr) != 1 ||
		    bind(s, (struct sockaddr *)&sin, sizeof(sin)) < 0)
			die("cannot bind --from (an IPv4 address of this machine)");
	}
	if (connect(s, ai->ai_addr, ai->ai_addrlen) < 0)
		die("cannot connect to the node");
	freeaddrinfo(ai);
	return s;
}

static void send_payload(const uint8_t *payload, size_t len)
{
	uint8_t hdr[FRAME_HEADER_SIZE];

	frame_header_build(hdr, payload, len);
	/* The node may have closed already: that is for the test to see. */
	if (send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL) != (ssize_t)sizeof(hdr) ||
	    send(fd, payload, len, MSG_NOSIGNAL) != (ssize_t)len)
		return;
}

static void send_env(Envelope *env, const char *id)
{
	uint8_t *payload;
	size_t len;

	env->version = FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	env->sender = (char *)id;
	if (codec_payload_pack(&env->base, &payload, &len) < 0)
		die("cannot pack");
	send_payload(payload, len);
	free(payload);
}

/* The next message from the node, printed; NULL once it closed or after
 * WAIT_MS of silence (*closed says which). */
static Envelope *next_message(bool *closed)
{
	*closed = false;
	for (;;) {
		const uint8_t *payload;
		size_t payload_len;
		const char *why;
		Envelope *env;
		ssize_t got;
		int n = frame_decode(rbuf, rhave, sizeof(rbuf), &payload, &payload_len, &why);

		if (n < 0)
			die(why);
		if (n > 0) {
			if (codec_envelope_decode(payload, payload_len, &env, NULL, 0) < 0)
				die("the node sent an envelope that does not decode");
			memmove(rbuf, rbuf + n, rhave - (size_t)n);
			rhave -= (size_t)n;
			received++;
			printf("got %s epoch=%llu\n", codec_message_name(env),
			       (unsigned long long)env->epoch);
			return env;
		}
		if (poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, WAIT_MS) != 1)
			return NULL;
		got = read(fd, rbuf + rhave, sizeof(rbuf) - rhave);
		if (got <= 0) {
			*closed = true;
			return NULL;
		}
		rhave += (size_t)got;
	}
}

static void challenge(const char *id, int method, const uint8_t *nonce)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__AuthChallenge ch = FTVM__PARTNER__AUTH_CHALLENGE__INIT;

	ch.node_id = (char *)id;
	ch.method = method;
	if (nonce)
		ch.nonce = (ProtobufCBinaryData){ .len = AUTH_NONCE_LEN, .data = (uint8_t *)nonce };
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE;
	env.auth_challenge = &ch;
	send_env(&env, id);
}

static void hello(const char *id)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__Hello h = FTVM__PARTNER__HELLO__INIT;

	h.node_id = (char *)id;
	h.version = FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	h.page_size = 4096;
	h.initiator = true;
	h.state = FTVM__PARTNER__NODE_STATE__NODE_STATE_STARTING;
	env.epoch = 1;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO;
	env.hello = &h;
	send_env(&env, id);
}

/* The node's challenge, its id and nonce kept; false when none came. */
static bool node_challenge(char *node_id, size_t id_len, uint8_t nonce[AUTH_NONCE_LEN])
{
	bool closed;
	Envelope *env = next_message(&closed);
	bool ok = env && env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE &&
		  env->auth_challenge->nonce.len == AUTH_NONCE_LEN;

	if (ok) {
		snprintf(node_id, id_len, "%s", env->auth_challenge->node_id);
		memcpy(nonce, env->auth_challenge->nonce.data, AUTH_NONCE_LEN);
	}
	codec_envelope_free(env);
	return ok;
}

static void with_key(const char *id, const char *key_path)
{
	static uint8_t key[KEYFILE_MAX];
	uint8_t ours[AUTH_NONCE_LEN], theirs[AUTH_NONCE_LEN], mac[AUTH_MAC_LEN];
	Ftvm__Partner__AuthProof proof = FTVM__PARTNER__AUTH_PROOF__INIT;
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	char node_id[64], err[512];
	size_t key_len;

	if (keyfile_load(key_path, key, &key_len, err, sizeof(err)) < 0)
		die(err);
	if (auth_nonce(ours) < 0)
		die("no nonce");
	challenge(id, FTVM__PARTNER__AUTH_METHOD__AUTH_METHOD_HMAC_SHA256, ours);
	if (!node_challenge(node_id, sizeof(node_id), theirs))
		return;
	if (auth_proof(key, key_len, true, id, node_id, ours, theirs, mac) < 0)
		die("cannot compute a proof");
	proof.mac = (ProtobufCBinaryData){ .len = sizeof(mac), .data = mac };
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_PROOF;
	env.auth_proof = &proof;
	send_env(&env, id);
}

/* One connection's handshake in a trace, by its peer: the partner's
 * AuthChallenge, and whether the node proved itself on it yet. */
struct recorded {
	char peer[TRACE_PEER_MAX + 1];
	uint8_t *challenge;
	size_t challenge_len;
	bool node_proved;
};

static int message_of(const struct trace_record *rec)
{
	Envelope *env;
	int which;

	if (rec->channel != TRACE_CHANNEL_PARTNER ||
	    codec_envelope_decode(rec->payload, rec->len, &env, NULL, 0) < 0)
		return -1;
	which = (int)env->message_case;
	codec_envelope_free(env);
	return which;
}

/* The partner's AuthChallenge and AuthProof, byte for byte as the trace
 * recorded them coming in, from a connection the partner dialled (its proof
 * came before the node's): the handshake a stranger dialling would need. */
static void replay(const char *path)
{
	struct recorded conns[16] = { 0 }, *c = NULL;
	uint8_t *proof = NULL, nonce[AUTH_NONCE_LEN];
	struct trace_reader *r;
	struct trace_record rec;
	char err[512], node_id[64];
	size_t n = 0, proof_len = 0;

	if (trace_reader_open(path, &r, err, sizeof(err)) < 0)
		die(err);
	while (!proof && trace_reader_next(r, &rec, err, sizeof(err)) == 1) {
		int which = message_of(&rec);

		for (c = conns; c < conns + n && strcmp(c->peer, rec.peer) != 0; c++)
			;
		if (c == conns + n && which == FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE &&
		    rec.direction == TRACE_IN && n < 16) {
			snprintf(c->peer, sizeof(c->peer), "%s", rec.peer);
			c->challenge = malloc(rec.len);
			if (!c->challenge)
				die("out of memory");
			memcpy(c->challenge, rec.payload, rec.len);
			c->challenge_len = rec.len;
			n++;
		} else if (c < conns + n && which == FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_PROOF) {
			if (rec.direction == TRACE_OUT) {
				c->node_proved = true;
			} else if (!c->node_proved) {
				proof = malloc(rec.len);
				if (!proof)
					die("out of memory");
				memcpy(proof, rec.payload, rec.len);
				proof_len = rec.len;
			}
		}
	}
	trace_reader_free(r);
	if (!proof)
		die("the trace has no handshake of a connection the partner dialled");
	send_payload(c->challenge, c->challenge_len);
	if (node_challenge(node_id, sizeof(node_id), nonce))
		send_payload(proof, proof_len);
	free(proof);
	for (size_t i = 0; i < n; i++)
		free(conns[i].challenge);
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "from", required_argument, NULL, 'f' },
		{ "id", required_argument, NULL, 'i' },
		{ "key", required_argument, NULL, 'k' },
		{ "no-key", no_argument, NULL, 'n' },
		{ "hello-first", no_argument, NULL, 'H' },
		{ "replay", required_argument, NULL, 'r' },
		{},
	};
	const char *from = NULL, *id = "b", *key = NULL, *trace = NULL;
	int mode = 0, c;
	bool closed;
	Envelope *env;

	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case 'f':
			from = optarg;
			break;
		case 'i':
			id = optarg;
			break;
		case 'k':
			key = optarg;
			mode = c;
			break;
		case 'r':
			trace = optarg;
			mode = c;
			break;
		case 'n':
		case 'H':
			mode = c;
			break;
		default:
			return 2;
		}
	}
	if (optind != argc - 1 || !mode)
		die("usage: ftvm-stranger HOST:PORT [--from ADDR] [--id ID] "
		    "--key FILE | --no-key | --hello-first | --replay TRACE");
	fd = dial(argv[optind], from);
	if (mode == 'k') {
		with_key(id, key);
	} else if (mode == 'r') {
		replay(trace);
	} else {
		if (mode == 'n')
			challenge(id, FTVM__PARTNER__AUTH_METHOD__AUTH_METHOD_NONE, NULL);
		hello(id);
	}
	while ((env = next_message(&closed)))
		codec_envelope_free(env);
	printf("%s after %d messages\n", closed ? "closed" : "open", received);
	close(fd);
	return 0;
}
