# memcg-lab: the front door.  `make help` lists what is here.
SHELL := /bin/bash
NAME ?=
ARM ?= vanilla
SET ?=
DEBUG ?=
RESULTS ?= results
ARMS ?= vanilla mglru
RUNS ?= 5
SCENARIOS := $(sort $(basename $(notdir $(wildcard scenarios/*.scenario))))
# `make matrix SCENARIOS="a b"` overrides the list of all scenarios; by
# default the matrix leaves out smoke, the sampler's own benchmark, the
# tracepoint-toggle self-test and the kernel's cgroup selftests.
SCENARIOS_RUN = $(if $(filter command line,$(origin SCENARIOS)),$(SCENARIOS),$(filter-out smoke sampler-cost tracepoint-toggle cgroup-selftests,$(SCENARIOS)))

.DEFAULT_GOAL := help
# Host log lines count elapsed time from the start of the outermost make
# (lab/lib.sh): `make kernel` runs deps first, and a sub-make inherits it.
ifndef MEMCG_LAB_T0
MEMCG_LAB_T0 := $(shell date +%s)
endif
export MEMCG_LAB_T0

help:
	@echo "memcg-lab: LRU_IMMEDIATE experiments on Debian's 6.1 kernel in QEMU"
	@echo
	@echo "  make scenario NAME=<scenario> [ARM=vanilla|mglru|keep|activate|immediate] [SET=\"VAR=value ...\"] [DEBUG=1]"
	@echo "                     set up what is missing, boot, run, summarise"
	@echo "  make matrix [SCENARIOS=\"a b\"] [ARMS=\"vanilla mglru\"] [RUNS=5]"
	@echo "                     every combination, shuffled, one boot each, resumable"
	@echo "  make matrix-jobs ...   the same as a GNU parallel job list (stdout)"
	@echo "  make report [RESULTS=results] [BASELINE=vanilla]"
	@echo "                     tables, figures and report.html of every run under"
	@echo "                     RESULTS, into RESULTS/report/<timestamp>/"
	@echo "  make test          the project's tests (static checks, host unit tests,"
	@echo "                     one real boot of the smoke scenario)"
	@echo "  make test-unit     host-side tests only (no kernel build, no boot)"
	@echo "  make deps          install missing Debian packages"
	@echo "  make kernel [DEBUG=1]  build the lab kernel (cache: \$$MEMCG_LAB_CACHE)"
	@echo "  make check-series  apply + checkpatch --strict every patch, build after"
	@echo "                     each patch, the final series with =y and =n, and the"
	@echo "                     debug kernel (long: mmzone.h rebuilds most of the tree)"
	@echo "  make rootfs        build the guest rootfs image"
	@echo "  make tools         build the guest C tools on the host"
	@echo "  make clean         remove builds and images (build/, kernel builds,"
	@echo "                     rootfs, kselftests, stale scratch disks), never results"
	@echo "  make distclean     clean, plus the unpacked kernel source and ccache"
	@echo
	@echo "scenarios: $(SCENARIOS)"

deps:
	lab/install-deps.sh

kernel: deps
	lab/build-kernel.sh $(if $(DEBUG),--debug)

check-series: deps
	lab/check-series.sh --full

rootfs: deps
	guest-rootfs/build-rootfs.sh

tools:
	$(MAKE) -C guest-rootfs/tools O=$(CURDIR)/build/tools

scenario:
	SET='$(SET)' MEMCG_LAB_RESULTS='$(RESULTS)' MEMCG_LAB_DEBUG='$(DEBUG)' lab/run-scenario.sh '$(NAME)' '$(ARM)'

matrix:
	SET='$(SET)' MEMCG_LAB_RESULTS='$(RESULTS)' lab/matrix.sh run '$(SCENARIOS_RUN)' '$(ARMS)' '$(RUNS)'

matrix-jobs:
	@SET='$(SET)' MEMCG_LAB_RESULTS='$(RESULTS)' lab/matrix.sh jobs '$(SCENARIOS_RUN)' '$(ARMS)' '$(RUNS)'

report: deps
	/usr/bin/python3 analysis/report.py --baseline '$(or $(BASELINE),vanilla)' '$(RESULTS)'

test: deps
	tests/run-tests.sh all

test-unit: deps
	tests/run-tests.sh unit

clean:
	MEMCG_LAB_RESULTS='$(RESULTS)' lab/clean.sh

distclean:
	MEMCG_LAB_RESULTS='$(RESULTS)' lab/clean.sh --dist

.PHONY: help deps kernel check-series rootfs tools scenario matrix matrix-jobs report test test-unit clean distclean
