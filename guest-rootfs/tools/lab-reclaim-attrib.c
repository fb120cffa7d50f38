// SPDX-License-Identifier: GPL-2.0
/*
 * lab-reclaim-attrib: who reclaimed whose pages.  Enables vmscan events in
 * tracefs, reads trace_pipe for -d seconds or until SIGINT/SIGTERM, and
 * writes one CSV row per (reclaimer, scanned cgroup, target, lru):
 *
 *   reclaimer_cgroup,scanned_cgroup,nr_scanned,nr_reclaimed,reclaim_ns,
 *   events,target_cgroup,lru,nr_writeback,nr_immediate
 *
 *   lab-reclaim-attrib -o out.csv [-d seconds] [-t tracefs] [-r cgroup_root]
 *                      [-p proc_root]
 *
 * Two modes, chosen by what the kernel has, and written with the event
 * names to the sidecar out.csv.meta (mode=patched or mode=vanilla):
 *
 * patched: the series' vmscan:mm_vmscan_lru_shrink_inactive_memcg names
 *   the lruvec's cgroup, the reclaiming task's and the reclaim target's
 *   by cgroup id (the inode number of the cgroup directory), which are
 *   resolved to paths under the cgroup root; a cgroup gone before it was
 *   first seen is "cgid:N".  kswapd is "kswapd", a global target "global".
 * vanilla: a 6.1 kernel's mm_vmscan_lru_shrink_inactive carries no memcg,
 *   so scanned_cgroup is "unknown" and the reclaimer is the cgroup of the
 *   event's pid (from /proc/PID/cgroup, looked up once per pid); the
 *   target is "global" inside direct reclaim or kswapd, "memcg" inside
 *   memcg limit reclaim.
 *
 * In both modes the direct and memcg reclaim begin/end events, when the
 * kernel has them, time each reclaim pass of a pid; the time goes to a
 * row of scanned cgroup and lru "-" whose events column counts the
 * passes.  Fields are found
 * by the names the event's format file prints, not by position.  Exits 1
 * naming the path when a needed event or field is missing.
 */
#define _GNU_SOURCE
#include <ctype.h>
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
#include <time.h>
#include <unistd.h>

#define PATCHED_EVENT "mm_vmscan_lru_shrink_inactive_memcg"
#define VANILLA_EVENT "mm_vmscan_lru_shrink_inactive"
#define MAX_NAMES 512
#define MAX_ROWS 2048
#define NR_PIDS 4096		/* a power of two: the pid hash */
#define NAME_LEN 256

enum pass { PASS_NONE, PASS_DIRECT, PASS_MEMCG };

/* The begin/end events, in pairs: optional when patched. */
static const char * const pass_events[] = {
	"mm_vmscan_direct_reclaim_begin", "mm_vmscan_direct_reclaim_end",
	"mm_vmscan_memcg_reclaim_begin", "mm_vmscan_memcg_reclaim_end",
};
#define NR_PASS_EVENTS (sizeof(pass_events) / sizeof(pass_events[0]))

/* Every name in the CSV, interned, so that a row key is four ints. */
struct name {
	char path[NAME_LEN];
};

/* The cgroup ids resolved so far, and their names[] index. */
struct cgid_name {
	unsigned long long cgid;
	int name;
};

struct row {
	int reclaimer, scanned, target, lru;	/* indexes into names[] */
	unsigned long long nr_scanned, nr_reclaimed, reclaim_ns;
	unsigned long long events, nr_writeback, nr_immediate;
};

struct pid_state {
	int pid;		/* 0: free slot */
	int cgroup;		/* name index */
	enum pass pass;
	int target;		/* last target seen in this pass, or -1 */
	unsigned long long begin_ns;
};

static struct name names[MAX_NAMES];
static int nr_names;
static struct cgid_name cgids[MAX_NAMES];
static int nr_cgids;
static struct row rows[MAX_ROWS];
static int nr_rows;
static struct pid_state pids[NR_PIDS];
static unsigned long long lost_events;
static const char *cgroup_root = "/sys/fs/cgroup", *proc_root = "/proc";
static const char *tracefs = "/sys/kernel/tracing";
static bool patched, have_passes;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* Index of name S, added on first sight; -1 if the table is full. */
static int intern(const char *s)
{
	int i;

	for (i = 0; i < nr_names; i++)
		if (!strcmp(names[i].path, s))
			return i;
	if (nr_names == MAX_NAMES)
		return -1;
	snprintf(names[nr_names].path, NAME_LEN, "%s", s);
	return nr_names++;
}

