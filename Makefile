# weft: the two Quick start commands (make demo, make test) and the benchmarks (make bench).
# Every target installs the Debian packages it needs first (scripts/install-deps is idempotent).
SHELL := /bin/bash
JOBS ?= $(shell nproc)
# ctest runs twice as many test processes as there are cores: a test spends much of its time
# waiting (on curl, nginx, PostgreSQL, a timer), and at -j2 on CI's two cores they used 61% of the
# CPU (release, 2026-12-06); at -j4 the release suite took 193 s instead of 285.
TEST_JOBS ?= $(shell echo $$(( $(JOBS) * 2 )))
CHAOS_SEEDS ?= 1 2 3

.PHONY: all deps build demo tour test check-layers test-release test-asan test-chaos test-install test-guide test-fuzz docs tsan bench bench-smoke format clean

all: build

deps:
	@scripts/install-deps

build/release/build.ninja: | deps
	cmake --preset release >/dev/null

build/asan/build.ninja: | deps
	cmake --preset asan >/dev/null

build/tsan/build.ninja: | deps
	cmake --preset tsan >/dev/null

build: deps build/release/build.ninja
	cmake --build --preset release -j $(JOBS)

# weft-httpd on 127.0.0.1:8080 in the foreground (Ctrl-C stops it); DEMO_FLAGS adds flags
# (--workers 2, --pg "host=/run/postgresql dbname=app", --driver poll, --log).
DEMO_FLAGS ?=
demo: build
	build/release/apps/weft-httpd/weft-httpd --listen 127.0.0.1:8080 $(DEMO_FLAGS)

# The guided tour of the runtime's figures (what `make demo` used to run).
tour: build
	build/release/examples/tour

# The benchmark smoke run and the install check go first so that the last lines are ctest's.
test: check-layers docs bench-smoke test-install test-guide test-fuzz test-release test-asan test-chaos

# The API reference, from the public headers' own comments (docs/Doxyfile, through
# scripts/doxygen-filter), into build/docs/html. Any Doxygen warning fails it, an undocumented
# public name included (the warnings are in build/docs/warnings.log). And docs/benchmarks.md must
# show each suite's table as bench/results/SUITE.md has it (bench/run.py --check-docs).
docs: deps
	@mkdir -p build/docs
	@doxygen docs/Doxyfile >/dev/null 2>&1 || { cat build/docs/warnings.log; \
	  echo "make docs: Doxygen warned (above); document the names it lists"; exit 1; }
	@python3 bench/run.py --check-docs
	@echo "docs: build/docs/html/index.html"

# No file of the library includes a header of a higher layer (docs/architecture.md).
check-layers:
	scripts/check-layers

# The whole suite once per driver this build has (uv, ev, event, epoll, poll, uring): ctest
# registers every GoogleTest suite as DRIVER:Suite with WEFT_DRIVER=DRIVER and the label driver-DRIVER
# (run one driver alone with `ctest --preset release -L '^driver-poll$$'`).
test-release: build
	ctest --preset release -j $(TEST_JOBS)

# ASan+UBSan on the libuv driver, on the epoll and poll drivers (no library under them: their
# own dispatch, which must not touch a watch a callback of the same turn freed) and on the uring
# driver (slots that outlive their watches until the kernel is done with them), and the
# driver-independent tests (tests/CMakeLists.txt: run once, label driver-independent).
test-asan: deps build/asan/build.ninja
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(TEST_JOBS) -L '^driver-(uv|epoll|poll|uring|independent)$$'

# The whole suite again with a random choice of the next ready coroutine, several seeds, on the
# libuv driver (the default), the poll driver (no library under it) and the uring driver (slots
# that outlive their watches). ev and event are the poll driver's pattern over a library and run
# in FIFO order in test-release; leaving them out keeps CI under 45 minutes (a seed took 95 to
# 106 s on two cores, 2026-12-06). The driver-independent tests run no scheduler, so chaos order
# changes nothing for them.
test-chaos: build
	@for seed in $(CHAOS_SEEDS); do \
	  echo "== chaos order, seed $$seed"; \
	  WEFT_SCHED=random WEFT_SEED=$$seed ctest --preset release -j $(TEST_JOBS) \
	    -L '^driver-(uv|poll|uring)$$' || exit 1; \
	done

