#include "build_info.h"

#include "ftvm_build.h"

/* FTVM_ASAN and FTVM_UBSAN come from meson's b_sanitize (meson.build): gcc
 * says nothing of UBSan to the preprocessor, so the build says it. */
void build_info_print(FILE *f, const char *program)
{
	fprintf(f, "%s %s (%s%s%s)\n", program, FTVM_VERSION, HAVE_RDMA ? "rdma" : "no rdma",
		FTVM_ASAN ? ", asan" : "", FTVM_UBSAN ? ", ubsan" : "");
}
