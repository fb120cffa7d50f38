# memcg-lab: the front door.  `make help` lists what is here.
SHELL := /bin/bash
NAME ?=
# Empty: lab/run-scenario.sh's default arm.
ARM ?=
SET ?=
DEBUG ?=
RESULTS ?= results
# The kernel axis (lab/lib.sh): KERNEL=<label> for scenario, shell and
# matrix (KERNELS="a b": one matrix per kernel, in turn); LABEL with
# KSRC=<tarball or tree> or KBUILD=<build folder> for make kernel.  Taken
# from the command line only: names this common may be in a user's
# environment for something else.
from_command_line = $(if $(filter command line,$(origin $(1))),$($(1)))
KERNEL_ARG = $(call from_command_line,KERNEL)
KERNELS_ARG = $(call from_command_line,KERNELS)
LABEL_ARG = $(call from_command_line,LABEL)
KSRC_ARG = $(call from_command_line,KSRC)
KBUILD_ARG = $(call from_command_line,KBUILD)
# Empty: lab/matrix.sh's verdict matrix, the one place its lists live.
ARMS ?=
RUNS ?=
SCENARIOS := $(sort $(basename $(notdir $(wildcard scenarios/*.scenario))))
# `make matrix SCENARIOS="a b"` overrides the verdict scenarios; SCENARIOS
# is otherwise every scenario, for the help.
MATRIX_SCENARIOS = $(if $(filter command line,$(origin SCENARIOS)),$(SCENARIOS))
# A debug matrix writes into its own root unless told otherwise:
# make report groups runs by scenario and arm, and would exclude one
# kernel flavour of a group that held both as a mixed arm.
MATRIX_RESULTS = $(if $(and $(DEBUG),$(filter file,$(origin RESULTS))),results-debug,$(RESULTS))
# A value as one shell word: SET may hold quotes of its own
# (SET='SYSCTLS="vm.a=1 vm.b=2"'), so it is single-quoted, its own '
# written as '\''.
# The kernels of a matrix, as shell words: KERNELS, else KERNEL, else ''
# (the default kernel, or the debug one with DEBUG=1).
MATRIX_KERNELS = $(if $(or $(KERNELS_ARG),$(KERNEL_ARG)),$(foreach k,$(or $(KERNELS_ARG),$(KERNEL_ARG)),'$(k)'),'')
shell_quote = '$(subst ','\'',$(1))'

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
	@echo "  make scenario NAME=<scenario> [ARM=<arm>] [SET=\"VAR=value ...\"] [DEBUG=1] [KERNEL=<label>]"
	@echo "                     set up what is missing, boot, run, summarise; a SET"
	@echo "                     value with spaces is quoted: SET='SYSCTLS=\"vm.a=1 vm.b=2\" X=1'"
	@echo "  make shell [NAME=<scenario>] [SET=...] [DEBUG=1] [KERNEL=<label>]"
	@echo "                     boot the guest of a scenario (default smoke: its"
	@echo "                     kernel, image, disks, shares) to a root shell on"
	@echo "                     this terminal; 'exit' shuts it down"
	@echo "  make matrix [SCENARIOS=\"a b\"] [ARMS=\"a b\"] [RUNS=n] [SET=...] [DEBUG=1] [KERNELS=\"a b\"]"
	@echo "                     every combination, shuffled, one boot each, resumable;"
	@echo "                     prints the jobs and their expected time first; DEBUG=1:"
	@echo "                     the debug kernel, into RESULTS=results-debug by default."
	@echo "                     Without SCENARIOS, ARMS, RUNS: the verdict matrix,"
	@lab/matrix.sh defaults | sed 's/^/                       /'
	@echo "  make matrix-jobs ...   the same as a GNU parallel job list (stdout)"
	@echo "  make report [RESULTS=results] [BASELINE=activate] [FIGURES=dir]"
	@echo "                     tables, figures and report.html of every run under"
	@echo "                     RESULTS, into RESULTS/report/<timestamp>/; FIGURES:"
	@echo "                     each scenario's headline figures copied there too,"
	@echo "                     with its runs.csv and probe-latency.csv rows"
	@echo "                     (analysis/figures: the ones RESULTS.md shows)"
	@echo "  make test          the project's tests (static checks, host unit tests,"
	@echo "                     one real boot of the smoke scenario)"
	@echo "  make test-unit     host-side tests only (no kernel build, no boot)"
	@echo "  make deps          install missing Debian packages"
	@echo "  make kernel [DEBUG=1]  build the lab kernel (cache: \$$MEMCG_LAB_CACHE)"
	@echo "  make kernel LABEL=<name> [KSRC=<tarball|tree> | KBUILD=<build folder>]"
	@echo "                     a kernel for KERNEL=<name>: pristine-6.1 (6.1 without"
	@echo "                     the series), debian-6.12 (linux-source-6.12), or any"
	@echo "                     tree built with the lab's fragment; fails naming each"
	@echo "                     option the lab needs that it lacks"
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
	@echo
	@echo "arms (scenarios/arms.tsv):"
	@lab/run-scenario.sh --arms

deps:
	lab/install-deps.sh

kernel: deps
	lab/build-kernel.sh $(if $(LABEL_ARG),--label '$(LABEL_ARG)',$(if $(DEBUG),--debug)) $(if $(KSRC_ARG),--source '$(KSRC_ARG)') $(if $(KBUILD_ARG),--kbuild '$(KBUILD_ARG)')

check-series: deps
	lab/check-series.sh --full

rootfs: deps
	guest-rootfs/build-rootfs.sh

tools:
	$(MAKE) -C guest-rootfs/tools O=$(CURDIR)/build/tools

scenario:
	SET=$(call shell_quote,$(SET)) MEMCG_LAB_RESULTS='$(RESULTS)' MEMCG_LAB_DEBUG='$(DEBUG)' MEMCG_LAB_KERNEL='$(KERNEL_ARG)' lab/run-scenario.sh '$(NAME)' '$(ARM)'

shell:
	SET=$(call shell_quote,$(SET)) MEMCG_LAB_DEBUG='$(DEBUG)' MEMCG_LAB_KERNEL='$(KERNEL_ARG)' lab/run-scenario.sh --shell '$(or $(NAME),smoke)'

# One matrix per kernel, in turn (each its own ledger); every kernel's
# matrix runs even when an earlier one had failed jobs.
matrix:
	rc=0; for k in $(MATRIX_KERNELS); do \
		SET=$(call shell_quote,$(SET)) MEMCG_LAB_RESULTS='$(MATRIX_RESULTS)' MEMCG_LAB_DEBUG='$(DEBUG)' MEMCG_LAB_KERNEL="$$k" lab/matrix.sh run '$(MATRIX_SCENARIOS)' '$(ARMS)' '$(RUNS)' || rc=1; \
	done; exit $$rc

matrix-jobs:
	@for k in $(MATRIX_KERNELS); do \
		SET=$(call shell_quote,$(SET)) MEMCG_LAB_RESULTS='$(MATRIX_RESULTS)' MEMCG_LAB_DEBUG='$(DEBUG)' MEMCG_LAB_KERNEL="$$k" lab/matrix.sh jobs '$(MATRIX_SCENARIOS)' '$(ARMS)' '$(RUNS)' || exit; \
	done

report: deps
	/usr/bin/python3 analysis/report.py --baseline '$(or $(BASELINE),activate)' $(if $(FIGURES),--figures '$(FIGURES)') '$(RESULTS)'

test: deps
	tests/run-tests.sh all

test-unit: deps
	tests/run-tests.sh unit

clean:
	MEMCG_LAB_RESULTS='$(RESULTS)' lab/clean.sh

distclean:
	MEMCG_LAB_RESULTS='$(RESULTS)' lab/clean.sh --dist

.PHONY: help deps kernel check-series rootfs tools scenario shell matrix matrix-jobs report test test-unit clean distclean
