# tokbench: one Makefile for the library, the four binaries, the tests and the
# benchmarks.  Knobs:
#   make SANITIZE=1      ASan + UBSan build (objects in build-san/)
#   make MODE=release    optimised build without debug checks (default: debug)
#   make test            deps, check-layers, check-src, sanitizer build, every unit and
#                        integration test (plain tests TB_JOBS=2 at a time, then the
#                        timing tests alone: scripts/run_tests.py)
#   make check           the loop before a commit: the checks, the sanitizer build, unit
#                        tests and the integration tests that need no container, no
#                        real engine and no timing (TB_SUITE=check)
#   make check-layers    the include graph of lib/LAYERS (in make test too)
#   make check-src       no banned C calls: sprintf, strcpy, atoi, ... (in make test too)
#   make valgrind        unit tests and a service smoke test under valgrind
#   make fuzz            libFuzzer targets (clang), FUZZ_SECONDS each
#   make bench           benchmarks, printing figures
#   make bench-verdicts  the verdict's false alarms and power (in make bench too)
#   make bench-shards    one cell driven by 1, 2 and 4 worker processes (issue 24)
#   make bench-history   the read routes, empty and with 100k jobs (issue 36)
#   make run             the service on its embedded default (see README)
#   make deps            install missing Debian packages (idempotent)
#   make real-engine     llama.cpp's llama-server on CPU with a tiny model made
#                        here (a cached Debian sid root; make test uses it)
#   make docker-test     docker/Dockerfile built with podman from a local
#                        debootstrap base (no registry) and a job run through
#                        its containers (make test runs it where it can)

.DEFAULT_GOAL := all
MODE     ?= debug
SANITIZE ?= 0
CC       ?= gcc
FUZZ_SECONDS ?= 20
NPROC    := $(shell nproc 2>/dev/null || echo 2)

ifeq ($(FUZZ),1)
BUILD ?= build-fuzz
else ifeq ($(SANITIZE),1)
BUILD ?= build-san
else ifeq ($(MODE),release)
BUILD ?= build-rel
else
BUILD ?= build
endif
# The user-facing binaries land in bin/; sanitizer builds keep theirs apart.
ifeq ($(BUILD),build)
BINDIR ?= bin
else
BINDIR ?= $(BUILD)/bin
endif

PKGS    := libmicrohttpd libcurl jansson libpq openssl zlib liburing
# the benches link against the library with these too (bench/pkgs.sh)
print-pkgs:
	@echo $(PKGS)
.PHONY: print-pkgs
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN    := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wvla -Wstrict-prototypes \
           -Wmissing-prototypes -Wno-unused-parameter
HARDEN  := -fstack-protector-strong -fPIE -fno-strict-overflow
LDHARD  := -pie -Wl,-z,relro,-z,now
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

ifeq ($(FUZZ),1)
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
LDSAN   := -fsanitize=address,undefined
else ifeq ($(SANITIZE),1)
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
           -fno-sanitize-recover=undefined
LDSAN   := -fsanitize=address,undefined
else ifeq ($(MODE),release)
OPT     := -O2 -g -DNDEBUG -D_FORTIFY_SOURCE=2
else
OPT     := -O1 -g -D_FORTIFY_SOURCE=2
endif

CPPFLAGS += -D_GNU_SOURCE -DTB_VERSION='"$(VERSION)"' -Ilib -I$(BUILD)/gen
CFLAGS   += -std=c11 $(WARN) $(HARDEN) $(OPT) -MMD -MP $(PKG_CFLAGS)
LDFLAGS  += $(LDHARD) $(LDSAN)
LDLIBS   += $(PKG_LIBS) -lm -lpthread

