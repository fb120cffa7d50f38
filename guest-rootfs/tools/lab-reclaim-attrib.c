// SPDX-License-Identifier: GPL-2.0
/*
 * lab-reclaim-attrib: who reclaimed whose pages.  Reads the patch series'
 * vmscan:mm_vmscan_lru_shrink_inactive_memcg tracepoint from tracefs
 * until SIGINT/SIGTERM and writes one CSV row per (reclaimer, scanned
 * lruvec, target, lru) with the pages scanned and reclaimed:
 *
 *   reclaimer_cgroup,scanned_cgroup,target_cgroup,lru,nr_scanned,
 *   nr_reclaimed,nr_writeback,nr_immediate,events,reclaim_ns
 *
 *   lab-reclaim-attrib -o out.csv [-t tracefs] [-r cgroup_root]
 *
 * The reclaimer is the reclaiming task's cgroup, or "kswapd"; the scanned
 * cgroup owns the lruvec; the target is the memcg whose limit is being
 * reclaimed ("global" for global reclaim).  Cgroups are named by their
 * path under the cgroup root, found from the cgroup ids (inode numbers)
 * the tracepoint carries; a cgroup removed before it is first seen is
 * "cgid:N".  reclaim_ns is left empty: the event carries no duration.
 * Exits 1, naming the path, when the tracepoint does not exist (a kernel
 * without the series).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EVENT "events/vmscan/mm_vmscan_lru_shrink_inactive_memcg"
#define MAX_NAMES 256
#define MAX_ROWS 1024

struct cgroup_name {
	unsigned long long cgid;
	char path[PATH_MAX];
};

struct row {
	int reclaimer, scanned, target;	/* indexes into names[], -1: special */
	bool kswapd, file;
	unsigned long long nr_scanned, nr_reclaimed, nr_writeback;
	unsigned long long nr_immediate, events;
};

static struct cgroup_name names[MAX_NAMES];
static int nr_names;
static struct row rows[MAX_ROWS];
static int nr_rows;
static unsigned long long lost_rows;
static const char *cgroup_root = "/sys/fs/cgroup";
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static unsigned long long wanted_cgid;
static char found_path[PATH_MAX];

static int match_cgid(const char *path, const struct stat *st, int type,
		      struct FTW *ftw)
{
	(void)ftw;
	if (type != FTW_D || st->st_ino != wanted_cgid)
		return 0;
	snprintf(found_path, sizeof(found_path), "%s", path);
	return 1;
}

/* Index of cgroup id CGID in names[], resolving it on first sight. */
static int cgroup_index(unsigned long long cgid)
{
	size_t root_len = strlen(cgroup_root);
	const char *rel;
	int i;

	for (i = 0; i < nr_names; i++)
		if (names[i].cgid == cgid)
			return i;
	if (nr_names == MAX_NAMES)
		return -1;
	names[nr_names].cgid = cgid;
	wanted_cgid = cgid;
	found_path[0] = '\0';
	if (nftw(cgroup_root, match_cgid, 16, FTW_PHYS | FTW_MOUNT) == 1) {
		rel = found_path + root_len;
		while (*rel == '/')
			rel++;
		snprintf(names[nr_names].path, PATH_MAX, "%s", *rel ? rel : "/");
	} else {
		snprintf(names[nr_names].path, PATH_MAX, "cgid:%llu", cgid);
	}
	return nr_names++;
}

static bool field(const char *line, const char *key, unsigned long long *val)
{
	const char *p = strstr(line, key);

	if (!p)
		return false;
	*val = strtoull(p + strlen(key), NULL, 10);
	return true;
}

/* Adds one trace line to its row; lines of other events are ignored. */
static void account_line(const char *line)
{
	unsigned long long cgid, task_cgid, target_cgid, kswapd, scanned, reclaimed;
	unsigned long long wb = 0, imm = 0;
	struct row key = { 0 };
	int i;

	if (!strstr(line, "mm_vmscan_lru_shrink_inactive_memcg:"))
		return;
	/* The leading spaces keep " cgid=" from matching "task_cgid=". */
	if (!field(line, " cgid=", &cgid) || !field(line, " task_cgid=", &task_cgid) ||
	    !field(line, " target_cgid=", &target_cgid) ||
	    !field(line, " kswapd=", &kswapd) ||
	    !field(line, " nr_scanned=", &scanned) ||
	    !field(line, " nr_reclaimed=", &reclaimed))
		return;
	field(line, " nr_writeback=", &wb);
	field(line, " nr_immediate=", &imm);
	key.kswapd = kswapd;
	key.file = strstr(line, " lru=file") != NULL;
	key.reclaimer = key.kswapd ? -1 : cgroup_index(task_cgid);
	key.scanned = cgroup_index(cgid);
	key.target = target_cgid ? cgroup_index(target_cgid) : -1;
	for (i = 0; i < nr_rows; i++) {
		struct row *r = &rows[i];

		if (r->reclaimer == key.reclaimer && r->scanned == key.scanned &&
		    r->target == key.target && r->kswapd == key.kswapd &&
		    r->file == key.file)
			break;
	}
	if (i == nr_rows) {
		if (nr_rows == MAX_ROWS) {
			lost_rows++;
			return;
		}
		rows[nr_rows++] = key;
	}
	rows[i].nr_scanned += scanned;
	rows[i].nr_reclaimed += reclaimed;
	rows[i].nr_writeback += wb;
	rows[i].nr_immediate += imm;
	rows[i].events++;
}

