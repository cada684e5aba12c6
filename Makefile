# fleetprof: make | make test | make check [T=MODULE] | make bench | make soak | make run | make fuzz | make clean
#            make install [PREFIX=/usr/local] [DESTDIR=] | make uninstall
# Quiet by default; V=1 shows the commands.

SHELL      := /bin/bash
BUILD      ?= build
CC         ?= cc
CLANG      ?= clang
BPFTOOL    ?= bpftool
PROTOC_C   ?= protoc-c
ARCH       ?= $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
MULTIARCH  := $(shell $(CC) -print-multiarch 2>/dev/null)
VERSION    := $(shell git describe --always --dirty 2>/dev/null || echo 0.1)

WARN       := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wno-missing-field-initializers
CFLAGS     ?= -O2 -g
# The symbolizer's folders, in pipeline order: what comes in (ingest), the
# symbols it needs (symbols), the parsing of outside files (elf), the
# profile model and its encoders (profile), where profiles go (sinks), and
# the HTTP symbol service (service).
SYMB_DIRS  := ingest symbols elf profile sinks service
# nng 1.5.2 with the peer certificate's names (tools/nng-peer-names.patch),
# static, built by tools/install-deps.sh; the name carries the patch's
# version.
NNG_PREFIX := /opt/fleetprof/nng-1.5.2-fp2
NNG_LIBS   := $(NNG_PREFIX)/lib/libnng.a -lmbedtls -lmbedx509 -lmbedcrypto
INCLUDES   := -I$(NNG_PREFIX)/include -Icommon -Idevice -Isymbolizer $(addprefix -Isymbolizer/,$(SYMB_DIRS)) -Ibpf \
              -I$(BUILD) -I$(BUILD)/proto
FP_CFLAGS  := $(CFLAGS) $(WARN) -std=gnu11 -D_GNU_SOURCE -DFP_VERSION='"$(VERSION)"' $(INCLUDES)
AGENT_LIBS := -lbpf -lelf -lz $(NNG_LIBS) -lmsgpackc -lpthread
# The agent links libbpf, mbed TLS and msgpack-c statically: 0.6 MB less
# RSS on a switch, where nothing else maps them (make bench, device part:
# their pages and per-library data); libelf, zlib and libc stay shared.
AGENT_LINK := -Wl,-Bstatic -lbpf $(NNG_LIBS) -lmsgpackc -Wl,-Bdynamic -lelf -lz -lpthread
ALL_LIBS   := $(AGENT_LIBS) -llmdb -lprotobuf-c -ldebuginfod -lstdc++ -ldwarf -llzma
SAN        := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
.PRECIOUS: $(BUILD)/%.bpf.o
.PHONY: all deps deps-run test check bench soak run fuzz clean format format-check lint install uninstall

