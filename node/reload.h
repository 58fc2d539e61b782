/* SIGHUP (`systemctl reload`): the configuration file read again
 * (systemd/OPERATIONS.md, "Reloading the configuration"). */
#pragma once

struct ftvm_config;

/* Reads running's file again: a file that does not load is named in the log
 * and changes nothing; [node] log_level takes effect at once; every other
 * key changed is named, as taking effect at the next start. */
void reload_config(const struct ftvm_config *running);
