/* ftvm-config-keys: prints every key the configuration parser knows, one
 * "SECTION KEY" a line ("policy" for the keys of every [policy NAME]), from
 * common/config.c's own table: test_man.sh checks that ftvm.conf(5)
 * documents each under its section. */
#include <stdio.h>

#include "config.h"

int main(void)
{
	const char *section, *name;

	for (size_t i = 0; config_key_at(i, &section, &name); i++)
		printf("%s %s\n", section, name);
	return fflush(stdout) == 0 ? 0 : 1;
}
