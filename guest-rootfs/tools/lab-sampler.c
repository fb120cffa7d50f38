// SPDX-License-Identifier: GPL-2.0
/*
 * lab-sampler: sample /proc/vmstat and per-cgroup memory.stat,
 * memory.events, memory.pressure, cpu.stat, io.stat and memory.current at a
 * fixed rate into one long-format CSV: time_s,cgroup,key,value.
 *
 *   lab-sampler [-i interval_ms] [-s slow_interval_ms] [-o out.csv]
 *               [-r cgroup_root] [-V] [-S slow_cgroup]... cgroup...
 *
 * /proc/vmstat, memory.stat and memory.current are read every interval_ms
 * (default 1000).  cpu.stat, io.stat, memory.events and memory.pressure,
 * the "slow" files, are read only every slow_interval_ms, a positive
 * multiple of interval_ms (default: interval_ms, every tick): reading
 * cpu.stat or io.stat flushes rstat, most of the sampler's cost at 10 Hz.
 * The first tick reads every file, and so does the tick taken at
 * SIGINT/SIGTERM if the last one skipped the slow files, so a delta of a
 * slow file over the whole run is exact; in between, a slow key has rows
 * only on ticks due at a multiple of slow_interval_ms from the start.
 * A cgroup given with -S (repeatable) has every file read only on the slow
 * ticks, and so has /proc/vmstat with -V: their rows feed phase deltas,
 * for which the slow rate serves, and under TCG one read of /proc/vmstat
 * costs the guest about 1 ms, as much as all the leaves' files together
 * (the sampler-cost scenario).
 * Ticks stay on the start + n * interval_ms grid: one that comes due while
 * the previous one ran late is skipped, and counted at exit.
 *
 * cgroup arguments are paths relative to the cgroup root (default
 * /sys/fs/cgroup); "" or "/" is the root.  A cgroup that does not exist yet
 * (or was removed) is skipped for that tick, and reported once.  The
 * system-wide rows have cgroup "-".  time_s is CLOCK_BOOTTIME, the clock of
 * /proc/uptime, so shell scripts can mark phases on the same axis.  Stops on
 * SIGINT/SIGTERM, flushing the current tick, and reports on stderr its own
 * CPU time (getrusage) over its run, so every run records the sampler's
 * cost in the guest it measured.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lab_parse.h"

#define MAX_CGROUPS 64

/*
 * slow: read only on the ticks of -s.  cpu.stat and io.stat flush the
 * cgroup's rstat tree on every read (memory.stat only past a threshold);
 * memory.events and memory.pressure are not needed at 10 Hz.
 */
static const struct cgroup_file {
	const char *name;
	bool slow;
} cgroup_files[] = {
	{ "memory.stat", false },
	{ "memory.events", true },
	{ "memory.pressure", true },
	{ "cpu.stat", true },
	{ "io.stat", true },
	{ "memory.current", false },
};
#define NR_CGROUP_FILES (sizeof(cgroup_files) / sizeof(cgroup_files[0]))

/*
 * Files stay open between ticks and are read with pread(): at 10 Hz under
 * TCG, opening every file on every tick was a large part of the
 * sampler's cost.  A cgroup removed and created again under the same name
 * is a new directory inode: its files are reopened.
 */
struct sampled_cgroup {
	const char *name;
	char dir[PATH_MAX];
	ino_t ino;
	int fd[NR_CGROUP_FILES];
	bool slow;			/* -S: every file on slow ticks only */
	bool missing_reported;
};

/*
 * Rows waiting to be written: formatting a row is a copy, not an
 * fprintf() of the time.  They are written with one write() on every tick
 * that reads the slow files, and when more than half the buffer is used:
 * the run's folder is a 9p share, where a write per tick at 10 Hz is a
 * round trip to the host per tick.  Stopping writes what is left.
 */
struct tick_buf {
	char data[1 << 20];
	size_t len;
	char prefix[PATH_MAX + 32];	/* "time,cgroup," of the rows */
	size_t prefix_len;
	bool overflow;
};

