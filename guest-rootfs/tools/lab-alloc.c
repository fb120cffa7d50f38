// SPDX-License-Identifier: GPL-2.0
/*
 * lab-alloc: the "alloc" program of the 2011 compaction-stall series
 * (Mel Gorman's "Reduce compaction-related stalls", v6, steps 3-5 of its
 * test): map a region the size of physical memory, fault every page in,
 * and say how long it took, how much of it THP actually backed, and what
 * THP faults and compaction did meanwhile.
 *
 *   lab-alloc [-s MiB] [-H] [-o out.csv] [-m meminfo] [-v vmstat]
 *             [-S smaps]
 *
 * -s defaults to MemTotal of /proc/meminfo; -H madvise()s the region
 * MADV_HUGEPAGE (for THP "madvise" mode).  Writes key=value lines to
 * stdout, or with -o a two-line CSV (keys, then values) that is never
 * overwritten.  vmstat keys this kernel lacks (CONFIG_COMPACTION=n,
 * CONFIG_TRANSPARENT_HUGEPAGE=n) are "not available", not an error.
 * -m, -v and -S name other files in place of /proc/meminfo, /proc/vmstat
 * and /proc/self/smaps, for tests.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "lab_parse.h"

static const char * const vmstat_keys[] = {
	"thp_fault_alloc", "thp_fault_fallback", "compact_stall",
	"compact_success", "compact_fail",
};
#define NR_VMSTAT_KEYS (sizeof(vmstat_keys) / sizeof(vmstat_keys[0]))

struct vmstat_snap {
	unsigned long long val[NR_VMSTAT_KEYS];
	bool seen[NR_VMSTAT_KEYS];
};

/* The result, in output order. */
#define MAX_RESULTS 16
static const char *res_key[MAX_RESULTS];
static char res_val[MAX_RESULTS][32];
static int nr_res;

static void result(const char *key, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void result(const char *key, const char *fmt, ...)
{
	va_list ap;

	res_key[nr_res] = key;
	va_start(ap, fmt);
	vsnprintf(res_val[nr_res], sizeof(res_val[0]), fmt, ap);
	va_end(ap);
	nr_res++;
}

static void die(const char *path, const char *what)
{
	fprintf(stderr, "lab-alloc: %s: %s\n", path, what);
	exit(1);
}

static double clock_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void vmstat_row(void *arg, const char *key, const char *value)
{
	struct vmstat_snap *snap = arg;
	size_t i;

	for (i = 0; i < NR_VMSTAT_KEYS; i++) {
		if (strcmp(key + strlen("vmstat."), vmstat_keys[i]))
			continue;
		snap->val[i] = strtoull(value, NULL, 10);
		snap->seen[i] = true;
	}
}

/* /proc/vmstat is ~5 KiB; a short read would silently lose keys. */
static void read_vmstat(const char *path, struct vmstat_snap *snap)
{
	static char buf[1 << 16];
	size_t len;
	FILE *f;

	memset(snap, 0, sizeof(*snap));
	f = fopen(path, "re");
	if (!f)
		die(path, strerror(errno));
	len = fread(buf, 1, sizeof(buf) - 1, f);
	if (ferror(f))
		die(path, strerror(errno));
	if (len == sizeof(buf) - 1)
		die(path, "larger than 64 KiB");
	fclose(f);
	buf[len] = '\0';
	lab_parse_keyed(buf, "vmstat", vmstat_row, snap);
}

static long mem_total_mib(const char *path)
{
	unsigned long long kb;
	char line[256];
	FILE *f;

	f = fopen(path, "re");
	if (!f)
		die(path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) {
			fclose(f);
			return kb >> 10;
		}
	}
	die(path, "no MemTotal line");
	return 0;
}

/*
 * AnonHugePages of every VMA that overlaps [start, start + len): the
 * kernel may merge the region with a neighbouring anonymous VMA (it did
 * in the guest, and a containment test then found nothing), or split it.
 * Returns -1 when no VMA of the region is listed (a fake smaps in a test).
 */
