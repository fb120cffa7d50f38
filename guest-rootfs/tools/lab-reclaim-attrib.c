// SPDX-License-Identifier: GPL-2.0
/*
 * lab-reclaim-attrib: who reclaimed whose pages, summed in the kernel.
 * Puts hist triggers on vmscan events for -d seconds or until
 * SIGINT/SIGTERM, then reads them and writes one CSV row per
 * (reclaimer, scanned cgroup, target, lru):
 *
 *   reclaimer_cgroup,scanned_cgroup,nr_scanned,nr_reclaimed,reclaim_ns,
 *   events,target_cgroup,lru,nr_writeback,nr_immediate
 *
 *   lab-reclaim-attrib -o out.csv [-d seconds] [-i poll_ms] [-t tracefs]
 *                      [-r cgroup_root] [-p proc_root]
 *
 * The events must already be enabled: the lab enables them at boot
 * (trace_event= on the kernel command line) and nothing disables them,
 * because enabling or disabling a tracepoint patches kernel text on every
 * call site, and under QEMU TCG a text_poke while reclaim ran once left a
 * stray int3 that panicked the guest.  Adding and removing hist triggers
 * on an enabled event patches nothing.  Nothing goes through the ring
 * buffer, so nothing is lost to it; a hist that runs out of entries says
 * so ("Dropped"), and that count is in out.csv.meta.
 *
 * patched: the series' vmscan:mm_vmscan_lru_shrink_inactive_memcg names
 *   the lruvec's cgroup, the reclaiming task's and the reclaim target's by
 *   cgroup id (the inode number of the cgroup directory), resolved to
 *   paths under the cgroup root; a cgroup gone before the end is
 *   "cgid:N".  kswapd is "kswapd", another task without an mm "kthread",
 *   a global target "global".  One hist per (kswapd, lru) (a 6.1 hist has
 *   at most three keys and two values besides hitcount) for pages
 *   scanned and reclaimed, and one for writeback and immediate.
 * vanilla: 6.1's mm_vmscan_lru_shrink_inactive carries no memcg: the hist
 *   is keyed by pid, the reclaimer is the pid's cgroup (read from
 *   /proc/PID/cgroup while it lives; "unknown" after), the scanned cgroup
 *   "unknown", the target "global" for kswapd and "-" otherwise.
 *
 * In both modes, where the kernel has synthetic events, the direct and
 * memcg reclaim begin/end events time each reclaim pass: a synthetic
 * event per pass carries its pid and length, a hist sums them per pid,
 * and each pid's time goes to a row of its cgroup with scanned cgroup and
 * lru "-", target "global" (direct) or "memcg", events = passes.  The
 * pid-keyed hists are read every -i ms (default 1000) so that a pid's
 * cgroup is known before it exits.
 *
 * Beside the CSV: out.csv.meta (mode, events, drops, unresolved pids,
 * how long installing and reading the hists took) and out.csv.pgscan,
 * every memcg's memory.stat pgscan at four points, to check that the rows
 * account for every page scanned.  Installing and reading the hists take
 * time while reclaim goes on (under TCG, most of a second while the
 * dirtier scans hundreds of thousands of pages a second), so no single
 * window matches the hists': the outer one (pgscan_start to pgscan_end,
 * before installing to after reading) holds every page they counted, and
 * the inner one (pgscan_inner_start to pgscan_inner_end, after installing
 * to before reading) only pages they counted.
 * Exits 1 naming the path when a needed event, field or file is missing.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
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
#define MAX_MEMCGS 1024
#define NR_PIDS 4096		/* a power of two: the pid hash */
#define NAME_LEN 256
#define MAX_PAIRS 8
#define HIST_BUF (4 << 20)

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

/* A pid seen in a pid-keyed hist, and its cgroup (names[]) or -1. */
struct pid_name {
	int pid;		/* 0: free slot */
	int cgroup;
};

/*
 * When memory.stat's pgscan is read: before the hists are installed,
 * after, before they are read and after.
 */
enum snap { SNAP_START, SNAP_INNER_START, SNAP_INNER_END, SNAP_END, NR_SNAPS };

/* A memcg's pgscan at each snap; a memcg not there yet counts from 0. */
struct memcg_scan {
	char path[NAME_LEN];
	unsigned long long pgscan[NR_SNAPS];
	bool seen[NR_SNAPS];
};