static volatile sig_atomic_t stop;
static struct sampled_cgroup cgroups[MAX_CGROUPS];
static int nr_cgroups;
static bool vmstat_slow;		/* -V */
static struct tick_buf tb;
static char buf[1 << 16];

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void tick_append(struct tick_buf *tb, const char *s, size_t n)
{
	if (tb->len + n > sizeof(tb->data)) {
		tb->overflow = true;
		return;
	}
	memcpy(tb->data + tb->len, s, n);
	tb->len += n;
}

static void emit_row(void *arg, const char *key, const char *value)
{
	struct tick_buf *tb = arg;

	tick_append(tb, tb->prefix, tb->prefix_len);
	tick_append(tb, key, strlen(key));
	tick_append(tb, ",", 1);
	tick_append(tb, value, strlen(value));
	tick_append(tb, "\n", 1);
}

static void set_prefix(struct tick_buf *tb, double t, const char *cgroup)
{
	int n = snprintf(tb->prefix, sizeof(tb->prefix), "%.3f,%s,", t, cgroup);

	tb->prefix_len = n < (int)sizeof(tb->prefix) ? (size_t)n : 0;
}

/* Writes the whole tick; returns 0 or -1 with errno set. */
static int tick_write(int fd, struct tick_buf *tb)
{
	size_t done = 0;
	ssize_t n;

	while (done < tb->len) {
		n = write(fd, tb->data + done, tb->len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		done += n;
	}
	tb->len = 0;
	return 0;
}

/* Reads a whole (small) pseudo-file from offset 0; its length or -1. */
static ssize_t pread_small_file(int fd, char *buf, size_t size)
{
	ssize_t len, total = 0;

	while ((size_t)total < size - 1) {
		len = pread(fd, buf + total, size - 1 - total, total);
		if (len < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (len == 0)
			break;
		total += len;
	}
	buf[total] = '\0';
	return total;
}

static void close_files(struct sampled_cgroup *cg)
{
	size_t i;

	for (i = 0; i < NR_CGROUP_FILES; i++) {
		if (cg->fd[i] >= 0)
			close(cg->fd[i]);
		cg->fd[i] = -1;
	}
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_BOOTTIME, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/*
 * The sampler's own cost, CPU seconds per second of wall time, as one
 * line of key=value words after "lab-sampler: cost " (the analysis reads
 * it by key: memcg_lab.run.parse_sampler_cost).
 */
static void report_cpu(unsigned long ticks, unsigned long missed, double start_s)
{
	double wall = now_s() - start_s, user, system;
	struct rusage ru;
	int i, slow = 0;

	for (i = 0; i < nr_cgroups; i++)
		slow += cgroups[i].slow;

	if (getrusage(RUSAGE_SELF, &ru)) {
		fprintf(stderr, "lab-sampler: getrusage: %s\n", strerror(errno));
		return;
	}
	user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
	system = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	fprintf(stderr,
		"lab-sampler: cost ticks=%lu wall_s=%.3f cpu_s=%.3f user_s=%.3f system_s=%.3f ticks_missed=%lu slow_cgroups=%d cgroups=%d vmstat=%s\n",
		ticks, wall, user + system, user, system, missed, slow,
		nr_cgroups, vmstat_slow ? "slow" : "fast");
}

static void timespec_add_ms(struct timespec *ts, long ms)
{
	ts->tv_nsec += (ms % 1000) * 1000000L;
	ts->tv_sec += ms / 1000 + ts->tv_nsec / 1000000000L;
	ts->tv_nsec %= 1000000000L;
}

static bool timespec_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Appends a cgroup's rows; the slow files only if all. */
static void sample_cgroup(struct sampled_cgroup *cg, double t, bool all)
{
	char path[PATH_MAX];
	struct stat st;
	size_t i;

	if (cg->slow && !all)
		return;
	if (stat(cg->dir, &st) != 0) {
		if (!cg->missing_reported)
			fprintf(stderr, "lab-sampler: %s: %s (skipped while absent)\n",
				cg->dir, strerror(errno));
		cg->missing_reported = true;
		close_files(cg);
		return;
	}
	if (st.st_ino != cg->ino) {
		close_files(cg);
		cg->ino = st.st_ino;
	}
	set_prefix(&tb, t, cg->name);
	for (i = 0; i < NR_CGROUP_FILES; i++) {
		if (cgroup_files[i].slow && !all)
			continue;
		if (cg->fd[i] < 0) {
			if (snprintf(path, sizeof(path), "%s/%s", cg->dir,
				     cgroup_files[i].name) >= (int)sizeof(path))
				continue;
			/* The root cgroup lacks memory.current and memory.events. */
			cg->fd[i] = open(path, O_RDONLY | O_CLOEXEC);
			if (cg->fd[i] < 0)
				continue;
		}
		if (pread_small_file(cg->fd[i], buf, sizeof(buf)) < 0) {
			close(cg->fd[i]);
			cg->fd[i] = -1;
			continue;
		}
		lab_parse_keyed(buf, cgroup_files[i].name, emit_row, &tb);
	}
}

/*
 * One tick at time t: /proc/vmstat (with -V only if all), then every
 * cgroup (its slow files, and -S cgroups, only if all); written with the
 * ticks before it if all or if the buffer is past half full.  0, or -1
 * once the error is reported.
 */
static int sample_tick(int vmstat, int out, const char *outpath, double t,
		       bool all)
{
	int i;

	if (all || !vmstat_slow) {
		set_prefix(&tb, t, "-");
		if (pread_small_file(vmstat, buf, sizeof(buf)) < 0) {
			fprintf(stderr, "lab-sampler: /proc/vmstat: %s\n", strerror(errno));
			return -1;
		}
		lab_parse_keyed(buf, "vmstat", emit_row, &tb);
	}
	for (i = 0; i < nr_cgroups; i++)
		sample_cgroup(&cgroups[i], t, all);
	if (tb.overflow) {
		fprintf(stderr, "lab-sampler: one tick's rows exceed %zu bytes\n",
			sizeof(tb.data) / 2);
		return -1;
	}
	if ((all || tb.len > sizeof(tb.data) / 2) && tick_write(out, &tb)) {
		fprintf(stderr, "lab-sampler: %s: %s\n", outpath, strerror(errno));
		return -1;
	}
	return 0;
}

/* Queues a cgroup argument; its directory is set once -r is known. */
static void add_cgroup(const char *arg, bool slow)
{
	struct sampled_cgroup *cg = &cgroups[nr_cgroups];
	size_t f;

	if (nr_cgroups == MAX_CGROUPS) {
		fprintf(stderr, "lab-sampler: at most %d cgroups\n", MAX_CGROUPS);
		exit(2);
	}
	while (*arg == '/')
		arg++;
	cg->name = *arg ? arg : "/";
	cg->slow = slow;
	for (f = 0; f < NR_CGROUP_FILES; f++)
		cg->fd[f] = -1;
	nr_cgroups++;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: lab-sampler [-i interval_ms] [-s slow_interval_ms] [-o out.csv] [-r cgroup_root] [-V] [-S slow_cgroup]... cgroup...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *root = "/sys/fs/cgroup", *outpath = NULL;
	const char *header = "time_s,cgroup,key,value\n";
	unsigned long ticks = 0, due = 0, missed = 0, slow_every;
	struct timespec next, now;
	struct sigaction sa;
	long interval_ms = 1000, slow_ms = 0;
	int opt, i, out = STDOUT_FILENO, vmstat;
	bool partial = false;
	double start_s, t = 0;
	char *end;

	while ((opt = getopt(argc, argv, "i:o:r:s:S:V")) != -1) {
		switch (opt) {
		case 'i':
			interval_ms = strtol(optarg, &end, 10);
			if (*end || interval_ms < 10 || interval_ms > 3600000) {
				fprintf(stderr, "lab-sampler: bad interval '%s' (10..3600000 ms)\n",
					optarg);
				return 2;
			}
			break;
		case 's':
			slow_ms = lab_parse_long("lab-sampler", "slow interval -s",
						 optarg, 10, 3600000);
			break;
		case 'o':
			outpath = optarg;
			break;
		case 'r':
			root = optarg;
			break;
		case 'S':
			add_cgroup(optarg, true);
			break;
		case 'V':
			vmstat_slow = true;
			break;
		default:
			usage();
		}
	}
	if (!slow_ms)
		slow_ms = interval_ms;
	if (slow_ms % interval_ms) {
		fprintf(stderr,
			"lab-sampler: bad slow interval -s '%ld': not a multiple of the interval -i %ld ms\n",
			slow_ms, interval_ms);
		return 2;
	}
	slow_every = slow_ms / interval_ms;
	for (i = optind; i < argc; i++)
		add_cgroup(argv[i], false);
	for (i = 0; i < nr_cgroups; i++) {
		struct sampled_cgroup *cg = &cgroups[i];
		const char *rel = strcmp(cg->name, "/") ? cg->name : "";

		if (snprintf(cg->dir, sizeof(cg->dir), "%s/%s", root, rel) >=
		    (int)sizeof(cg->dir)) {
			fprintf(stderr, "lab-sampler: cgroup path too long: %s\n", cg->name);
			return 2;
		}
	}

	if (outpath) {
		out = open(outpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (out < 0) {
			fprintf(stderr, "lab-sampler: %s: %s\n", outpath, strerror(errno));
			return 1;
		}
	} else {
		outpath = "stdout";
	}
	vmstat = open("/proc/vmstat", O_RDONLY | O_CLOEXEC);
	if (vmstat < 0) {
		fprintf(stderr, "lab-sampler: /proc/vmstat: %s\n", strerror(errno));
		return 1;
	}

	/*
	 * SA_RESTART: a stop request must not fail the write in progress
	 * (EINTR on a pipe or 9p file would be reported as an output error);
	 * clock_nanosleep() still returns EINTR, so the loop sees "stop".
	 */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	tick_append(&tb, header, strlen(header));
	clock_gettime(CLOCK_BOOTTIME, &next);
	start_s = now_s();
	while (!stop) {
		/* Tick n, due at start + n * interval_ms, reads all if n % slow_every == 0. */
		partial = due % slow_every != 0;
		t = now_s();
		if (sample_tick(vmstat, out, outpath, t, !partial))
			return 1;
		ticks++;
		due++;
		timespec_add_ms(&next, interval_ms);
		/*
		 * A tick that came due while this one ran late (a stalled
		 * guest), or is due within half an interval, is skipped, not
		 * run back to back: rows milliseconds apart would say nothing
		 * the next tick does not.  Ticks stay on the start + n *
		 * interval grid and are never closer than half an interval.
		 */
		clock_gettime(CLOCK_BOOTTIME, &now);
		timespec_add_ms(&now, interval_ms / 2);
		while (timespec_before(&next, &now)) {
			timespec_add_ms(&next, interval_ms);
			due++;
			missed++;
		}
		while (!stop && clock_nanosleep(CLOCK_BOOTTIME, TIMER_ABSTIME,
						&next, NULL) == EINTR)
			;
	}
	/*
	 * A final tick with every file when the last one skipped the slow
	 * ones, so their deltas reach the end of the run; at least 1.5 ms
	 * after it, so it has a time_s (ms resolution) of its own.
	 */
	if (partial) {
		while (now_s() < t + 0.0015)
			usleep(250);
		if (sample_tick(vmstat, out, outpath, now_s(), true))
			return 1;
		ticks++;
	}
	if (out != STDOUT_FILENO && close(out)) {
		fprintf(stderr, "lab-sampler: %s: %s\n", outpath, strerror(errno));
		return 1;
	}
	report_cpu(ticks, missed, start_s);
	return 0;
}
