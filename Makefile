# zkgate: ZooKeeper's coordination recipes over HTTP.
GO ?= go
TEST_FLAGS ?= -count=1 -timeout 20m
LISTEN ?= 127.0.0.1:8080

.PHONY: run test test-clients check-generated build generate lint bench deps

## run: the gateway on an embedded ZooKeeper (installs ZooKeeper and Java if missing)
run: deps
	$(GO) run ./cmd/zkgate serve --listen $(LISTEN)

# The concurrency tests of server/ that also run under the race detector.
RACE_TESTS ?= TestLockContention|TestReadWriteLock|TestSemaphore|TestElection|TestOneShotElection|TestBarrier|TestDoubleBarrierAcrossGateways|TestQueueClaimsSurviveDyingConsumers|TestQueueNackAndDisconnect|TestTimeoutAndDisconnectLeaveNoWaiter|TestLeaseOnAnotherGateway|TestLostCreateReply|TestBlockingReadsShareOneWatch

## test: the whole suite, on real ZooKeeper servers; recipes/ and the concurrency tests of
## server/ again under the race detector; then the clients and examples
test: check-generated
	@scripts/deps.sh test
	$(GO) vet ./...
	$(GO) test $(TEST_FLAGS) ./...
	$(GO) test -race $(TEST_FLAGS) ./recipes/
	$(GO) test -race $(TEST_FLAGS) -run '^($(RACE_TESTS))$$' ./server/
	scripts/test-clients.sh

## test-clients: the contract lint and type check, the Python and Node clients' tests and every example, on a real gateway
test-clients:
	@scripts/deps.sh test
	scripts/test-clients.sh

## check-generated: the committed templ output is what templ makes of the sources
check-generated:
	$(GO) tool templ generate >/dev/null 2>&1
	@if [ -n "$$(git status --porcelain -- views)" ]; then \
		echo "views/*_templ.go are stale: run 'make generate' and commit them"; git status --porcelain -- views; exit 1; fi

## build: bin/zkgate
build:
	$(GO) build -o bin/zkgate ./cmd/zkgate

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
