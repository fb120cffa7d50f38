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

/*
 * Splits off the next blank-separated word at *pos: NUL-terminates it and
 * returns it, or NULL at the end of the line.  A scan, not strtok_r(): it
 * runs for every value the sampler reads.
 */
static char *next_word(char **pos)
{
	char *s = *pos, *word;

	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s) {
		*pos = s;
		return NULL;
	}
	word = s;
	while (*s && *s != ' ' && *s != '\t')
		s++;
	if (*s)
		*s++ = '\0';
	*pos = s;
	return word;
}

/* key[0..*len) gets ".word"; false if that would not fit in MAX_KEY. */
static bool key_append(char *key, size_t *len, const char *word)
{
	size_t n = strlen(word);

	if (*len + 1 + n >= MAX_KEY)
		return false;
	key[(*len)++] = '.';
	memcpy(key + *len, word, n + 1);
	*len += n;
	return true;
}

/* key holds the prefix, prefix_len long, and is the rows' key buffer. */
static int parse_line(char *line, char *key, size_t prefix_len,
		      lab_row_fn fn, void *arg)
{
	char *pos = line, *first, *tok, *eq;
	size_t len = prefix_len, first_len;
	int emitted = 0;

	first = next_word(&pos);
	if (!first)
		return 0;
	tok = next_word(&pos);
	key[prefix_len] = '\0';
	if (!tok) {
		if (!is_number(first))
			return -1;
		fn(arg, key, first);
		return 0;
	}
	if (!key_append(key, &len, first))
		return -1;
	if (!strchr(tok, '=')) {
		if (next_word(&pos) || !is_number(tok))
			return -1;
		fn(arg, key, tok);
		return 0;
	}
	first_len = len;
	for (; tok; tok = next_word(&pos)) {
		eq = strchr(tok, '=');
		if (!eq || !is_number(eq + 1))
			return -1;
		*eq = '\0';
		len = first_len;
		if (!key_append(key, &len, tok))
			return -1;
		fn(arg, key, eq + 1);
		emitted++;
	}
	return emitted ? 0 : -1;
}

int lab_parse_keyed(char *buf, const char *prefix, lab_row_fn fn, void *arg)
{
	size_t prefix_len = strlen(prefix);
	char key[MAX_KEY], *line, *nl;
	int bad = 0;

	if (prefix_len >= MAX_KEY)
		return -1;
	memcpy(key, prefix, prefix_len);
	for (line = buf; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (parse_line(line, key, prefix_len, fn, arg) < 0)
			bad++;
		if (!nl)
			break;
	}
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
