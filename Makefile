# zkgate: ZooKeeper's coordination recipes over HTTP.
GO ?= go
TEST_FLAGS ?= -count=1 -timeout 20m
LISTEN ?= 127.0.0.1:8080

.PHONY: run test stress test-clients test-release test-deploy test-install check-generated build generate lint bench deps release man install image

## run: the gateway on an embedded ZooKeeper (installs ZooKeeper and Java if missing)
run: deps
	$(GO) run ./cmd/zkgate serve --listen $(LISTEN)

# The concurrency tests of server/ that also run under the race detector:
# every test whose doc comment ends in the directive //zkgate:race (the
# marker stays with the test when it is renamed or moved).
RACE_TESTS ?= $(shell grep -h -A1 '^//zkgate:race$$' server/*_test.go | \
	sed -n 's/^func \(Test[A-Za-z0-9_]*\).*/\1/p' | paste -sd '|')

## test: the whole suite, on real ZooKeeper servers; recipes/ and the concurrency tests of
## server/ again under the race detector; then the clients and examples, go install, the release
test: check-generated
	@scripts/deps.sh test
	@scripts/gotool.sh --warm-up
	$(GO) vet ./...
	$(GO) test $(TEST_FLAGS) ./...
	$(GO) test -race $(TEST_FLAGS) ./recipes/
	$(GO) test -race $(TEST_FLAGS) -run '^($(RACE_TESTS))$$' ./server/
	scripts/test-clients.sh
	scripts/test-deploy.sh
	scripts/test-install.sh
	scripts/test-release.sh

## stress: the tests that depend on timing or load (servers started, connections dropped, expiries,
## paused processes, slow readers), -count 20 under a busy loop (COUNT, HOGS; groups as arguments: ARGS)
stress:
	scripts/stress-tests.sh $(ARGS)

## test-clients: the contract lint and type check, the Python and Node clients' tests and every example, on a real gateway
test-clients:
	@scripts/deps.sh test
	scripts/test-clients.sh

## test-deploy: the Helm chart (helm lint, helm template, its pods rolled out on loopback) and the
## Prometheus rules (promtool)
test-deploy:
	@scripts/deps.sh test
	scripts/test-deploy.sh
	$(GO) test $(TEST_FLAGS) -run '^TestChartRollout$$' ./deploy/

## test-install: the commit, served as a tag from a local module proxy, installed with
## go install .../cmd/zkgate@V and imported (recipes, client) by another module
test-install:
	scripts/test-install.sh

## test-release: goreleaser's check, a linux/amd64 snapshot, its .deb installed and removed, the image (root only)
test-release:
	@scripts/deps.sh test
	scripts/test-release.sh

## check-generated: the committed templ output is what templ makes of the sources
check-generated:
	$(GO) tool templ generate >/dev/null 2>&1
	@if [ -n "$$(git status --porcelain -- views)" ]; then \
		echo "views/*_templ.go are stale: run 'make generate' and commit them"; git status --porcelain -- views; exit 1; fi

## build: bin/zkgate
build:
	$(GO) build -o bin/zkgate ./cmd/zkgate

# What make install and make image stamp into the binary (a release takes
# them from goreleaser).
BUILD_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BUILD_COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
STATIC_LDFLAGS = -s -w -X github.com/zkgate/zkgate/server.Version=$(BUILD_VERSION) \
	-X github.com/zkgate/zkgate/server.Commit=$(BUILD_COMMIT) -X github.com/zkgate/zkgate/server.Date=$(BUILD_DATE)

## release: archives, checksums, .deb and .rpm in dist/ (goreleaser, pinned); a snapshot unless HEAD is tagged;
## publish with RELEASE_FLAGS= and GITHUB_TOKEN set
RELEASE_FLAGS ?= --skip=publish
release:
	scripts/gotool.sh goreleaser release --clean $(RELEASE_FLAGS) \
		$$(git describe --exact-match --tags >/dev/null 2>&1 || echo --snapshot)

## man: build/man/zkgate.1 and a page for each command (zkgate-serve.1...), from the program's own commands
man:
	$(GO) run ./tools/mangen -dir build/man

PREFIX ?= /usr/local
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
## install: the static binary to $(PREFIX)/bin, the man pages, the systemd unit and its user, and
## /etc/zkgate/zkgate.env if there is none (DESTDIR for staging); then: systemd-sysusers, systemctl daemon-reload
install: man
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(STATIC_LDFLAGS)' -o build/install/zkgate ./cmd/zkgate
	install -D -m 0755 build/install/zkgate $(DESTDIR)$(PREFIX)/bin/zkgate
	install -D -m 0644 -t $(DESTDIR)$(PREFIX)/share/man/man1 build/man/*.1
	install -d $(DESTDIR)$(UNITDIR)
	sed 's|/usr/bin/zkgate|$(PREFIX)/bin/zkgate|' packaging/systemd/zkgate.service > $(DESTDIR)$(UNITDIR)/zkgate.service
	install -D -m 0644 packaging/sysusers.conf $(DESTDIR)$(SYSUSERSDIR)/zkgate.conf
	@if [ -e $(DESTDIR)/etc/zkgate/zkgate.env ]; then echo "keeping $(DESTDIR)/etc/zkgate/zkgate.env"; \
	else install -D -m 0600 packaging/zkgate.env $(DESTDIR)/etc/zkgate/zkgate.env; fi

IMAGE ?= zkgate:dev
CONTAINER_BUILD ?= buildah bud
## image: the container image $(IMAGE) for gateways in front of an ensemble (Containerfile; builds offline)
image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(STATIC_LDFLAGS)' -o build/image/zkgate ./cmd/zkgate
	cp /etc/ssl/certs/ca-certificates.crt build/image/ca-certificates.crt
	$(CONTAINER_BUILD) -f Containerfile -t $(IMAGE) .

## generate: the templ components of the dashboard
generate:
	$(GO) tool templ generate

## lint: gofmt, go vet, staticcheck
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

## bench: gateway against a direct go-zookeeper client, on one ZooKeeper
bench: deps
	$(GO) run ./cmd/zkgate-bench

deps:
	@scripts/deps.sh run
