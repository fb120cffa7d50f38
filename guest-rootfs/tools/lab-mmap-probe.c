// SPDX-License-Identifier: GPL-2.0
/*
 * lab-mmap-probe: the neighbour's reclaim-latency probe.  Every interval
 * it maps size MiB of anonymous memory, faults every page in, and unmaps
 * it, timing the map+fault part (mmtests mmap-latency style).  When the
 * cgroup is at its limit, the faults pay for reclaim, so the latency is
 * what a neighbour sees of somebody else's dirty pages.
 *
 *   lab-mmap-probe -s MiB -i interval_ms -d duration_s -o latencies.csv
 *
 * Writes one row per iteration: start_s (CLOCK_BOOTTIME), latency_us.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "lab_parse.h"

static double clock_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_BOOTTIME, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long size_mb = 64, interval_ms = 500, duration_s = 60, page;
	const char *outpath = NULL;
	double start, t0, t1;
	size_t len, off;
	FILE *out;
	char *p;
	int opt;

	while ((opt = getopt(argc, argv, "s:i:d:o:")) != -1) {
		switch (opt) {
		case 's':
			size_mb = lab_parse_long("lab-mmap-probe", "size", optarg,
						 1, 1 << 20);
			break;
		case 'i':
			interval_ms = lab_parse_long("lab-mmap-probe", "interval",
						     optarg, 0, 3600000);
			break;
		case 'd':
			duration_s = lab_parse_long("lab-mmap-probe", "duration",
						    optarg, 1, 86400);
			break;
		case 'o':
			outpath = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: lab-mmap-probe -s MiB -i interval_ms -d duration_s -o out.csv\n");
			return 2;
		}
	}
	if (!outpath) {
		fprintf(stderr, "lab-mmap-probe: -o out.csv is required\n");
		return 2;
	}
	out = fopen(outpath, "wx");
	if (!out) {
		fprintf(stderr, "lab-mmap-probe: %s: %s\n", outpath, strerror(errno));
		return 1;
	}
	fprintf(out, "start_s,latency_us\n");

	page = sysconf(_SC_PAGESIZE);
	len = (size_t)size_mb << 20;
	start = clock_s();
	while (clock_s() - start < duration_s) {
		t0 = clock_s();
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			fprintf(stderr, "lab-mmap-probe: mmap %ld MiB: %s\n",
				size_mb, strerror(errno));
			return 1;
		}
		for (off = 0; off < len; off += page)
			p[off] = 1;
		t1 = clock_s();
		munmap(p, len);
		fprintf(out, "%.6f,%.0f\n", t0, (t1 - t0) * 1e6);
		if (interval_ms)
			usleep(interval_ms * 1000);
	}
	if (fclose(out) == EOF) {
		fprintf(stderr, "lab-mmap-probe: %s: %s\n", outpath, strerror(errno));
		return 1;
	}
	return 0;
}
