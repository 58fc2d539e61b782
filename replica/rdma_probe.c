#include "rdma_probe.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "config.h"

/* The number of active ports over all devices. */
static int active_ports(int *ret_devices)
{
	struct ibv_device **devs = ibv_get_device_list(ret_devices);
	int active = 0;

	if (!devs) {
		*ret_devices = 0;
		return 0;
	}
	for (int i = 0; i < *ret_devices; i++) {
		struct ibv_context *ctx = ibv_open_device(devs[i]);
		struct ibv_device_attr attr;

		if (!ctx)
			continue;
		if (ibv_query_device(ctx, &attr) == 0)
			for (uint8_t p = 1; p <= attr.phys_port_cnt; p++) {
				struct ibv_port_attr pa;

				if (ibv_query_port(ctx, p, &pa) == 0 && pa.state == IBV_PORT_ACTIVE)
					active++;
			}
		ibv_close_device(ctx);
	}
	ibv_free_device_list(devs);
	return active;
}

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

static bool is_wildcard(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* Binds a throwaway rdma_cm id to the listen host (port 0: the node's own
 * listener comes later) to learn which device it is on. */
static int listen_device(const char *listen, bool for_auto, char *reason, size_t len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai;
	struct rdma_event_channel *ch = NULL;
	struct rdma_cm_id *id = NULL;
	char host[256];
	uint16_t port;
	int r = 0;

	if (config_parse_endpoint(listen, host, sizeof(host), &port) < 0) {
		snprintf(reason, len, "listen = %s is not host:port", listen);
		return 0;
	}
	if (getaddrinfo(host, NULL, &hints, &ai) != 0) {
		snprintf(reason, len, "listen host %s does not resolve", host);
		return 0;
	}
	/* rdma_cm resolves no route over loopback (seen: ENODEV on Soft-RoCE). */
	if (is_loopback(ai->ai_addr)) {
		snprintf(reason, len, "listen address %s is loopback, which no RDMA device serves",
			 host);
		goto out;
	}
	if (for_auto && is_wildcard(ai->ai_addr)) {
		snprintf(reason, len, "listen address %s is a wildcard: no device to tell by",
			 host);
		goto out;
	}
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		snprintf(reason, len, "rdma_cm is not available (%s)", strerror(errno));
		goto out;
	}
	if (rdma_bind_addr(id, ai->ai_addr)) {
		snprintf(reason, len,
			 "listen address %s is not on an RDMA device (rdma_bind_addr: %s)", host,
			 strerror(errno));
		goto out;
	}
	if (id->verbs)
		snprintf(reason, len, "listen address %s is on %s port %u", host,
			 ibv_get_device_name(id->verbs->device), id->port_num);
	else
		snprintf(reason, len, "listening on %s, any RDMA device", host);
	r = 1;
out:
	if (id)
		rdma_destroy_id(id);
	if (ch)
		rdma_destroy_event_channel(ch);
	freeaddrinfo(ai);
	return r;
}

int rdma_probe(const char *listen, bool for_auto, char *reason, size_t reason_len)
{
	int devices, active;

	active = active_ports(&devices);
	if (devices == 0) {
		snprintf(reason, reason_len, "no RDMA device (ibv_get_device_list found none)");
		return 0;
	}
	if (active == 0) {
		snprintf(reason, reason_len,
			 "no RDMA device has an active port (%d device%s found)", devices,
			 devices == 1 ? "" : "s");
		return 0;
	}
	return listen_device(listen, for_auto, reason, reason_len);
}