/* A cgroup path as the CSV writes it: relative to the root, or "/". */
static int intern_cgroup_path(const char *path)
{
	while (*path == '/')
		path++;
	return intern(*path ? path : "/");
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

/*
 * The name of cgroup id CGID.  cgroup_id() is the kernfs inode number of
 * the cgroup's directory, so a walk of the cgroup root finds it; a walk
 * per new id is cheap next to the reclaim that produced the event.
 */
static int cgid_name(unsigned long long cgid)
{
	char buf[32];
	int i, idx;

	if (!cgid)	/* a kernel without memcg */
		return intern("none");
	for (i = 0; i < nr_cgids; i++)
		if (cgids[i].cgid == cgid)
			return cgids[i].name;
	wanted_cgid = cgid;
	if (nftw(cgroup_root, match_cgid, 16, FTW_PHYS | FTW_MOUNT) == 1) {
		idx = intern_cgroup_path(found_path + strlen(cgroup_root));
	} else {
		snprintf(buf, sizeof(buf), "cgid:%llu", cgid);
		idx = intern(buf);
	}
	/* Not cached when full: a walk per event is slow, not wrong. */
	if (idx >= 0 && nr_cgids < MAX_NAMES)
		cgids[nr_cgids++] = (struct cgid_name){ cgid, idx };
	return idx;
}

/* The cgroup v2 path of PID ("0::/path"), or "unknown" if it exited. */
static int pid_cgroup_name(int pid)
{
	char path[PATH_MAX], line[PATH_MAX + 8];
	int idx = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d/cgroup", proc_root, pid);
	f = fopen(path, "re");
	if (!f)
		return intern("unknown");
	while (idx < 0 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "0::", 3))
			idx = intern_cgroup_path(line + 3);
	}
	fclose(f);
	return idx < 0 ? intern("unknown") : idx;
}

/*
 * The state of PID, looked up (and its cgroup read) on first sight.  A
 * reused pid keeps the cgroup of its first owner: pids are not reused
 * within a short run.
 */
static struct pid_state *pid_state(int pid, bool kswapd)
{
	unsigned int h = (unsigned int)pid & (NR_PIDS - 1), n;
	struct pid_state *ps;

	for (n = 0; n < NR_PIDS; n++, h = (h + 1) & (NR_PIDS - 1)) {
		ps = &pids[h];
		if (ps->pid == pid)
			return ps;
		if (!ps->pid)
			break;
	}
	if (n == NR_PIDS)
		return NULL;
	ps->pid = pid;
	ps->cgroup = kswapd ? intern("kswapd") : pid_cgroup_name(pid);
	ps->pass = PASS_NONE;
	ps->target = -1;
	return ps;
}

static struct row *row_of(int reclaimer, int scanned, int target, int lru)
{
	struct row *r;
	int i;

	if (reclaimer < 0 || scanned < 0 || target < 0 || lru < 0)
		return NULL;
	for (i = 0; i < nr_rows; i++) {
		r = &rows[i];
		if (r->reclaimer == reclaimer && r->scanned == scanned &&
		    r->target == target && r->lru == lru)
			return r;
	}
	if (nr_rows == MAX_ROWS)
		return NULL;
	r = &rows[nr_rows++];
	memset(r, 0, sizeof(*r));
	r->reclaimer = reclaimer;
	r->scanned = scanned;
	r->target = target;
	r->lru = lru;
	return r;
}

/* The number after " KEY=" in FIELDS; false if FIELDS lacks KEY. */
static bool field(const char *fields, const char *key, unsigned long long *val)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), " %s=", key);
	p = strstr(fields, pat);
	if (!p)
		return false;
	*val = strtoull(p + strlen(pat), NULL, 10);
	return true;
}

/*
 * A trace_pipe line is "<comm>-<pid> [<cpu>] <flags> <secs>.<usecs>:
 * <event>: <fields>"; comm may hold spaces and dashes, so the pid is the
 * number after the last dash before " [", and the timestamp the word
 * before the event name.
 */
