#include "transport.h"

#include <stdio.h>
#include <string.h>

#include "ftvm_build.h"
#if HAVE_RDMA
#include "rdma_probe.h"
#endif

/* Every backend this build has. */
static const struct repl_transport_ops *const transports[] = {
	&repl_transport_tcp,
#if HAVE_RDMA
	&repl_transport_rdma,
#endif
};

const struct repl_transport_ops *repl_transport_find(const char *name)
{
	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
		if (strcmp(transports[i]->name, name) == 0)
			return transports[i];
	return NULL;
}

#if HAVE_RDMA
const struct repl_transport_ops *repl_transport_select(const char *configured, const char *listen,
						       char *reason, size_t reason_len)
{
	char why[160];

	if (strcmp(configured, "tcp") == 0) {
		snprintf(reason, reason_len, "configured");
		return &repl_transport_tcp;
	}
	if (strcmp(configured, "rdma") == 0) {
		if (rdma_probe(listen, false, why, sizeof(why))) {
			snprintf(reason, reason_len, "configured; %s", why);
			return &repl_transport_rdma;
		}
		snprintf(reason, reason_len,
			 "transport = rdma, but %s; use transport = tcp or auto", why);
		return NULL;
	}
	if (strcmp(configured, "auto") == 0) {
		if (rdma_probe(listen, true, why, sizeof(why))) {
			snprintf(reason, reason_len, "auto: %s", why);
			return &repl_transport_rdma;
		}
		snprintf(reason, reason_len, "auto: %s, using tcp", why);
		return &repl_transport_tcp;
	}
	snprintf(reason, reason_len, "unknown transport '%s' (want auto, tcp or rdma)", configured);
	return NULL;
}
#else
const struct repl_transport_ops *repl_transport_select(const char *configured, const char *listen,
						       char *reason, size_t reason_len)
{
	if (strcmp(configured, "tcp") == 0) {
		snprintf(reason, reason_len, "configured");
		return &repl_transport_tcp;
	}
	if (strcmp(configured, "rdma") == 0) {
		snprintf(reason, reason_len,
			 "transport = rdma, but this ftvmd was built without rdma-core (no RDMA "
			 "transport); use transport = tcp or auto");
		return NULL;
	}
	if (strcmp(configured, "auto") == 0) {
		snprintf(reason, reason_len, "auto: built without rdma-core, using tcp");
		return &repl_transport_tcp;
	}
	snprintf(reason, reason_len, "unknown transport '%s' (want auto, tcp or rdma)", configured);
	return NULL;
}
#endif