/*
 * A hist trigger the tool installs: on EVENT (under events/), TRIGGER is
 * written to install it and "!TRIGGER" to remove it.  kind tells how its
 * entries become rows; kswapd and lru come from its filter.
 */
enum hist_kind { HIST_SHRINK, HIST_SHRINK_WB, HIST_PID_SHRINK, HIST_PASS, HIST_NONE };

struct hist {
	const char *event;
	const char *trigger;
	enum hist_kind kind;
	int kswapd;		/* HIST_SHRINK*: 0 or 1 */
	const char *lru;	/* HIST_SHRINK*, HIST_PID_SHRINK: file or anon */
	const char *target;	/* HIST_PASS: "global" or "memcg" */
	bool installed;
	unsigned long long dropped;
};

#define SHRINK_KEYS "hist:keys=memcg_cgid,task_memcg_cgid,target_memcg_cgid"
#define SHRINK(k, f, l) \
	{ "vmscan/" PATCHED_EVENT, SHRINK_KEYS ":vals=hitcount,nr_scanned,nr_reclaimed:size=2048 if kswapd == " #k " && file == " #f, HIST_SHRINK, k, l, NULL, false, 0 }, \
	{ "vmscan/" PATCHED_EVENT, SHRINK_KEYS ":vals=hitcount,nr_writeback,nr_immediate:size=2048 if kswapd == " #k " && file == " #f, HIST_SHRINK_WB, k, l, NULL, false, 0 }

static struct hist patched_hists[] = {
	SHRINK(0, 1, "file"), SHRINK(0, 0, "anon"),
	SHRINK(1, 1, "file"), SHRINK(1, 0, "anon"),
};

/* RECLAIM_WB_FILE and RECLAIM_WB_ANON of include/trace/events/vmscan.h */
static struct hist vanilla_hists[] = {
	{ "vmscan/" VANILLA_EVENT, "hist:keys=common_pid:vals=hitcount,nr_scanned,nr_reclaimed:size=4096 if reclaim_flags & 2",
	  HIST_PID_SHRINK, 0, "file", NULL, false, 0 },
	{ "vmscan/" VANILLA_EVENT, "hist:keys=common_pid:vals=hitcount,nr_scanned,nr_reclaimed:size=4096 if reclaim_flags & 1",
	  HIST_PID_SHRINK, 0, "anon", NULL, false, 0 },
};

/*
 * Pass timing: a synthetic event per reclaim pass, fired when the end
 * event matches the begin of the same pid.  Installed in this order and
 * removed in the reverse one (a trigger may not go while another refers
 * to its variable or event).
 */
#define SYNTH_DIRECT "memcg_lab_direct_pass"
#define SYNTH_MEMCG "memcg_lab_memcg_pass"
/* "int pid": a synthetic field's type must match common_pid's by name. */
static const char * const synth_defs[] = {
	SYNTH_DIRECT " int pid; u64 usecs",
	SYNTH_MEMCG " int pid; u64 usecs",
};

#define NR_SYNTH (sizeof(synth_defs) / sizeof(synth_defs[0]))
/* A variable per begin event: a name on two events would be ambiguous. */
#define PASS_BEGIN(var) "hist:keys=common_pid:" var "=common_timestamp.usecs"
#define PASS_END(begin, var, synth) \
	"hist:keys=common_pid:" var "_us=common_timestamp.usecs-$" var ":onmatch(vmscan." begin ").trace(" synth ",common_pid,$" var "_us)"
static struct hist pass_hists[] = {
	{ "synthetic/" SYNTH_DIRECT, "hist:keys=pid:vals=hitcount,usecs:size=4096", HIST_PASS, 0, NULL, "global", false, 0 },
	{ "synthetic/" SYNTH_MEMCG, "hist:keys=pid:vals=hitcount,usecs:size=4096", HIST_PASS, 0, NULL, "memcg", false, 0 },
	{ "vmscan/mm_vmscan_direct_reclaim_begin", PASS_BEGIN("memcg_lab_dts0"), HIST_NONE, 0, NULL, NULL, false, 0 },
	{ "vmscan/mm_vmscan_memcg_reclaim_begin", PASS_BEGIN("memcg_lab_mts0"), HIST_NONE, 0, NULL, NULL, false, 0 },
	{ "vmscan/mm_vmscan_direct_reclaim_end",
	  PASS_END("mm_vmscan_direct_reclaim_begin", "memcg_lab_dts0", SYNTH_DIRECT), HIST_NONE, 0, NULL, NULL, false, 0 },
	{ "vmscan/mm_vmscan_memcg_reclaim_end",
	  PASS_END("mm_vmscan_memcg_reclaim_begin", "memcg_lab_mts0", SYNTH_MEMCG), HIST_NONE, 0, NULL, NULL, false, 0 },
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static struct name names[MAX_NAMES];
static int nr_names;
static struct cgid_name cgids[MAX_NAMES];
static int nr_cgids;
static struct row rows[MAX_ROWS];
static int nr_rows;
static struct pid_name pids[NR_PIDS];
static struct memcg_scan memcgs[MAX_MEMCGS];
static int nr_memcgs;
static unsigned long long lost_rows, unresolved_pids;
static const char *cgroup_root = "/sys/fs/cgroup", *proc_root = "/proc";
static const char *tracefs = "/sys/kernel/tracing";
static bool patched, have_passes;
static char *hist_buf;
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
 * the cgroup's directory, so a walk of the cgroup root finds it.
 */
static int cgid_name(unsigned long long cgid)
{
	char buf[32];
	int i, idx;

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
	/* Not cached when full: a walk per entry is slow, not wrong. */
	if (idx >= 0 && nr_cgids < MAX_NAMES)
		cgids[nr_cgids++] = (struct cgid_name){ cgid, idx };
	return idx;
}

/*
 * The cgroup of PID: "kswapd" for kswapd, the cgroup v2 path ("0::/path")
 * or, on cgroup v1, the memory controller's ("N:memory:/path"); -1 if the
 * pid is gone.
 */
static int pid_cgroup_name(int pid)
{
	char path[PATH_MAX], line[PATH_MAX + 8], *p;
	int idx = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d/comm", proc_root, pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f) && !strncmp(line, "kswapd", 6))
		idx = intern("kswapd");
	fclose(f);
	if (idx >= 0)
		return idx;
	snprintf(path, sizeof(path), "%s/%d/cgroup", proc_root, pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (idx < 0 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "0::", 3))
			idx = intern_cgroup_path(line + 3);
		else if ((p = strstr(line, ":memory:")))
			idx = intern_cgroup_path(p + 8);
	}
	fclose(f);
	return idx < 0 ? intern("unknown") : idx;
}

/*
 * The cgroup (names[] index) of PID, looked up on first sight and kept:
 * pids are not reused within a run.  LIVE false: the end of the run,
 * when a pid not seen before may be gone ("unknown").
 */
static int pid_cgroup(int pid, bool live)
{
	unsigned int h = (unsigned int)pid & (NR_PIDS - 1), n;
	struct pid_name *pn;

	for (n = 0; n < NR_PIDS; n++, h = (h + 1) & (NR_PIDS - 1)) {
		pn = &pids[h];
		if (pn->pid == pid)
			return pn->cgroup;
		if (!pn->pid)
			break;
	}
	if (n == NR_PIDS)
		return intern("unknown");
	pn->cgroup = pid_cgroup_name(pid);
	if (pn->cgroup < 0) {
		if (live)	/* gone: "unknown", counted at the end */
			return -1;
		unresolved_pids++;
		pn->cgroup = intern("unknown");
	}
	pn->pid = pid;
	return pn->cgroup;
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

/* The "name: number" pairs of one hist entry line. */
struct entry {
	int n;
	struct {
		char name[48];
		unsigned long long val;
	} kv[MAX_PAIRS];
};

/*
 * Parses "{ k1: 1, k2: 2 } hitcount: 3  v1: 4  v2: 5" into ENTRY; false
 * for a line of another shape.
 */
static bool parse_entry(const char *line, struct entry *e)
{
	const char *p = line, *colon, *name;
	size_t len;

	if (*p != '{')
		return false;
	e->n = 0;
	while ((colon = strchr(p, ':')) && e->n < MAX_PAIRS) {
		name = colon;
		while (name > p && (isalnum((unsigned char)name[-1]) || name[-1] == '_'))
			name--;
		len = colon - name;
		if (!len || len >= sizeof(e->kv[0].name))
			return false;
		memcpy(e->kv[e->n].name, name, len);
		e->kv[e->n].name[len] = '\0';
		p = colon + 1;
		while (*p == ' ')
			p++;
		if (!isdigit((unsigned char)*p))
			return false;
		e->kv[e->n].val = strtoull(p, (char **)&p, 10);
		e->n++;
	}
	return e->n > 0;
}

/* The value of NAME in E; false if E lacks it. */
static bool entry_val(const struct entry *e, const char *name,
		      unsigned long long *val)
{
	int i;

	for (i = 0; i < e->n; i++) {
		if (!strcmp(e->kv[i].name, name)) {
			*val = e->kv[i].val;
			return true;
		}
	}
	return false;
}

static void tracefs_path(char *path, size_t size, const char *event,
			 const char *file)
{
	if (event)
		snprintf(path, size, "%s/events/%s/%s", tracefs, event, file);
	else
		snprintf(path, size, "%s/%s", tracefs, file);
}

/*
 * Appends PREFIX VAL to a tracefs file in one write(): O_APPEND, never
 * O_TRUNC, because opening a trigger file with O_TRUNC removes every
 * trigger of the event (the throttle hist of the lab's runner among
 * them).  Not fopen("a"): it seeks to the end, which synthetic_events
 * (a seq_file) refuses with EINVAL.
 */
static int append_tracefs(const char *event, const char *file,
			  const char *prefix, const char *val, bool quiet)
{
	char path[PATH_MAX], line[1024];
	int fd, len, ret = 0;

	tracefs_path(path, sizeof(path), event, file);
	len = snprintf(line, sizeof(line), "%s%s\n", prefix, val);
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0 || write(fd, line, len) != len)
		ret = -1;
	if (ret && !quiet)
		fprintf(stderr, "lab-reclaim-attrib: %s: %s: %s%s\n", path,
			strerror(errno), prefix, val);
	if (fd >= 0 && close(fd) && !ret) {
		if (!quiet)
			fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", path, strerror(errno));
		ret = -1;
	}
	return ret;
}

/* The whole of a tracefs file into hist_buf; NULL (and says why) if not. */
static char *read_tracefs(const char *event, const char *file)
{
	char path[PATH_MAX];
	size_t len = 0, n;
	FILE *f;

	tracefs_path(path, sizeof(path), event, file);
	f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	while (len < HIST_BUF - 1 &&
	       (n = fread(hist_buf + len, 1, HIST_BUF - 1 - len, f)) > 0)
		len += n;
	fclose(f);
	hist_buf[len] = '\0';
	return hist_buf;
}

static void add_shrink(const struct hist *h, const struct entry *e)
{
	unsigned long long cgid, task, target, hits = 0, a = 0, b = 0;
	int reclaimer;
	struct row *r;

	if (!entry_val(e, "memcg_cgid", &cgid) ||
	    !entry_val(e, "task_memcg_cgid", &task) ||
	    !entry_val(e, "target_memcg_cgid", &target))
		return;
	entry_val(e, "hitcount", &hits);
	if (h->kswapd)
		reclaimer = intern("kswapd");
	else
		reclaimer = task ? cgid_name(task) : intern("kthread");
	r = row_of(reclaimer, cgid ? cgid_name(cgid) : intern("none"),
		   target ? cgid_name(target) : intern("global"), intern(h->lru));
	if (!r) {
		lost_rows++;
		return;
	}
	if (h->kind == HIST_SHRINK) {
		entry_val(e, "nr_scanned", &a);
		entry_val(e, "nr_reclaimed", &b);
		r->nr_scanned += a;
		r->nr_reclaimed += b;
		r->events += hits;
	} else {
		entry_val(e, "nr_writeback", &a);
		entry_val(e, "nr_immediate", &b);
		r->nr_writeback += a;
		r->nr_immediate += b;
	}
}

static void add_pid_entry(const struct hist *h, const struct entry *e)
{
	unsigned long long pid, hits = 0, a = 0, b = 0;
	int cg, kswapd;
	struct row *r;

	if (!entry_val(e, h->kind == HIST_PASS ? "pid" : "common_pid", &pid))
		return;
	entry_val(e, "hitcount", &hits);
	cg = pid_cgroup((int)pid, false);
	if (h->kind == HIST_PASS) {
		entry_val(e, "usecs", &a);
		r = row_of(cg, intern("-"), intern(h->target), intern("-"));
		if (r) {
			r->reclaim_ns += a * 1000;
			r->events += hits;
		}
	} else {
		kswapd = intern("kswapd");
		entry_val(e, "nr_scanned", &a);
		entry_val(e, "nr_reclaimed", &b);
		r = row_of(cg, intern("unknown"),
			   intern(cg == kswapd ? "global" : "-"), intern(h->lru));
		if (r) {
			r->nr_scanned += a;
			r->nr_reclaimed += b;
			r->events += hits;
		}
	}
	if (!r)
		lost_rows++;
}

/*
 * Whether a hist file's "# trigger info:" line INFO is hist H's: the
 * kernel reprints a trigger with its defaults added (sort, size), so the
 * values and the filter tell the triggers of one event apart.
 */
static bool hist_is(const char *info, const struct hist *h)
{
	const char *vals = strstr(h->trigger, ":vals="), *end, *filter;
	char want[128];
	size_t len;

	if (!vals)
		return false;
	end = strpbrk(vals + 1, ": ");
	len = end ? (size_t)(end - vals) : strlen(vals);
	if (len >= sizeof(want))
		return false;
	memcpy(want, vals, len);
	want[len] = '\0';
	if (!strstr(info, want))
		return false;
	filter = strstr(h->trigger, " if ");
	return !filter || strstr(info, filter);
}

/*
 * Reads hist H.  FINAL: add its entries to the rows and its drops to the
 * count; otherwise only learn the cgroups of the pids it names.
 */
static int read_hist(struct hist *h, bool final)
{
	unsigned long long pid, dropped;
	char *buf, *line, *next;
	bool ours = false;
	struct entry e;

	buf = read_tracefs(h->event, "hist");
	if (!buf)
		return -1;
	/* The event's hist file holds each of its triggers in turn. */
	for (line = buf; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (!strncmp(line, "# trigger info: ", 16)) {
			ours = hist_is(line, h);
			continue;
		}
		if (!ours)
			continue;
		if (sscanf(line, " Dropped: %llu", &dropped) == 1) {
			if (final)
				h->dropped += dropped;
			continue;
		}
		if (!parse_entry(line, &e))
			continue;
		if (!final) {
			if (entry_val(&e, h->kind == HIST_PASS ? "pid" : "common_pid", &pid))
				pid_cgroup((int)pid, true);
			continue;
		}
		if (h->kind == HIST_SHRINK || h->kind == HIST_SHRINK_WB)
			add_shrink(h, &e);
		else
			add_pid_entry(h, &e);
	}
	return 0;
}

/* memory.stat's pgscan of every memcg, at snap_now. */
static enum snap snap_now;
static struct timespec snap_time[NR_SNAPS];

static int snapshot_memcg(const char *path, const struct stat *st, int type,
			  struct FTW *ftw)
{
	char file[PATH_MAX], line[256], *rel;
	unsigned long long v;
	struct memcg_scan *m = NULL;
	bool found = false;
	FILE *f;
	int i;

	(void)st;
	(void)ftw;
	if (type != FTW_D)
		return 0;
	snprintf(file, sizeof(file), "%s/memory.stat", path);
	f = fopen(file, "re");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "pgscan %llu", &v) == 1;
	fclose(f);
	if (!found)
		return 0;
	rel = (char *)path + strlen(cgroup_root);
	while (*rel == '/')
		rel++;
	if (!*rel)
		rel = "/";
	for (i = 0; i < nr_memcgs && !m; i++)
		if (!strcmp(memcgs[i].path, rel))
			m = &memcgs[i];
	if (!m) {
		if (nr_memcgs == MAX_MEMCGS)
			return 0;
		m = &memcgs[nr_memcgs++];
		snprintf(m->path, sizeof(m->path), "%s", rel);
	}
	m->pgscan[snap_now] = v;
	m->seen[snap_now] = true;
	return 0;
}

static void snapshot_pgscan(enum snap when)
{
	snap_now = when;
	clock_gettime(CLOCK_MONOTONIC, &snap_time[when]);
	nftw(cgroup_root, snapshot_memcg, 16, FTW_PHYS | FTW_MOUNT);
}

/* Milliseconds from snap A to snap B. */
static long long snap_ms(enum snap a, enum snap b)
{
	return (snap_time[b].tv_sec - snap_time[a].tv_sec) * 1000LL +
	       (snap_time[b].tv_nsec - snap_time[a].tv_nsec) / 1000000;
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

	tracefs_path(path, sizeof(path), event, "format");
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

/*
 * Exits naming the enable file of EVENT unless it reads 1: the tool never
 * enables an event itself (see the header).
 */
static void require_enabled(const char *event)
{
	char path[PATH_MAX], buf[8] = "";
	FILE *f;

	tracefs_path(path, sizeof(path), event, "enable");
	f = fopen(path, "re");
	if (!f || !fgets(buf, sizeof(buf), f)) {
		fprintf(stderr, "lab-reclaim-attrib: %s: %s\n", path,
			f ? "empty" : strerror(errno));
		exit(1);
	}
	fclose(f);
	if (buf[0] != '1') {
		fprintf(stderr,
			"lab-reclaim-attrib: %s: the event is not enabled; boot with trace_event=%.*s:%s (lab/run-scenario.sh does): enabling it now would patch kernel text under load\n",
			path, (int)strcspn(event, "/"), event, strchr(event, '/') + 1);
		exit(1);
	}
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
	char path[PATH_MAX];
	size_t i;

	patched = !check_format("vmscan/" PATCHED_EVENT, patched_keys);
	if (!patched && check_format("vmscan/" VANILLA_EVENT, vanilla_keys)) {
		fprintf(stderr, "lab-reclaim-attrib: %s/events/vmscan/%s/format: %s\n",
			tracefs, VANILLA_EVENT, strerror(ENOENT));
		exit(1);
	}
	require_enabled(patched ? "vmscan/" PATCHED_EVENT : "vmscan/" VANILLA_EVENT);
	/* Pass timing needs the four pass events and synthetic events. */
	tracefs_path(path, sizeof(path), NULL, "synthetic_events");
	have_passes = !access(path, W_OK);
	for (i = 2; have_passes && i < ARRAY_LEN(pass_hists); i++)
		have_passes = !check_format(pass_hists[i].event, no_keys);
	for (i = 2; have_passes && i < ARRAY_LEN(pass_hists); i++)
		require_enabled(pass_hists[i].event);
}

static void remove_hists(struct hist *hists, size_t n)
{
	while (n--) {
		if (!hists[n].installed)
			continue;
		append_tracefs(hists[n].event, "trigger", "!", hists[n].trigger, false);
		hists[n].installed = false;
	}
}

static int install_hists(struct hist *hists, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (append_tracefs(hists[i].event, "trigger", "", hists[i].trigger, false))
			return -1;
		hists[i].installed = true;
	}
	return 0;
}

/* The synthetic events of a run killed before it removed them go first. */
static void remove_synth(bool quiet)
{
	size_t i;
	char name[64];

	for (i = 0; i < NR_SYNTH; i++) {
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(synth_defs[i], " "),
			 synth_defs[i]);
		append_tracefs(NULL, "synthetic_events", "!", name, quiet);
	}
}