struct trace_line {
	int pid;
	bool kswapd;
	unsigned long long ts_ns;
	const char *event;	/* NUL-terminated by parse_line() */
	const char *fields;	/* starts with a space */
};

static bool parse_line(char *line, struct trace_line *tl)
{
	char *cpu, *dash, *ev, *colon, *ts, *dot;
	unsigned long long frac = 0;
	int digits;

	cpu = strstr(line, " [");
	if (!cpu)
		return false;
	*cpu = '\0';
	dash = strrchr(line, '-');
	if (!dash)
		return false;
	tl->pid = atoi(dash + 1);
	while (*line == ' ')
		line++;
	tl->kswapd = !strncmp(line, "kswapd", 6);
	/* The event name ends at the second ": " after the cpu. */
	ts = strstr(cpu + 1, ": ");
	if (!ts)
		return false;
	ev = ts + 2;
	colon = strstr(ev, ": ");
	if (!colon)
		return false;
	*colon = '\0';
	tl->event = ev;
	tl->fields = colon + 1;
	*ts = '\0';
	ts = strrchr(cpu + 1, ' ');
	if (!ts)
		return false;
	dot = strchr(ts, '.');
	tl->ts_ns = strtoull(ts + 1, NULL, 10) * 1000000000ULL;
	/* The fraction has 6 digits ("local" clock) or 9 ("mono"). */
	for (digits = 0, dot = dot ? dot + 1 : NULL; dot && isdigit(*dot) &&
	     digits < 9; dot++, digits++)
		frac = frac * 10 + (*dot - '0');
	for (; digits < 9; digits++)
		frac *= 10;
	tl->ts_ns += frac;
	return true;
}

static void account_pass(struct pid_state *ps, const struct trace_line *tl,
			 bool begin, enum pass pass)
{
	struct row *r;
	int target;

	if (begin) {
		ps->pass = pass;
		ps->begin_ns = tl->ts_ns;
		ps->target = -1;
		return;
	}
	if (ps->pass != pass)	/* the begin was before we started */
		return;
	target = ps->target >= 0 ? ps->target :
		 intern(pass == PASS_MEMCG ? "memcg" : "global");
	r = row_of(ps->cgroup, intern("-"), target, intern("-"));
	ps->pass = PASS_NONE;
	if (!r) {
		lost_events++;
		return;
	}
	r->reclaim_ns += tl->ts_ns - ps->begin_ns;
	r->events++;
}

static void account_shrink(struct pid_state *ps, const struct trace_line *tl)
{
	unsigned long long cgid, task_cgid, target_cgid, kswapd = tl->kswapd;
	unsigned long long scanned = 0, reclaimed = 0, wb = 0, imm = 0;
	int reclaimer = ps->cgroup, scanned_cg, target, lru;
	struct row *r;

	field(tl->fields, "nr_scanned", &scanned);
	field(tl->fields, "nr_reclaimed", &reclaimed);
	field(tl->fields, "nr_writeback", &wb);
	field(tl->fields, "nr_immediate", &imm);
	if (patched) {
		if (!field(tl->fields, "cgid", &cgid) ||
		    !field(tl->fields, "task_cgid", &task_cgid) ||
		    !field(tl->fields, "target_cgid", &target_cgid))
			return;
		field(tl->fields, "kswapd", &kswapd);
		lru = intern(strstr(tl->fields, " lru=file") ? "file" : "anon");
		/* task_cgid 0: a reclaimer without an mm, such as kswapd. */
		if (kswapd || task_cgid)
			reclaimer = kswapd ? intern("kswapd") : cgid_name(task_cgid);
		scanned_cg = cgid_name(cgid);
		target = target_cgid ? cgid_name(target_cgid) : intern("global");
		ps->target = target;
	} else {
		/* flags is e.g. RECLAIM_WB_FILE|RECLAIM_WB_ASYNC */
		lru = intern(strstr(tl->fields, "RECLAIM_WB_FILE") ? "file" :
			     strstr(tl->fields, "RECLAIM_WB_ANON") ? "anon" : "-");
		scanned_cg = intern("unknown");
		target = intern(ps->pass == PASS_MEMCG ? "memcg" :
				ps->pass == PASS_DIRECT || tl->kswapd ? "global" :
				"unknown");
	}
	r = row_of(reclaimer, scanned_cg, target, lru);
	if (!r) {
		lost_events++;
		return;
	}
	r->nr_scanned += scanned;
	r->nr_reclaimed += reclaimed;
	r->nr_writeback += wb;
	r->nr_immediate += imm;
	r->events++;
}

