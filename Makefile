# Free Agent — see README.md. `make run` starts a local farm, `make test` runs every test.
GO      ?= go
BIN     := bin
DARWIN  := GOOS=darwin GOARCH=arm64 CGO_ENABLED=0

.PHONY: all build run test test-tools vet bench chaos fuzz clean app package-check image standins

all: build

# -buildvcs=auto: stamp the git revision (the controller registry shows it as the version)
# even where GOFLAGS turns stamping off.
build:
	$(GO) build -buildvcs=auto -o $(BIN)/ ./controller/cmd/freeagent-controller ./tray/cmd/freeagent ./vmbootstrap/cmd/freeagent-vm ./cli/cmd/expo-build

# The controller's container image, built without a Docker engine and
# reproducibly (same commit, same digest): an OCI image layout tar that
# `docker load -i` and `podman load -i` take. IMAGE_ARCH=arm64 for ARM hosts.
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
IMAGE_TAG  ?= freeagent-controller:latest
image:
	$(GO) -C deploy/image run . -C $(CURDIR) -o $(CURDIR)/$(BIN)/freeagent-controller-image.tar -arch $(IMAGE_ARCH) -tag $(IMAGE_TAG) \
		-version "$$(git describe --tags --always 2>/dev/null || echo dev)"

# Starts the controller on its built-in PostgreSQL and a worker with the
# local driver (data under .run/), and prints a ready-to-use API key. Once
# per .run/: a second start names the running farm; Ctrl-C stops it all.
run: build test-tools
	./scripts/dev-run.sh

# The cgotypecheck step type-checks the darwin+cgo files (Keychain, menu
# bar), which neither vet run compiles.
vet: test-tools
	@unformatted=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
		if [ -n "$$unformatted" ]; then echo "vet: not gofmt-formatted (run gofmt -w):"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(DARWIN) $(GO) vet ./...
	$(GO) -C deploy/image vet ./...
	$(GO) run ./packaging/cmd/cgotypecheck ./...
	shellcheck $(SHELL_SCRIPTS)
	@if git grep --untracked -nIiE 'issue [0-9]+' -- '*.go' '*.md' '*.sh' 2>/dev/null; then \
		echo "vet: the lines above name tracker issues, which a clone cannot see: say what the thing does"; exit 1; fi

SHELL_SCRIPTS := .ci/run scripts/*.sh packaging/*.sh launchd/guest/freeagent-vm-launcher launchd/guest/freeagent-toolchain-env agent/secrets/testdata/security vmbootstrap/testdata/android-app/android/gradlew

# Every test, including the fuzz targets' seed corpora, against real Postgres
# clusters started by the tests themselves. The agent package builds the real
# Expo template through Metro on several profiles, minutes each on two cores:
# more than go test's default 10 minutes a package.
test: test-tools vet package-check
	$(GO) test -count=1 -timeout 60m ./...

# Installs the stand-in Gradle distribution into $GRADLE_USER_HOME (default
# ~/.gradle) for the wrapper versions of testdata/expo-default: a real
# project's ./gradlew then runs the real JS bundle and Hermes compiler and a
# stand-in for native compilation (its artifacts do not run on a device).
# See internal/standins/fakegradle.
standins:
	$(GO) build -o $(BIN)/fakegradle ./internal/standins/fakegradle
	$(BIN)/fakegradle install

# Installs the programs the farm and its tests run (scripts/test-tools.sh
# is their one list) or, where it cannot install, names them and stops
# before any test.
test-tools:
	./scripts/test-tools.sh

# On Linux (CI): darwin binaries for both architectures, FreeAgent.app
# assembled, ad-hoc signed with quill and validated. See packaging/README.md.
package-check:
	./packaging/package-check.sh

# On a Mac: the universal, signed, notarized FreeAgent.app, zip, dmg and
# Homebrew cask (FREEAGENT_SIGN_IDENTITY, FREEAGENT_NOTARY_PROFILE).
app:
	./packaging/make-app.sh

# Throughput, latency and memory figures (see README "Performance").
bench:
	$(GO) run ./bench/cmd/freeagent-bench
	$(GO) test ./agent -run XXX -bench AgentOverhead -benchtime 1x
	$(GO) test ./agent -run XXX -bench WarmBuild -benchtime 1x

# The chaos test's long mode: CHAOS_BUILDS builds (default 1,000) while two
# controller replicas, Postgres and the agents are killed and restarted,
# the faults overlapping. It fails on any lost, duplicated, wrongly attached
# or dead-lettered build and logs its figures (docs/performance.md, "Chaos").
# By hand or nightly: `make test` runs the short size.
CHAOS_BUILDS ?= 1000
chaos:
	FREEAGENT_CHAOS_BUILDS=$(CHAOS_BUILDS) $(GO) test -count=1 -timeout 3h -v -run '^TestChaos' ./controller/cmd/freeagent-controller/

# Runs each fuzz target of every package for FUZZTIME (default 30s).
FUZZTIME ?= 30s
fuzz:
	@for p in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for f in $$($(GO) test -list 'Fuzz.*' $$p | grep ^Fuzz); do \
			echo "== $$p $$f"; $(GO) test -run XXX -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$p || exit 1; \
		done; \
	done

clean:
	rm -rf $(BIN) .run
