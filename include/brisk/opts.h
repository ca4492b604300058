/*
 * opts.h - long options spelled in full. getopt_long takes any unambiguous prefix of a long option
 * ("--kern" for "--kernel"); brisk refuses abbreviations in every subcommand (docs/cli.md, "Options"),
 * so that what a wrapper such as `brisk jail` recognises and what brisk runs are the same words.
 */
#ifndef BRISK_OPTS_H
#define BRISK_OPTS_H

#include <getopt.h>
#include <stddef.h>

/*
 * Scans argv[0..argc) as getopt_long(optstring, longopts) will read it, up to "--": every word
 * "--NAME" or "--NAME=VALUE" must name an entry of `longopts` exactly, and the word after a long
 * option with required_argument given without "=" (or after a short option of `optstring` that takes
 * a value and has none attached) is a value, not an option. A word that names no long option at all
 * is left to getopt_long to report. Returns 0, or -EINVAL with err saying which option the word
 * abbreviates ("--kern: an abbreviation of --kernel: ...").
 */
int opts_check_exact(int argc, char *const argv[], const char *optstring, const struct option *longopts, char *err,
		     size_t errlen);

/*
 * The long option (from `longopts`, NULL-terminated by a zero entry) that word "--NAME[=VALUE]" names
 * exactly, or NULL.
 */
const struct option *opts_find_exact(const char *word, const struct option *longopts);

#endif