static int install_passes(void)
{
	size_t i;

	remove_synth(true);
	for (i = 0; i < NR_SYNTH; i++)
		if (append_tracefs(NULL, "synthetic_events", "", synth_defs[i], false))
			return -1;
	return install_hists(pass_hists, ARRAY_LEN(pass_hists));
}

static struct hist *shrink_hists(size_t *n)
{
	*n = patched ? ARRAY_LEN(patched_hists) : ARRAY_LEN(vanilla_hists);
	return patched ? patched_hists : vanilla_hists;
}

static void remove_all(void)
{
	struct hist *sh;
	size_t n;

	sh = shrink_hists(&n);
	remove_hists(sh, n);
	if (have_passes) {
		remove_hists(pass_hists, ARRAY_LEN(pass_hists));
		remove_synth(false);
	}
}

/* Learns the cgroups of the pids that pid-keyed hists name so far. */
static void poll_pids(void)
{
	size_t i;

	for (i = 0; !patched && i < ARRAY_LEN(vanilla_hists); i++)
		read_hist(&vanilla_hists[i], false);
	for (i = 0; have_passes && i < 2; i++)
		read_hist(&pass_hists[i], false);
}

static int read_all(unsigned long long *dropped)
{
	struct hist *sh;
	size_t i, n;
	int ret = 0;

	sh = shrink_hists(&n);
	for (i = 0; i < n; i++) {
		ret |= read_hist(&sh[i], true);
		*dropped += sh[i].dropped;
	}
	for (i = 0; have_passes && i < 2; i++) {
		ret |= read_hist(&pass_hists[i], true);
		*dropped += pass_hists[i].dropped;
	}
	return ret;
}