# libFuzzer over the HTTP parsers (tests/http/fuzz/parser_fuzz.cpp, which says how to run it for
# an hour) for FUZZ_SECONDS, over the HTTP client's URLs and redirects (tests/http/fuzz/url_fuzz.cpp)
# for FUZZ_URL_SECONDS, over the multipart/form-data reader (tests/http/fuzz/multipart_fuzz.cpp)
# for FUZZ_FORM_SECONDS, then over net's framers (WebSocket in both roles, text, frame:
# tests/net/fuzz/framer_fuzz.cpp) for FUZZ_NET_SECONDS and over the PROXY protocol header's
# parser (tests/net/fuzz/proxy_header_fuzz.cpp) for FUZZ_PROXY_SECONDS, each from its committed
# seeds; new inputs go to build/fuzz/corpus, build/fuzz/url-corpus, build/fuzz/multipart-corpus,
# build/fuzz-net/corpus and build/fuzz-net/proxy-corpus.
FUZZ_SECONDS ?= 45
FUZZ_URL_SECONDS ?= 15
FUZZ_FORM_SECONDS ?= 15
FUZZ_NET_SECONDS ?= 30
FUZZ_PROXY_SECONDS ?= 10
# $(call fuzz,BINARY,DICT,SECONDS,CORPUS,SEEDS,WHAT): one bounded run; its log is CORPUS.log,
# printed whole when the fuzzer fails (a crash or a broken invariant), its totals otherwise.
define fuzz
	mkdir -p $(4) $(4)-artifacts
	@echo "== fuzzing $(6) for $(3) s (log: $(4).log)"
	@$(1) -dict=$(2) -max_total_time=$(3) -print_final_stats=1 -artifact_prefix=$(4)-artifacts/ \
	  $(4) $(5) >$(4).log 2>&1 || { tail -n 60 $(4).log; exit 1; }
	@grep -E '^#[0-9]+.*(DONE|cov:)' $(4).log | tail -n 1
	@grep -E '^stat::(number_of_executed_units|new_units_added)' $(4).log
endef
test-fuzz: deps
	cmake -S tests/http/fuzz -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
	cmake --build build/fuzz -j $(JOBS)
	$(call fuzz,build/fuzz/http_parser_fuzz,tests/http/fuzz/http.dict,$(FUZZ_SECONDS),build/fuzz/corpus,tests/http/fuzz/corpus,the HTTP parsers)
	$(call fuzz,build/fuzz/http_url_fuzz,tests/http/fuzz/url.dict,$(FUZZ_URL_SECONDS),build/fuzz/url-corpus,tests/http/fuzz/url-corpus,the HTTP client's URLs)
	$(call fuzz,build/fuzz/http_multipart_fuzz,tests/http/fuzz/multipart.dict,$(FUZZ_FORM_SECONDS),build/fuzz/multipart-corpus,tests/http/fuzz/multipart-corpus,the multipart/form-data reader)
	cmake -S tests/net/fuzz -B build/fuzz-net -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null
	cmake --build build/fuzz-net -j $(JOBS)
	$(call fuzz,build/fuzz-net/net_framer_fuzz,tests/net/fuzz/framer.dict,$(FUZZ_NET_SECONDS),build/fuzz-net/corpus,tests/net/fuzz/corpus,net's framers)
	$(call fuzz,build/fuzz-net/net_proxy_header_fuzz,tests/net/fuzz/proxy.dict,$(FUZZ_PROXY_SECONDS),build/fuzz-net/proxy-corpus,tests/net/fuzz/proxy-corpus,the PROXY protocol header)

# Installs into a scratch prefix and builds examples/consumer against it with find_package(weft)
# and pkg-config.
test-install: build
	scripts/test-install

# Builds every program of the guide (docs/guide/*/) against the installed package, runs each and
# checks what it prints (scripts/test-guide says how; about half a minute on 2 cores).
test-guide: build
	scripts/test-guide

tsan: deps build/tsan/build.ninja
	cmake --build --preset tsan -j $(JOBS)
	ctest --preset tsan

bench: build
	python3 bench/run.py --build-dir build/release

bench-smoke: build
	python3 bench/run.py --build-dir build/release --smoke

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.h' '*.c')

clean:
	rm -rf build