# One internal library (lib/) shared by every binary; each binary directory
# holds main.c plus modules that are linked into an archive of their own, so
# that unit tests can link them too.
LIB_SRC     := $(sort $(wildcard lib/*/*.c))
GEN_SRC     := $(BUILD)/gen/tb_migrations_data.c
LIB_OBJ     := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/tb_migrations_data.o
APPS        := service worker sim cli
app_bin_service := tokbench-api
app_bin_worker  := tokbench-worker
app_bin_sim     := tokbench-sim
app_bin_cli     := tokbench

define APP_RULES
$(1)_SRC  := $$(filter-out $(1)/main.c,$$(sort $$(wildcard $(1)/*.c)))
$(1)_OBJ  := $$($(1)_SRC:%.c=$(BUILD)/%.o)
$(BUILD)/lib$(1).a: $$($(1)_OBJ)
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^
$(BINDIR)/$(app_bin_$(1)): $(BUILD)/$(1)/main.o $(BUILD)/lib$(1).a $(BUILD)/libtokbench.a
	@mkdir -p $$(@D)
	$$(CC) $$(LDFLAGS) -o $$@ $$^ $$(LDLIBS)
endef
$(foreach a,$(APPS),$(eval $(call APP_RULES,$(a))))

# An application directory is built once it has its main.c.
BINS := $(foreach a,$(APPS),$(if $(wildcard $(a)/main.c),$(BINDIR)/$(app_bin_$(a))))
APP_ARCHIVES := $(foreach a,$(APPS),$(BUILD)/lib$(a).a)

UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: FORCE all deps run test check check-layers check-format check-src real-engine unit valgrind fuzz fuzz-targets bench bench-verdicts bench-shards bench-history clean docker-test
all: $(BINS)

$(BUILD)/libtokbench.a: $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# Migrations are compiled into the binaries, so a deployed binary needs no
# sql/ directory beside it.
$(GEN_SRC): $(sort $(wildcard sql/*.sql)) scripts/embed-sql.sh
	@mkdir -p $(@D)
	scripts/embed-sql.sh $(sort $(wildcard sql/*.sql)) > $@.tmp && mv $@.tmp $@
$(BUILD)/gen/%.o: $(BUILD)/gen/%.c
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# What the binaries were built from (lib/base/tb_build, a result's
# provenance): the commit and the libraries' versions.  Run every build;
# the header changes (and tb_build.o is rebuilt) only when its text does.
$(BUILD)/gen/base/tb_buildinfo.h: FORCE
	@mkdir -p $(@D)
	@scripts/buildinfo.sh $@ $(PKGS)
$(BUILD)/lib/base/tb_build.o: $(BUILD)/gen/base/tb_buildinfo.h
FORCE:

$(BUILD)/tests/%: tests/unit/%.c $(APP_ARCHIVES) $(BUILD)/libtokbench.a
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Isim -Iservice -Iworker -Icli $(LDFLAGS) -o $@ $< \
	  $(APP_ARCHIVES) $(BUILD)/libtokbench.a $(LDLIBS) -lcmocka

unit: $(UNIT_BIN)

# libFuzzer targets (make FUZZ=1 CC=clang fuzz-targets; `make fuzz` runs them).
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
$(BUILD)/fuzz/%: tests/fuzz/%.c $(APP_ARCHIVES) $(BUILD)/libtokbench.a
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Isim -Iservice -Iworker -Icli -fsanitize=fuzzer $(LDFLAGS) -o $@ $< \
	  $(APP_ARCHIVES) $(BUILD)/libtokbench.a $(LDLIBS)
fuzz-targets: $(FUZZ_BIN)

deps:
	@scripts/deps.sh

# The README's test command: installs what is missing, builds with
# sanitizers, runs every test and prints "N passed, N failed".
# Timing-exact tests also get an uninstrumented build (TB_REL_BIN_DIR).
test: deps check-layers check-src check-format
	$(MAKE) -j$(NPROC) SANITIZE=1 all unit
	$(MAKE) -j$(NPROC) MODE=release all
	TB_BIN_DIR=build-san/bin TB_UNIT_DIR=build-san/tests TB_REL_BIN_DIR=build-rel/bin \
	  scripts/run-tests.sh

# The inner loop (HACKING.md): what make test runs but the container, the real
# engine and the timing tests.
check: deps check-layers check-src check-format
	$(MAKE) -j$(NPROC) SANITIZE=1 all unit
	$(MAKE) -j$(NPROC) MODE=release all
	TB_SUITE=check TB_BIN_DIR=build-san/bin TB_UNIT_DIR=build-san/tests \
	  TB_REL_BIN_DIR=build-rel/bin scripts/run-tests.sh

# Every C file follows .clang-format (scripts/check-format.sh --fix formats).
check-format:
	@scripts/check-format.sh

# The include graph of lib/LAYERS: no include runs up or sideways.
check-layers:
	@scripts/check-layers.sh

# Calls to banned C functions (scripts/checksrc.sh): none, no exceptions.
check-src:
	@scripts/checksrc.sh
	@! git grep -n -E '^(<<<<<<< |>>>>>>> |=======$$)' -- . ':!*.md' 2>/dev/null \
	  || { echo "check-src: merge conflict markers above"; exit 1; }

valgrind: deps
	$(MAKE) all unit
	TB_BIN_DIR=bin TB_UNIT_DIR=build/tests TB_VALGRIND=1 scripts/run-tests.sh

fuzz: deps
	scripts/fuzz.sh $(FUZZ_SECONDS)

bench: deps
	$(MAKE) -j$(NPROC) MODE=release all
	TB_BIN_DIR=build-rel/bin bench/run.sh

# The verdict's false alarms and power over simulated histories (no service).
bench-verdicts: deps
	$(MAKE) MODE=release build-rel/libtokbench.a
	TB_BIN_DIR=build-rel/bin bench/bench_verdicts.sh

# One decode cell driven by 1, 2 and 4 worker processes (issue 24): tokens/s
# against the model's, start skew, merge time, CPU per token of each worker.
bench-shards: deps
	$(MAKE) -j$(NPROC) MODE=release all
	TB_BIN_DIR=build-rel/bin bench/bench_shards.sh

# The read routes with an empty database, then with 100,000 jobs of history
# (issue 36): p50 and p99 of each, and the plans of their statements.
bench-history: deps
	$(MAKE) -j$(NPROC) MODE=release all
	TB_BIN_DIR=build-rel/bin bench/bench_history.sh

# A schedule firing every minute with two api replicas and two workers for
# BENCH_SCHED_SLOTS minutes (default 10, issue 35): the jobs counted by slot.
bench-schedules: deps
	$(MAKE) -j$(NPROC) MODE=release all
	TB_BIN_DIR=build-rel/bin bench/bench_schedules.sh

# The image built and run for real (scripts/docker-test.sh; installs podman,
# runc, debootstrap through scripts/deps.sh docker).  make test runs it from
# tests/integration/test_docker.py, or prints a SKIP line with the reason.
docker-test:
	scripts/docker-test.sh

# A real engine on CPU: Debian's llama.cpp from a cached sid root, serving a
# tiny model made here (scripts/real-engine.sh; docs/real-engine.md).
# REAL_ENGINE_ARGS: e.g. --port 8090 --slots 4 --ctx 16384 --threads 1.
real-engine:
	scripts/real-engine.sh $(REAL_ENGINE_ARGS)

# The README's run command: the service on its embedded default.
run: deps all
	scripts/run.sh

clean:
	rm -rf build build-san build-rel build-fuzz bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
