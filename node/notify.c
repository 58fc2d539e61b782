#include "notify.h"

#include <errno.h>
#include <stdlib.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

struct notify_watchdog {
	struct event *timer;
};

void notify_ready(const char *status)
{
	sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void notify_status(const char *status)
{
	sd_notifyf(0, "STATUS=%s", status);
}

void notify_stopping(void)
{
	sd_notify(0, "STOPPING=1\nSTATUS=stopping");
}

void notify_reloading(void)
{
	sd_notify(0, "RELOADING=1");
}

void notify_reloaded(void)
{
	sd_notify(0, "READY=1");
}

static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
	sd_notify(0, "WATCHDOG=1");
}

int notify_watchdog_start(struct event_base *base, struct notify_watchdog **ret)
{
	struct notify_watchdog *w;
	struct timeval tv;
	uint64_t usec;
	int r;

	*ret = NULL;
	r = sd_watchdog_enabled(0, &usec);
	if (r <= 0)
		return r;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->timer = event_new(base, -1, EV_PERSIST, on_watchdog, NULL);
	if (!w->timer) {
		free(w);
		return -ENOMEM;
	}
	/* Half the interval, as sd_watchdog_enabled(3) advises. */
	usec /= 2;
	tv.tv_sec = (time_t)(usec / 1000000);
	tv.tv_usec = (suseconds_t)(usec % 1000000);
	event_add(w->timer, &tv);
	*ret = w;
	return 1;
}

void notify_watchdog_free(struct notify_watchdog *w)
{
	if (!w)
		return;
	event_free(w->timer);
	free(w);
}
