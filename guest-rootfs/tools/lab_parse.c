// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab_parse.h"

#define MAX_KEY 256

/*
 * A decimal as procfs and cgroupfs print them: "-12", "345", "0.12".
 * A scan, not strtod(): it runs for every value the sampler reads.
 */
static bool is_number(const char *s)
{
	bool digits = false, point = false;

	if (*s == '-')
		s++;
	for (; *s; s++) {
		if (*s >= '0' && *s <= '9') {
			digits = true;
		} else if (*s == '.' && !point) {
			point = true;
		} else {
			return false;
		}
	}
	return digits;
}

static int parse_line(char *line, const char *prefix, lab_row_fn fn, void *arg)
{
	char key[MAX_KEY], *save = NULL, *first, *tok, *eq;
	int emitted = 0;

	first = strtok_r(line, " \t", &save);
	if (!first)
		return 0;
	tok = strtok_r(NULL, " \t", &save);
	if (!tok) {
		if (!is_number(first))
			return -1;
		fn(arg, prefix, first);
		return 0;
	}
	if (!strchr(tok, '=')) {
		if (strtok_r(NULL, " \t", &save) || !is_number(tok))
			return -1;
		if (snprintf(key, sizeof(key), "%s.%s", prefix, first) >= MAX_KEY)
			return -1;
		fn(arg, key, tok);
		return 0;
	}
	for (; tok; tok = strtok_r(NULL, " \t", &save)) {
		eq = strchr(tok, '=');
		if (!eq || !is_number(eq + 1))
			return -1;
		*eq = '\0';
		if (snprintf(key, sizeof(key), "%s.%s.%s", prefix, first, tok) >= MAX_KEY)
			return -1;
		fn(arg, key, eq + 1);
		emitted++;
	}
	return emitted ? 0 : -1;
}

int lab_parse_keyed(char *buf, const char *prefix, lab_row_fn fn, void *arg)
{
	char *line, *save = NULL;
	int bad = 0;

	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		if (parse_line(line, prefix, fn, arg) < 0)
			bad++;
	return bad;
}

long lab_parse_long(const char *prog, const char *what, const char *s,
		    long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "%s: bad %s '%s' (%ld..%ld)\n", prog, what, s, min, max);
		exit(2);
	}
	return v;
}