/* Adds one trace line to its row; lines of other events are ignored. */
static void account_line(char *line)
{
	const char *shrink = patched ? PATCHED_EVENT : VANILLA_EVENT;
	struct trace_line tl;
	struct pid_state *ps;
	size_t i;

	if (!parse_line(line, &tl))
		return;
	ps = pid_state(tl.pid, tl.kswapd);
	if (!ps) {
		lost_events++;
		return;
	}
	if (!strcmp(tl.event, shrink)) {
		account_shrink(ps, &tl);
		return;
	}
	for (i = 0; i < NR_PASS_EVENTS; i++)
		if (!strcmp(tl.event, pass_events[i]))
			account_pass(ps, &tl, !(i & 1),
				     i < 2 ? PASS_DIRECT : PASS_MEMCG);
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

static int write_tracefs(const char *file, const char *val)
{
	char path[PATH_MAX];
	int ret = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tracefs, file);
	f = fopen(path, "we");
	if (!f || fputs(val, f) == EOF || fclose(f) == EOF) {
		fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", path, strerror(errno));
		ret = -1;
	}
	return ret;
}

static int set_events(const char *val)
{
	char file[PATH_MAX];
	int ret = 0;
	size_t i;

	snprintf(file, sizeof(file), "events/vmscan/%s/enable",
		 patched ? PATCHED_EVENT : VANILLA_EVENT);
	ret |= write_tracefs(file, val);
	for (i = 0; have_passes && i < NR_PASS_EVENTS; i++) {
		snprintf(file, sizeof(file), "events/vmscan/%s/enable",
			 pass_events[i]);
		ret |= write_tracefs(file, val);
	}
	return ret;
}

/*
 * 0 when EVENT's format file prints every key of KEYS (a NULL-ended
 * list) as "key=" in its print fmt; 1 when there is no format file;
 * exits naming the file when it cannot be read or lacks a key.
 */
static int check_format(const char *event, const char * const *keys)
{
	char path[PATH_MAX], line[4096], pat[64], *fmt = NULL;
	FILE *f;

	snprintf(path, sizeof(path), "%s/events/vmscan/%s/format", tracefs, event);
	f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return 1;
		fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	while (!fmt && fgets(line, sizeof(line), f))
		fmt = strstr(line, "print fmt: \"");
	fclose(f);
	for (; fmt && *keys; keys++) {
		/* " key=", or the first key right after the quote */
		snprintf(pat, sizeof(pat), " %s=", *keys);
		if (strstr(fmt, pat))
			continue;
		snprintf(pat, sizeof(pat), "\"%s=", *keys);
		if (!strstr(fmt, pat))
			break;
	}
	if (!fmt || *keys) {
		fprintf(stderr, "lab-reclaim-attrib: %s: no '%s=' in print fmt\n",
			path, fmt ? *keys : "print fmt");
		exit(1);
	}
	return 0;
}

static void choose_mode(void)
{
	static const char * const patched_keys[] = {
		"cgid", "task_cgid", "target_cgid", "kswapd", "lru",
		"nr_scanned", "nr_reclaimed", NULL,
	};
	static const char * const vanilla_keys[] = {
		"nr_scanned", "nr_reclaimed", "flags", NULL,
	};
	static const char * const no_keys[] = { NULL };
	size_t i;

	patched = !check_format(PATCHED_EVENT, patched_keys);
	if (!patched && check_format(VANILLA_EVENT, vanilla_keys)) {
		fprintf(stderr, "lab-reclaim-attrib: %s/events/vmscan/%s/format: %s\n",
			tracefs, VANILLA_EVENT, strerror(ENOENT));
		exit(1);
	}
	/* Vanilla needs the passes to know the target; patched does not. */
	have_passes = true;
	for (i = 0; i < NR_PASS_EVENTS; i++) {
		if (!check_format(pass_events[i], no_keys))
			continue;
		if (!patched) {
			fprintf(stderr, "lab-reclaim-attrib: %s/events/vmscan/%s/format: %s\n",
				tracefs, pass_events[i], strerror(ENOENT));
			exit(1);
		}
		have_passes = false;
	}
}