static int write_tracefs(const char *tracefs, const char *file, const char *val)
{
	char path[PATH_MAX];
	int fd, ret = 0;

	if (snprintf(path, sizeof(path), "%s/%s", tracefs, file) >= (int)sizeof(path))
		return -1;
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0 || write(fd, val, strlen(val)) < 0) {
		fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", path, strerror(errno));
		ret = -1;
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

/* Splits what was read into lines; keeps a partial last line. */
static void consume(char *buf, size_t *len)
{
	char *start = buf, *nl;

	while ((nl = memchr(start, '\n', buf + *len - start))) {
		*nl = '\0';
		account_line(start);
		start = nl + 1;
	}
	*len = buf + *len - start;
	memmove(buf, start, *len);
}

static const char *name_of(int idx, const char *special)
{
	return idx < 0 ? special : names[idx].path;
}

static int write_csv(const char *outpath)
{
	FILE *out = fopen(outpath, "wx");
	int i;

	if (!out) {
		fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", outpath, strerror(errno));
		return -1;
	}
	fprintf(out, "reclaimer_cgroup,scanned_cgroup,target_cgroup,lru,nr_scanned,"
		"nr_reclaimed,nr_writeback,nr_immediate,events,reclaim_ns\n");
	for (i = 0; i < nr_rows; i++) {
		struct row *r = &rows[i];

		fprintf(out, "%s,%s,%s,%s,%llu,%llu,%llu,%llu,%llu,\n",
			r->kswapd ? "kswapd" : name_of(r->reclaimer, "unknown"),
			name_of(r->scanned, "unknown"), name_of(r->target, "global"),
			r->file ? "file" : "anon", r->nr_scanned, r->nr_reclaimed,
			r->nr_writeback, r->nr_immediate, r->events);
	}
	if (fclose(out) == EOF) {
		fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", outpath, strerror(errno));
		return -1;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: lab-reclaim-attrib -o out.csv [-t tracefs] [-r cgroup_root]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *tracefs = "/sys/kernel/tracing", *outpath = NULL;
	static char buf[1 << 16];
	char path[PATH_MAX];
	struct sigaction sa;
	struct pollfd pfd;
	bool disabled = false;
	size_t len = 0;
	ssize_t n;
	int opt;

	while ((opt = getopt(argc, argv, "o:t:r:")) != -1) {
		switch (opt) {
		case 'o':
			outpath = optarg;
			break;
		case 't':
			tracefs = optarg;
			break;
		case 'r':
			cgroup_root = optarg;
			break;
		default:
			usage();
		}
	}
	if (!outpath || optind != argc)
		usage();
	snprintf(path, sizeof(path), "%s/%s/enable", tracefs, EVENT);
	if (access(path, W_OK)) {
		fprintf(stderr, "lab-reclaim-attrib: %s: %s (no attribution tracepoint: is the patch series applied?)\n",
			path, strerror(errno));
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	/* A bigger buffer: a reclaim storm emits thousands of events a second. */
	write_tracefs(tracefs, "buffer_size_kb", "8192");
	if (write_tracefs(tracefs, "trace", "") ||
	    write_tracefs(tracefs, EVENT "/enable", "1"))
		return 1;
	snprintf(path, sizeof(path), "%s/trace_pipe", tracefs);
	pfd.fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (pfd.fd < 0) {
		fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", path, strerror(errno));
		write_tracefs(tracefs, EVENT "/enable", "0");
		return 1;
	}
	pfd.events = POLLIN;
	for (;;) {
		if (stop && !disabled) {
			/* Then drain what the buffer still holds. */
			write_tracefs(tracefs, EVENT "/enable", "0");
			disabled = true;
		}
		if (!stop && poll(&pfd, 1, 200) <= 0)
			continue;
		n = read(pfd.fd, buf + len, sizeof(buf) - 1 - len);
		if (n > 0) {
			len += n;
			consume(buf, &len);
			if (len == sizeof(buf) - 1)	/* a line longer than the buffer */
				len = 0;
			continue;
		}
		if (n == 0)	/* a regular file standing in for trace_pipe */
			break;
		if (n < 0 && (errno == EINTR || (errno == EAGAIN && !stop)))
			continue;
		if (n < 0 && errno != EAGAIN) {
			fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", path, strerror(errno));
			write_tracefs(tracefs, EVENT "/enable", "0");
			return 1;
		}
		if (stop)	/* drained after the event was disabled */
			break;
	}
	close(pfd.fd);
	if (!disabled)
		write_tracefs(tracefs, EVENT "/enable", "0");
	if (lost_rows)
		fprintf(stderr, "lab-reclaim-attrib: %llu events beyond %d rows not counted\n",
			lost_rows, MAX_ROWS);
	return write_csv(outpath) ? 1 : 0;
}
