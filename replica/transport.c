#include "transport.h"

#include <stdio.h>
#include <string.h>

#include "ftvm_build.h"

/* Every backend this build has. The RDMA transport joins here (#if HAVE_RDMA)
 * once it exists. */
static const struct repl_transport_ops *const transports[] = {
	&repl_transport_tcp,
};

const struct repl_transport_ops *repl_transport_find(const char *name)
{
	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
		if (strcmp(transports[i]->name, name) == 0)
			return transports[i];
	return NULL;
}

const struct repl_transport_ops *repl_transport_select(const char *configured, char *reason,
						       size_t reason_len)
{
	const struct repl_transport_ops *rdma = repl_transport_find("rdma");

	if (strcmp(configured, "tcp") == 0) {
		snprintf(reason, reason_len, "configured");
		return &repl_transport_tcp;
	}
	if (strcmp(configured, "rdma") == 0) {
		if (rdma) {
			snprintf(reason, reason_len, "configured");
			return rdma;
		}
		snprintf(reason, reason_len,
			 "transport = rdma, but this ftvmd has no RDMA transport (%s); "
			 "use transport = tcp or auto",
			 HAVE_RDMA ? "the RDMA backend is not part of this version"
				   : "built without rdma-core");
		return NULL;
	}
	if (strcmp(configured, "auto") == 0) {
		snprintf(reason, reason_len, "auto: %s",
			 HAVE_RDMA ? "this version has no RDMA backend yet, using tcp"
				   : "built without rdma-core, using tcp");
		return &repl_transport_tcp;
	}
	snprintf(reason, reason_len, "unknown transport '%s' (want auto, tcp or rdma)", configured);
	return NULL;
}