static long long anon_huge_kb(const char *path, unsigned long start,
			      size_t len)
{
	unsigned long lo, hi;
	long long total = -1, kb;
	bool inside = false;
	char line[512];
	FILE *f;

	f = fopen(path, "re");
	if (!f)
		die(path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			inside = lo < start + len && hi > start;
			continue;
		}
		if (inside && sscanf(line, "AnonHugePages: %lld kB", &kb) == 1)
			total = (total < 0 ? 0 : total) + kb;
	}
	if (ferror(f))
		die(path, strerror(errno));
	fclose(f);
	return total;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: lab-alloc [-s MiB] [-H] [-o out.csv] [-m meminfo] [-v vmstat] [-S smaps]\n");
	exit(2);
}

static void write_results(const char *outpath)
{
	FILE *out = stdout;
	int i;

	if (outpath) {
		out = fopen(outpath, "wx");
		if (!out)
			die(outpath, strerror(errno));
		for (i = 0; i < nr_res; i++)
			fprintf(out, "%s%c", res_key[i], i + 1 < nr_res ? ',' : '\n');
	}
	for (i = 0; i < nr_res; i++) {
		if (outpath)
			fprintf(out, "%s%c", res_val[i], i + 1 < nr_res ? ',' : '\n');
		else
			fprintf(out, "%s=%s\n", res_key[i], res_val[i]);
	}
	if (fflush(out) == EOF || ferror(out) || (outpath && fclose(out) == EOF))
		die(outpath ? outpath : "stdout", strerror(errno));
}

int main(int argc, char **argv)
{
	const char *meminfo = "/proc/meminfo", *vmstat = "/proc/vmstat";
	const char *smaps = "/proc/self/smaps", *outpath = NULL;
	struct vmstat_snap before, after;
	struct rusage ru;
	bool hugepage = false;
	long size_mib = 0, page;
	long long thp_kb;
	double t0, t1;
	size_t len, off, i;
	char *p;
	int opt;

	while ((opt = getopt(argc, argv, "s:Ho:m:v:S:")) != -1) {
		switch (opt) {
		case 's':
			/* Up to 1 PiB: large enough to test a failing mmap. */
			size_mib = lab_parse_long("lab-alloc", "size", optarg,
						  1, 1L << 30);
			break;
		case 'H':
			hugepage = true;
			break;
		case 'o':
			outpath = optarg;
			break;
		case 'm':
			meminfo = optarg;
			break;
		case 'v':
			vmstat = optarg;
			break;
		case 'S':
			smaps = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
	if (!size_mib)
		size_mib = mem_total_mib(meminfo);
	if (!size_mib)
		die(meminfo, "MemTotal is below 1 MiB");

	page = sysconf(_SC_PAGESIZE);
	len = (size_t)size_mib << 20;
	read_vmstat(vmstat, &before);
	t0 = clock_s();
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "lab-alloc: mmap %ld MiB: %s\n", size_mib,
			strerror(errno));
		return 1;
	}
	if (hugepage && madvise(p, len, MADV_HUGEPAGE)) {
		fprintf(stderr, "lab-alloc: madvise(MADV_HUGEPAGE) %ld MiB: %s\n",
			size_mib, strerror(errno));
		return 1;
	}
	/* A write, not a read: a read fault would map the shared zero page. */
	for (off = 0; off < len; off += page)
		p[off] = 1;
	t1 = clock_s();
	/* Before munmap(): the THP backing is what the mapping had at the end. */
	thp_kb = anon_huge_kb(smaps, (unsigned long)p, len);
	read_vmstat(vmstat, &after);
	getrusage(RUSAGE_SELF, &ru);
	munmap(p, len);

	result("size_mib", "%ld", size_mib);
	result("madv_hugepage", "%d", hugepage);
	result("elapsed_s", "%.6f", t1 - t0);
	result("user_s", "%.6f", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6);
	result("sys_s", "%.6f", ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
	if (thp_kb < 0)
		result("anon_huge_kb", "not available");
	else
		result("anon_huge_kb", "%lld", thp_kb);
	for (i = 0; i < NR_VMSTAT_KEYS; i++) {
		if (before.seen[i] && after.seen[i])
			result(vmstat_keys[i], "%lld",
			       (long long)(after.val[i] - before.val[i]));
		else
			result(vmstat_keys[i], "not available");
	}
	write_results(outpath);
	return 0;
}