static int write_outputs(const char *outpath, unsigned long long dropped)
{
	char side[PATH_MAX];
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
	snprintf(side, sizeof(side), "%s.meta", outpath);
	failed = side;
	out = fopen(side, "we");
	if (!out)
		goto fail;
	fprintf(out, "mode=%s\nsource=hist\nshrink_event=%s\npass_events=%s\n"
		"hist_dropped=%llu\nlost_rows=%llu\nunresolved_pids=%llu\n"
		"install_ms=%lld\nread_ms=%lld\n",
		patched ? "patched" : "vanilla",
		patched ? PATCHED_EVENT : VANILLA_EVENT,
		have_passes ? "yes" : "no", dropped, lost_rows, unresolved_pids,
		snap_ms(SNAP_START, SNAP_INNER_START),
		snap_ms(SNAP_INNER_END, SNAP_END));
	if (fclose(out) == EOF)
		goto fail;

	snprintf(side, sizeof(side), "%s.pgscan", outpath);
	out = fopen(side, "we");
	if (!out)
		goto fail;
	/* A memcg made after a snap (the neighbour's scope) was 0 at it. */
	fprintf(out, "cgroup,pgscan_start,pgscan_end,pgscan_inner_start,pgscan_inner_end\n");
	for (i = 0; i < nr_memcgs; i++) {
		struct memcg_scan *m = &memcgs[i];

		if (m->seen[SNAP_END])
			fprintf(out, "%s,%llu,%llu,%llu,%llu\n", m->path,
				m->pgscan[SNAP_START], m->pgscan[SNAP_END],
				m->pgscan[SNAP_INNER_START], m->pgscan[SNAP_INNER_END]);
	}
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
		"usage: lab-reclaim-attrib -o out.csv [-d seconds] [-i poll_ms] [-t tracefs] [-r cgroup_root] [-p proc_root]\n");
	exit(2);
}