COMMON_SRCS := $(wildcard common/*.c)
# The agent's program: its main, its intervals, its exchanges with the
# symbolizer and its unwind tables, which share the agent's state
# (device/agent.h); the rest of
# device/ is a library.
AGENT_SRCS  := device/main.c device/interval.c device/exchange.c device/tables.c
DEVICE_SRCS := $(filter-out $(AGENT_SRCS),$(wildcard device/*.c))
SYMB_SRCS   := $(foreach d,$(SYMB_DIRS),$(wildcard symbolizer/$(d)/*.c))
HDRS        := $(wildcard */*.h symbolizer/*/*.h tests/unit/*.h)
TOOLS_SRCS  := $(wildcard tools/*.c)
PROTOS      := $(wildcard proto/*.proto)
PROTO_SRCS  := $(patsubst proto/%.proto,$(BUILD)/proto/%.pb-c.c,$(PROTOS))
PROTO_HDRS  := $(PROTO_SRCS:.c=.h)
BPF_SRCS    := $(wildcard bpf/*.bpf.c)
BPF_HDRS    := $(wildcard bpf/*.h)
# stacks_py, stacks_off, stacks_offpy: the Python walker, the off-CPU hook
# and its Python walker, built from stacks.bpf.c (see its head).
SKELS       := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS)) $(BUILD)/stacks_py.skel.h \
               $(BUILD)/stacks_off.skel.h $(BUILD)/stacks_offpy.skel.h
UNIT_SRCS   := $(wildcard tests/unit/*_test.c)
UNIT_BINS   := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
UNIT_ASAN   := $(patsubst tests/unit/%.c,$(BUILD)/asan/tests/%,$(UNIT_SRCS))
BENCH_SRCS  := $(wildcard tests/bench/*.c)
BENCH_BINS  := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))
FUZZ_SRCS   := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS   := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))
WORKLOAD    := $(BUILD)/tests/workload

# Nothing built is deleted as "intermediate": generated sources and objects
# are reused by the next build (and parallel builds must not lose them).
.SECONDARY:

obj     = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
asanobj = $(patsubst %.c,$(BUILD)/asan/obj/%.o,$(1))
LIB_SRCS := $(COMMON_SRCS) $(DEVICE_SRCS) $(SYMB_SRCS) $(PROTO_SRCS)

# One static library per folder (build/lib/libfp_NAME.a, and the ASan
# build's beside it); programs link the ones they need as one group, so
# that the order of folders does not matter.
lib     = $(BUILD)/lib/libfp_$(1).a
asanlib = $(BUILD)/asan/lib/libfp_$(1).a
LIBNAMES := common device proto $(SYMB_DIRS)
srcs_common := $(COMMON_SRCS)
srcs_device := $(DEVICE_SRCS)
srcs_proto  := $(PROTO_SRCS)
$(foreach d,$(SYMB_DIRS),$(eval srcs_$(d) := $(wildcard symbolizer/$(d)/*.c)))
$(foreach n,$(LIBNAMES),$(eval $(call lib,$(n)): $(call obj,$(srcs_$(n)))))
$(foreach n,$(LIBNAMES),$(eval $(call asanlib,$(n)): $(call asanobj,$(srcs_$(n)))))
AGENT_LIBA := $(call lib,device) $(call lib,common)
SYMB_LIBA  := $(foreach d,$(SYMB_DIRS) common proto,$(call lib,$(d)))
ALL_LIBA   := $(foreach n,$(LIBNAMES),$(call lib,$(n)))
ALL_ASANA  := $(foreach n,$(LIBNAMES),$(call asanlib,$(n)))
group = -Wl,--start-group $(1) -Wl,--end-group

BINS := $(BUILD)/fleetprof-agent $(BUILD)/fleetprof-symbolizer $(BUILD)/fleetprof

all: $(BINS)

deps:
	$(Q)tools/install-deps.sh
deps-run:
	$(Q)tools/install-deps.sh run

# BPF object -> skeleton.  No vmlinux.h, no CO-RE: UAPI headers only.
BPF_CC = $(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) \
	$(if $(MULTIARCH),-I/usr/include/$(MULTIARCH)) -Ibpf
$(BUILD)/%.bpf.o: bpf/%.bpf.c $(BPF_HDRS) | $(BUILD)
	$(call msg,BPF,$@)
	$(Q)$(BPF_CC) -c $< -o $@
$(BUILD)/stacks_py.bpf.o: bpf/stacks.bpf.c $(BPF_HDRS) | $(BUILD)
	$(call msg,BPF,$@)
	$(Q)$(BPF_CC) -DFP_PYTHON_WALKER -c $< -o $@
$(BUILD)/stacks_off.bpf.o: bpf/stacks.bpf.c $(BPF_HDRS) | $(BUILD)
	$(call msg,BPF,$@)
	$(Q)$(BPF_CC) -DFP_OFFCPU -c $< -o $@
$(BUILD)/stacks_offpy.bpf.o: bpf/stacks.bpf.c $(BPF_HDRS) | $(BUILD)
	$(call msg,BPF,$@)
	$(Q)$(BPF_CC) -DFP_OFFCPU -DFP_PYTHON_WALKER -c $< -o $@
$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

$(BUILD)/proto/%.pb-c.c $(BUILD)/proto/%.pb-c.h: proto/%.proto
	$(call msg,PROTOC,$@)
	$(Q)mkdir -p $(BUILD)/proto && $(PROTOC_C) --proto_path=proto --c_out=$(BUILD)/proto $<

# Only the sampler includes the BPF skeleton; the protobuf encoders and
# their tests include the generated headers.
$(call obj,device/sampler.c) $(call asanobj,device/sampler.c): $(SKELS)
$(NNG_PREFIX)/include/nng/nng.h:
	@echo "$@ is missing: run tools/install-deps.sh as root" >&2; exit 1
$(BUILD)/obj/%.o: %.c $(PROTO_HDRS) $(HDRS) | $(NNG_PREFIX)/include/nng/nng.h
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(FP_CFLAGS) -c $< -o $@
$(BUILD)/asan/obj/%.o: %.c $(PROTO_HDRS) $(HDRS) | $(NNG_PREFIX)/include/nng/nng.h
	$(call msg,CC-ASAN,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(FP_CFLAGS) $(SAN) -c $< -o $@
$(ALL_LIBA) $(ALL_ASANA):
	$(call msg,AR,$@)
	$(Q)mkdir -p $(@D) && rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/fleetprof-agent: $(call obj,$(AGENT_SRCS)) $(AGENT_LIBA)
	$(call msg,LD,$@)
	$(Q)$(CC) $(FP_CFLAGS) $(call obj,$(AGENT_SRCS)) $(call group,$(AGENT_LIBA)) $(AGENT_LINK) -o $@
$(BUILD)/fleetprof-symbolizer: $(call obj,symbolizer/main.c) $(SYMB_LIBA)
	$(call msg,LD,$@)
	$(Q)$(CC) $(FP_CFLAGS) $< $(call group,$(SYMB_LIBA)) $(ALL_LIBS) -o $@
$(BUILD)/fleetprof: $(call obj,$(TOOLS_SRCS)) $(ALL_LIBA)
	$(call msg,LD,$@)
	$(Q)$(CC) $(FP_CFLAGS) $(call obj,$(TOOLS_SRCS)) $(call group,$(ALL_LIBA)) $(ALL_LIBS) -o $@

$(BUILD)/tests/%_test: $(call obj,tests/unit/%_test.c) $(ALL_LIBA)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(FP_CFLAGS) $< $(call group,$(ALL_LIBA)) $(ALL_LIBS) -o $@
$(BUILD)/bench/%: $(call obj,tests/bench/%.c) $(ALL_LIBA)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(FP_CFLAGS) $< $(call group,$(ALL_LIBA)) $(ALL_LIBS) -o $@

$(BUILD)/asan/tests/%_test: $(call asanobj,tests/unit/%_test.c) $(ALL_ASANA)
	$(call msg,LD-ASAN,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(FP_CFLAGS) $(SAN) $< $(call group,$(ALL_ASANA)) $(ALL_LIBS) -o $@

# Fuzz targets: libFuzzer + ASan + UBSan, built with clang.
$(BUILD)/fuzz/%: tests/fuzz/%.c $(LIB_SRCS) $(SKELS) $(PROTO_HDRS)
	$(call msg,FUZZ,$@)
	$(Q)mkdir -p $(@D) && $(CLANG) -g -O1 $(WARN) -std=gnu11 -D_GNU_SOURCE -DFP_VERSION='"fuzz"' \
		$(INCLUDES) -fsanitize=fuzzer,address,undefined $< $(LIB_SRCS) $(ALL_LIBS) -o $@

# Test workload: clang with frame pointers (gcc 12 ignores the leaf flag).
WL_FLAGS := -O1 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -fno-inline
$(BUILD)/tests/libfpwork.so: tests/workload/libfpwork.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CLANG) $(WL_FLAGS) -fPIC -shared $< -o $@
$(WORKLOAD): tests/workload/workload.cc $(BUILD)/tests/libfpwork.so
	$(call msg,CXX,$@)
	$(Q)$(CLANG)++ $(WL_FLAGS) $< -L$(BUILD)/tests -lfpwork -Wl,-rpath,'$$ORIGIN' -lpthread -o $@

$(BUILD)/tests/nngsend $(BUILD)/tests/hostile: $(BUILD)/tests/%: $(call obj,tests/e2e/%.c) $(call lib,common)
	$(call msg,LD,$@)
	$(Q)mkdir -p $(@D) && $(CC) $(FP_CFLAGS) $^ $(AGENT_LIBS) -o $@

$(BUILD):
	$(Q)mkdir -p $@

test: deps all $(UNIT_BINS) $(UNIT_ASAN) $(FUZZ_BINS) $(WORKLOAD) $(BUILD)/tests/nngsend \
		$(BUILD)/tests/hostile
	$(Q)BUILD=$(BUILD) tests/run.sh

# make check T=wire: the unit tests of one module (T=, space-separated for
# several), plain and under ASan+UBSan; all unit tests without T.
CHECK_NAMES := $(or $(T),$(patsubst tests/unit/%_test.c,%,$(UNIT_SRCS)))
check: $(foreach t,$(CHECK_NAMES),$(BUILD)/tests/$(t)_test $(BUILD)/asan/tests/$(t)_test)
	$(Q)BUILD=$(BUILD) tests/run.sh --unit $(CHECK_NAMES)

bench: deps all $(WORKLOAD) $(BENCH_BINS)
	$(Q)python3 tools/bench.py --build $(BUILD)

# The soak test of `make test` for 30 minutes (SOAK_SECONDS overrides).
soak: deps all $(WORKLOAD)
	$(Q)BUILD=$(BUILD) SOAK_SECONDS=$${SOAK_SECONDS:-1800} bash tests/e2e/soak_test.sh

# make run: the whole machine profiled for 10 s while the bundled demo
# (tools/demo) runs; only what building and running need is installed.
RUN_OUT ?= out
$(BUILD)/demo/demo: tools/demo/demo.c
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D) && $(CC) -O2 -g -fomit-frame-pointer -o $@ $<
run: deps-run all $(BUILD)/demo/demo
	$(Q)tools/demo/run.sh $(BUILD) $(RUN_OUT)

fuzz: $(FUZZ_BINS)
	$(Q)for f in $(FUZZ_BINS); do mkdir -p $(BUILD)/corpus/$$(basename $$f); \
		$$f -max_total_time=$${FUZZ_SECONDS:-60} $(BUILD)/corpus/$$(basename $$f) tests/fuzz/corpus/$$(basename $$f) || exit 1; done

# Formatting against .clang-format: `make format` rewrites the sources in
# place, `make format-check` only lists the files it would change (and how
# many of their lines) and fails if there are any.  Generated files under
# $(BUILD) are not ours to format.
# One version, Debian 12's: another formats some lines differently.
CLANG_FORMAT ?= clang-format-14
FORMAT_SRCS := $(filter-out $(BUILD)/%,$(wildcard */*.c */*.h symbolizer/*/*.c symbolizer/*/*.h tools/demo/*.c \
	tests/*/*.c tests/*/*.h tests/*/*.cc))

