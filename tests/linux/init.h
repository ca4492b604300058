/*
 * init.h - what the test init's files share (tests/linux/init.c, init_net.c): one static binary.
 */
#ifndef BRISK_TEST_INIT_H
#define BRISK_TEST_INIT_H

#include <stddef.h>

#define DEV_WAIT_MS 30000 /* for /dev/vda, /dev/hvc0, eth0: a nested boot is slow, a missing device is a failure */

/* printf to stdout (the console), unbuffered: nothing is lost at reboot. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether `arg` is a whole word of the command line. */
int has_arg(const char *cmdline, const char *arg);
/* The value of the last "key=value" word (key given with its '='), copied to out; or def. */
const char *arg_value(const char *cmdline, const char *key, char *out, size_t size, const char *def);
/* CLOCK_MONOTONIC in milliseconds. */
long now_ms(void);

/* Module `module`'s parameters among the kernel's command-line words (MODULE.PARAM[=VALUE], before "--"; '-' and
 * '_' the same in the name) as "PARAM=VALUE ..." for finit_module, into out (init_modparams.c). Returns the
 * length, or -1 when they do not all fit in size (out holds those that did). */
int module_params(const char *cmdline, const char *module, char *out, size_t size);

/* Network and vsock mode (init_net.c): the brisk.ip/tcp/vsock words. */
void net_mode(const char *cmdline);
/* brisk.httpd=PORT (init_net.c): answer one HTTP request on TCP PORT, then return (the disk stage). */
void httpd_once(const char *cmdline);
/* Snapshot mode (init_net.c): brisk.snapshot=1 and its brisk.snapshot.* words; returns on the host's "stop". */
void snapshot_mode(const char *cmdline);

/* Balloon mode (init_balloon.c): brisk.balloon=MIB; returns once the host inflated and deflated the balloon. */
void balloon_mode(const char *cmdline);

#endif
