// SPDX-License-Identifier: GPL-2.0
/*
 * lab-mmap-probe: the neighbour's reclaim-latency probe.  Every interval
 * it maps size MiB of anonymous memory, faults every page in, and unmaps
 * it, timing the map+fault part (mmtests mmap-latency style).  When the
 * cgroup is at its limit, the faults pay for reclaim, so the latency is
 * what a neighbour sees of somebody else's dirty pages.
 *
 *   lab-mmap-probe -s MiB -i interval_ms -d duration_s -o latencies.csv
 *                  [-H histogram.csv]
 *
 * Writes one row per iteration: start_s (CLOCK_BOOTTIME), latency_us,
 * each as it ends, so that a probe the OOM killer ends leaves its bursts.
 * SIGTERM or SIGINT ends the probe as duration_s does: after the burst
 * in progress (a measured phase that ends mid-burst counts that burst).
 * With -H, also a histogram of the same latencies (rounded to whole
 * microseconds, as in the rows), written when the probe ends, after its
 * last burst or a failed one:
 *
 *   bucket_lo_us,bucket_hi_us,count
 *
 * Bucket 0 is [0, 1) us and bucket k is [2^(k-1), 2^k) us; every bucket
 * from 0 up to the highest non-empty one is written, empty ones too, so
 * the buckets are contiguous.  Neither file is ever overwritten.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "lab_parse.h"

/* Bucket k < 64 holds latencies below 2^k us: 2^63 us is ~292000 years. */
#define NR_BUCKETS 64

static unsigned long long hist[NR_BUCKETS];
static volatile sig_atomic_t stopping;

static void stop_after_this_burst(int sig)
{
	(void)sig;
	stopping = 1;
}

static int bucket_of(unsigned long long us)
{
	return us ? 64 - __builtin_clzll(us) : 0;
}

static unsigned long long bucket_lo(int b)
{
	return b ? 1ULL << (b - 1) : 0;
}

/* Opens path for writing, refusing to overwrite it; NULL after saying why. */
static FILE *create(const char *path)
{
	FILE *f = fopen(path, "wx");

	if (!f)
		fprintf(stderr, "lab-mmap-probe: %s: %s\n", path, strerror(errno));
	return f;
}

/* 0, or 1 after naming the file that could not be written. */
static int finish(FILE *f, const char *path)
{
	int failed = ferror(f);

	if (fclose(f) == EOF || failed) {
		fprintf(stderr, "lab-mmap-probe: %s: %s\n", path,
			strerror(errno ? errno : EIO));
		return 1;
	}
	return 0;
}

static int write_histogram(FILE *f, const char *path)
{
	int b, top = 0;

	for (b = 0; b < NR_BUCKETS; b++)
		if (hist[b])
			top = b;
	fprintf(f, "bucket_lo_us,bucket_hi_us,count\n");
	for (b = 0; b <= top; b++)
		fprintf(f, "%llu,%llu,%llu\n", bucket_lo(b), 1ULL << b, hist[b]);
	return finish(f, path);
}

static double clock_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_BOOTTIME, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long size_mb = 64, interval_ms = 500, duration_s = 60, page;
	const char *outpath = NULL, *histpath = NULL;
	double start, t0, us;
	FILE *out, *histf = NULL;
	size_t len, off;
	struct sigaction sa = { .sa_handler = stop_after_this_burst };
	int opt, rc = 0;
	char *p;

	while ((opt = getopt(argc, argv, "s:i:d:o:H:")) != -1) {
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
		case 'H':
			histpath = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: lab-mmap-probe -s MiB -i interval_ms -d duration_s -o out.csv [-H hist.csv]\n");
			return 2;
		}
	}
	if (!outpath) {
		fprintf(stderr, "lab-mmap-probe: -o out.csv is required\n");
		return 2;
	}
	/* No SA_RESTART: a signal cuts the sleep between bursts short. */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) || sigaction(SIGINT, &sa, NULL)) {
		fprintf(stderr, "lab-mmap-probe: sigaction: %s\n", strerror(errno));
		return 1;
	}
	out = create(outpath);
	if (!out)
		return 1;
	/* Before the first burst: a bad path fails now, not after -d s. */
	if (histpath) {
		histf = create(histpath);
		if (!histf) {
			fclose(out);
			unlink(outpath);
			return 1;
		}
	}
	/* A row per burst, seconds apart: the write costs nothing. */
	setvbuf(out, NULL, _IOLBF, 0);
	fprintf(out, "start_s,latency_us\n");

	page = sysconf(_SC_PAGESIZE);
	len = (size_t)size_mb << 20;
	start = clock_s();
	while (!stopping && clock_s() - start < duration_s) {
		t0 = clock_s();
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			fprintf(stderr, "lab-mmap-probe: mmap %ld MiB: %s\n",
				size_mb, strerror(errno));
			rc = 1;
			break;
		}
		for (off = 0; off < len; off += page)
			p[off] = 1;
		us = (clock_s() - t0) * 1e6;
		munmap(p, len);
		fprintf(out, "%.6f,%.0f\n", t0, us);
		/*
		 * + 0.5: the bucket of the value the row shows (on a .5 tie
		 * printf rounds to even, which moves no latency of 1 us or
		 * more across a bucket bound).
		 */
		hist[bucket_of((unsigned long long)(us + 0.5))]++;
		if (interval_ms)
			usleep(interval_ms * 1000);
	}
	rc |= finish(out, outpath);
	if (histf)
		rc |= write_histogram(histf, histpath);
	return rc;
}
