/* SPDX-License-Identifier: GPL-2.0 */
#ifndef LAB_PARSE_H
#define LAB_PARSE_H

/* Called for every key found; value is the number as the kernel wrote it. */
typedef void (*lab_row_fn)(void *arg, const char *key, const char *value);

/*
 * Parses the flat-keyed and nested-keyed files of procfs and cgroupfs into
 * "<prefix>.<key>" rows:
 *   "pgscan 12"                      -> prefix.pgscan = 12   (vmstat, memory.stat)
 *   "some avg10=0.12 total=345"      -> prefix.some.avg10, prefix.some.total
 *   "253:16 rbytes=1 wbytes=2"       -> prefix.253:16.rbytes, ...
 *   "4096" (single value)            -> prefix = 4096        (memory.current)
 * buf is modified.  Returns the number of lines that fit none of these
 * shapes (they are skipped), so a caller can report a format change, or -1
 * if prefix is too long for a key.
 */
int lab_parse_keyed(char *buf, const char *prefix, lab_row_fn fn, void *arg);

/*
 * A decimal option argument in [min, max]; anything else is a usage error:
 * "<prog>: bad <what> '<s>' (min..max)" on stderr and exit status 2.
 */
long lab_parse_long(const char *prog, const char *what, const char *s,
		    long min, long max);

#endif
