/* What this build of ftvm is, for --version: the project's version and the
 * features compiled in, the same line from every program. */
#pragma once

#include <stdio.h>

/* Prints "PROGRAM VERSION (FEATURES)" and a newline to f, e.g.
 * "ftvmd 0.1.0 (rdma, asan, ubsan)": "rdma" or "no rdma" (whether the RDMA
 * transport is built), then the sanitizers the build is instrumented with. */
void build_info_print(FILE *f, const char *program);