static int write_outputs(const char *outpath)
{
	char meta[PATH_MAX];
	const char *failed = outpath;
	FILE *out;
	int i;

	out = fopen(outpath, "wx");
	if (!out)
		goto fail;
	fprintf(out, "reclaimer_cgroup,scanned_cgroup,nr_scanned,nr_reclaimed,"
		"reclaim_ns,events,target_cgroup,lru,nr_writeback,nr_immediate\n");
	for (i = 0; i < nr_rows; i++) {
		struct row *r = &rows[i];

		fprintf(out, "%s,%s,%llu,%llu,%llu,%llu,%s,%s,%llu,%llu\n",
			names[r->reclaimer].path, names[r->scanned].path,
			r->nr_scanned, r->nr_reclaimed, r->reclaim_ns, r->events,
			names[r->target].path, names[r->lru].path,
			r->nr_writeback, r->nr_immediate);
	}
	if (fclose(out) == EOF)
		goto fail;

	/* The mode is beside the CSV, not in it: csv readers take line 1. */
	snprintf(meta, sizeof(meta), "%s.meta", outpath);
	failed = meta;
	out = fopen(meta, "we");
	if (!out)
		goto fail;
	fprintf(out, "mode=%s\nshrink_event=%s\npass_events=%s\nlost_events=%llu\n",
		patched ? "patched" : "vanilla",
		patched ? PATCHED_EVENT : VANILLA_EVENT,
		have_passes ? "yes" : "no", lost_events);
	if (fclose(out) == EOF)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", failed, strerror(errno));
	return -1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: lab-reclaim-attrib -o out.csv [-d seconds] [-t tracefs] [-r cgroup_root] [-p proc_root]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static char buf[1 << 16];
	const char *outpath = NULL;
	char path[PATH_MAX], *end;
	struct timespec now, deadline = { 0 };
	struct sigaction sa;
	struct pollfd pfd;
	bool disabled = false;
	long duration = 0;
	size_t len = 0;
	ssize_t n;
	int opt;

	while ((opt = getopt(argc, argv, "o:d:t:r:p:")) != -1) {
		switch (opt) {
		case 'o':
			outpath = optarg;
			break;
		case 'd':
			duration = strtol(optarg, &end, 10);
			if (*end || duration < 1 || duration > 86400) {
				fprintf(stderr, "lab-reclaim-attrib: bad duration '%s' (1..86400 s)\n",
					optarg);
				return 2;
			}
			break;
		case 't':
			tracefs = optarg;
			break;
		case 'r':
			cgroup_root = optarg;
			break;
		case 'p':
			proc_root = optarg;
			break;
		default:
			usage();
		}
	}
	if (!outpath || optind != argc)
		usage();
	choose_mode();
	if (!access(outpath, F_OK)) {
		/* Before tracing, not after a run whose result we would lose. */
		fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", outpath, strerror(EEXIST));
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += duration;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	/*
	 * A reclaim storm emits thousands of events a second: ask for a
	 * bigger buffer, but a kernel that refuses still traces.
	 */
	write_tracefs("buffer_size_kb", "8192");
	if (write_tracefs("trace", "") || set_events("1")) {
		set_events("0");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/trace_pipe", tracefs);
	pfd.fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (pfd.fd < 0) {
		fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", path, strerror(errno));
		set_events("0");
		return 1;
	}
	pfd.events = POLLIN;
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (duration && (now.tv_sec > deadline.tv_sec ||
				 (now.tv_sec == deadline.tv_sec &&
				  now.tv_nsec >= deadline.tv_nsec)))
			stop = 1;
		if (stop && !disabled) {
			/* Then drain what the buffer still holds. */
			set_events("0");
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
		if (errno == EINTR || (errno == EAGAIN && !stop))
			continue;
		if (errno != EAGAIN) {
			fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", path, strerror(errno));
			set_events("0");
			return 1;
		}
		break;	/* drained after the events were disabled */
	}
	close(pfd.fd);
	if (!disabled && set_events("0"))
		return 1;
	if (lost_events)
		fprintf(stderr, "lab-reclaim-attrib: %llu events not counted (more than %d rows, %d names or %d pids)\n",
			lost_events, MAX_ROWS, MAX_NAMES, NR_PIDS);
	return write_outputs(outpath) ? 1 : 0;
}