format:
	$(Q)$(CLANG_FORMAT) -i $(FORMAT_SRCS)

format-check:
	$(Q)bad=0; for f in $(FORMAT_SRCS); do \
		n=$$($(CLANG_FORMAT) --style=file "$$f" | diff "$$f" - | grep -c '^<'); \
		[ "$$n" -eq 0 ] || { echo "$$f: $$n lines differ from .clang-format"; bad=$$((bad + n)); }; \
	done; [ "$$bad" -eq 0 ] || { echo "format-check: $$bad lines to change (make format)"; exit 1; }

# Static checks: cppcheck (must be clean), then clang's static analyzer
# through clang-tidy (advisory: it lists findings to triage, many of them
# paths that the option checks rule out).
LINT_SRCS := $(COMMON_SRCS) $(DEVICE_SRCS) $(AGENT_SRCS) $(SYMB_SRCS) symbolizer/main.c $(TOOLS_SRCS)
lint: $(SKELS) $(PROTO_HDRS)
	$(Q)cppcheck --quiet --error-exitcode=1 --inline-suppr --enable=warning,performance,portability \
		--std=c11 -D__x86_64__ -DFP_VERSION='"lint"' $(INCLUDES) \
		--suppress=missingInclude --suppress=missingIncludeSystem --suppress=unknownMacro $(LINT_SRCS)
	$(Q)clang-tidy --quiet --checks='-*,clang-analyzer-*,-clang-analyzer-security.insecureAPI.*' \
		$(LINT_SRCS) -- $(FP_CFLAGS) 2>/dev/null | grep -E '^/.*: (warning|error):' | \
		grep -v '/$(BUILD)/' | sort -u || true

clean:
	$(Q)rm -rf $(BUILD)

# make install: the command to bin, the two daemons to sbin (Debian's
# policy for programs that system administrators run), the man pages
# (docs/man, mdoc) to share/man; DESTDIR for a staged install.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
MANDIR  ?= $(PREFIX)/share/man
INSTALL ?= install
MAN1    := $(wildcard docs/man/*.1)
MAN8    := $(wildcard docs/man/*.8)

install: all
	$(Q)$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man8
	$(Q)$(INSTALL) -m 0755 $(BUILD)/fleetprof $(DESTDIR)$(BINDIR)/
	$(Q)$(INSTALL) -m 0755 $(BUILD)/fleetprof-agent $(BUILD)/fleetprof-symbolizer $(DESTDIR)$(SBINDIR)/
	$(Q)$(INSTALL) -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	$(Q)$(INSTALL) -m 0644 $(MAN8) $(DESTDIR)$(MANDIR)/man8/

uninstall:
	$(Q)rm -f $(DESTDIR)$(BINDIR)/fleetprof $(DESTDIR)$(SBINDIR)/fleetprof-agent \
		$(DESTDIR)$(SBINDIR)/fleetprof-symbolizer \
		$(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN1))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(MAN8)))