static long parse_arg(const char *what, const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "lab-reclaim-attrib: bad %s '%s' (%ld..%ld)\n",
			what, s, min, max);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	struct timespec now, deadline = { 0 }, nap;
	const char *outpath = NULL;
	unsigned long long dropped = 0;
	long duration = 0, poll_ms = 1000;
	struct sigaction sa;
	struct hist *sh;
	size_t n;
	int opt, ret;

	while ((opt = getopt(argc, argv, "o:d:i:t:r:p:")) != -1) {
		switch (opt) {
		case 'o':
			outpath = optarg;
			break;
		case 'd':
			duration = parse_arg("duration", optarg, 1, 86400);
			break;
		case 'i':
			poll_ms = parse_arg("poll interval", optarg, 10, 60000);
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
	hist_buf = malloc(HIST_BUF);
	if (!hist_buf) {
		fprintf(stderr, "lab-reclaim-attrib: %s\n", strerror(ENOMEM));
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += duration;

	/* No SA_RESTART: a signal ends the nap at once. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	snapshot_pgscan(SNAP_START);
	sh = shrink_hists(&n);
	if ((have_passes && install_passes()) || install_hists(sh, n)) {
		remove_all();
		return 1;
	}
	snapshot_pgscan(SNAP_INNER_START);
	/* The runner waits for this line before its measured phase. */
	fprintf(stderr, "lab-reclaim-attrib: %s, %zu hists%s installed\n",
		patched ? "patched" : "vanilla", n, have_passes ? " and pass timing" : "");
	nap.tv_sec = poll_ms / 1000;
	nap.tv_nsec = poll_ms % 1000 * 1000000L;
	while (!stop) {
		nanosleep(&nap, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (duration && (now.tv_sec > deadline.tv_sec ||
				 (now.tv_sec == deadline.tv_sec &&
				  now.tv_nsec >= deadline.tv_nsec)))
			stop = 1;
		poll_pids();
	}
	snapshot_pgscan(SNAP_INNER_END);
	ret = read_all(&dropped);
	snapshot_pgscan(SNAP_END);
	remove_all();
	if (ret)
		return 1;
	if (lost_rows)
		fprintf(stderr, "lab-reclaim-attrib: %llu hist entries not counted (more than %d rows or %d names)\n",
			lost_rows, MAX_ROWS, MAX_NAMES);
	if (dropped)
		fprintf(stderr, "lab-reclaim-attrib: the kernel's hists dropped %llu events (a hist was full)\n",
			dropped);
	return write_outputs(outpath, dropped) ? 1 : 0;
}
