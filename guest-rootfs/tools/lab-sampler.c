// SPDX-License-Identifier: GPL-2.0
/*
 * lab-sampler: sample /proc/vmstat and per-cgroup memory.stat,
 * memory.events, memory.pressure, cpu.stat, io.stat and memory.current at a
 * fixed rate into one long-format CSV: time_s,cgroup,key,value.
 *
 *   lab-sampler [-i interval_ms] [-o out.csv] [-r cgroup_root] cgroup...
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
#include <time.h>
#include <unistd.h>

#include "lab_parse.h"

#define MAX_CGROUPS 64

static const char * const cgroup_files[] = {
	"memory.stat", "memory.events", "memory.pressure", "cpu.stat",
	"io.stat", "memory.current",
};
#define NR_CGROUP_FILES (sizeof(cgroup_files) / sizeof(cgroup_files[0]))

struct sampled_cgroup {
	const char *name;
	char dir[PATH_MAX];
	bool missing_reported;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

struct emit_ctx {
	FILE *out;
	double t;
	const char *cgroup;
};

static void emit_row(void *arg, const char *key, const char *value)
{
	struct emit_ctx *ctx = arg;

	fprintf(ctx->out, "%.3f,%s,%s,%s\n", ctx->t, ctx->cgroup, key, value);
}

/* Reads a whole (small) pseudo-file; returns its length or -1. */
static ssize_t read_small_file(const char *path, char *buf, size_t size)
{
	ssize_t len, total = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while ((size_t)total < size - 1) {
		len = read(fd, buf + total, size - 1 - total);
		if (len < 0) {
			if (errno == EINTR)
				continue;
			close(fd);
			return -1;
		}
		if (len == 0)
			break;
		total += len;
	}
	close(fd);
	buf[total] = '\0';
	return total;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_BOOTTIME, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* The sampler's own cost: CPU seconds per second of wall time. */
static void report_cpu(unsigned long ticks, double start_s)
{
	double wall = now_s() - start_s, cpu;
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru)) {
		fprintf(stderr, "lab-sampler: getrusage: %s\n", strerror(errno));
		return;
	}
	cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	      ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	fprintf(stderr,
		"lab-sampler: %lu ticks in %.1f s, cpu %.3f s (user %.3f, system %.3f), %.2f%% of one CPU\n",
		ticks, wall, cpu,
		ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
		ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
		wall > 0 ? 100.0 * cpu / wall : 0.0);
}

static void sample_cgroup(struct sampled_cgroup *cg, struct emit_ctx *ctx,
			  char *buf, size_t size)
{
	char path[PATH_MAX];
	size_t i;

	if (access(cg->dir, F_OK) != 0) {
		if (!cg->missing_reported)
			fprintf(stderr, "lab-sampler: %s: %s (skipped while absent)\n",
				cg->dir, strerror(errno));
		cg->missing_reported = true;
		return;
	}
	ctx->cgroup = cg->name;
	for (i = 0; i < NR_CGROUP_FILES; i++) {
		if (snprintf(path, sizeof(path), "%s/%s", cg->dir,
			     cgroup_files[i]) >= (int)sizeof(path))
			continue;
		/* The root cgroup lacks memory.current and memory.events. */
		if (read_small_file(path, buf, size) < 0)
			continue;
		lab_parse_keyed(buf, cgroup_files[i], emit_row, ctx);
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: lab-sampler [-i interval_ms] [-o out.csv] [-r cgroup_root] cgroup...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static struct sampled_cgroup cgroups[MAX_CGROUPS];
	static char buf[1 << 16];
	const char *root = "/sys/fs/cgroup", *outpath = NULL;
	unsigned long ticks = 0;
	struct timespec next;
	struct emit_ctx ctx;
	struct sigaction sa;
	long interval_ms = 1000;
	double start_s;
	int nr = 0, opt, i;
	char *end;

	while ((opt = getopt(argc, argv, "i:o:r:")) != -1) {
		switch (opt) {
		case 'i':
			interval_ms = strtol(optarg, &end, 10);
			if (*end || interval_ms < 10 || interval_ms > 3600000) {
				fprintf(stderr, "lab-sampler: bad interval '%s' (10..3600000 ms)\n",
					optarg);
				return 2;
			}
			break;
		case 'o':
			outpath = optarg;
			break;
		case 'r':
			root = optarg;
			break;
		default:
			usage();
		}
	}
	if (argc - optind > MAX_CGROUPS) {
		fprintf(stderr, "lab-sampler: at most %d cgroups\n", MAX_CGROUPS);
		return 2;
	}
	for (i = optind; i < argc; i++, nr++) {
		const char *rel = argv[i];

		while (*rel == '/')
			rel++;
		cgroups[nr].name = *rel ? rel : "/";
		if (snprintf(cgroups[nr].dir, sizeof(cgroups[nr].dir), "%s/%s",
			     root, rel) >= (int)sizeof(cgroups[nr].dir)) {
			fprintf(stderr, "lab-sampler: cgroup path too long: %s\n", argv[i]);
			return 2;
		}
	}

	ctx.out = stdout;
	if (outpath) {
		ctx.out = fopen(outpath, "wx");
		if (!ctx.out) {
			fprintf(stderr, "lab-sampler: %s: %s\n", outpath, strerror(errno));
			return 1;
		}
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

	fprintf(ctx.out, "time_s,cgroup,key,value\n");
	clock_gettime(CLOCK_BOOTTIME, &next);
	start_s = now_s();
	while (!stop) {
		ticks++;
		ctx.t = now_s();
		ctx.cgroup = "-";
		if (read_small_file("/proc/vmstat", buf, sizeof(buf)) < 0) {
			fprintf(stderr, "lab-sampler: /proc/vmstat: %s\n", strerror(errno));
			return 1;
		}
		lab_parse_keyed(buf, "vmstat", emit_row, &ctx);
		for (i = 0; i < nr; i++)
			sample_cgroup(&cgroups[i], &ctx, buf, sizeof(buf));
		if (fflush(ctx.out) == EOF || ferror(ctx.out)) {
			fprintf(stderr, "lab-sampler: %s: %s\n",
				outpath ? outpath : "stdout", strerror(errno));
			return 1;
		}

		next.tv_nsec += (interval_ms % 1000) * 1000000L;
		next.tv_sec += interval_ms / 1000 + next.tv_nsec / 1000000000L;
		next.tv_nsec %= 1000000000L;
		while (!stop && clock_nanosleep(CLOCK_BOOTTIME, TIMER_ABSTIME,
						&next, NULL) == EINTR)
			;
	}
	if (outpath && fclose(ctx.out) == EOF) {
		fprintf(stderr, "lab-sampler: %s: %s\n", outpath, strerror(errno));
		return 1;
	}
	report_cpu(ticks, start_s);
	return 0;
}
