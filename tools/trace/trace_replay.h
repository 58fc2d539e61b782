/* ftvmctl trace replay FILE (common/TRACE.md, "Replay"): a fresh node (or
 * pair) in a temporary directory, the recorded side of the conversation
 * played into it in order, every answer compared with the recorded one. */
#pragma once

#include <stdbool.h>

struct replay_options {
	const char *path;
	const char *ftvmd; /* NULL: the one beside ftvmctl */
	bool json;
	bool keep; /* leave the temporary directory (configs, logs) behind */
};

/* Returns ftvmctl's exit code: 0 only when every answer matched; 1 on a
 * divergence or a trace that cannot be replayed (said on stderr); 3 when the
 * fresh node did not come up. */
int trace_replay_run(const struct replay_options *o);
