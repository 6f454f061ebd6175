#!/usr/bin/env bash
# Side-by-side run of the runtime-core workloads: this runtime and Go, same
# machine, interleaved, GOMAXPROCS 1 and 2. Needs Go (Debian: golang-go).
# Usage: bash bench/go/run.sh [runs]   (from the repository root)
set -euo pipefail
runs=${1:-3}
export HOME=${HOME:-/root} GOCACHE=${GOCACHE:-/tmp/gocache} GOPATH=${GOPATH:-/tmp/gopath}
command -v go >/dev/null || { echo "go not found: apt-get install -y golang-go" >&2; exit 1; }
out=target/go-peers
mkdir -p "$out"
for p in spawn yield skynet; do go build -o "$out/$p" "bench/go/$p.go"; done
cargo build --release --example spawn --example yield --example skynet
for procs in 1 2; do
  for _ in $(seq "$runs"); do
    GOMAXPROCS=$procs target/release/examples/spawn 3 | sed 's/^/ours /'
    GOMAXPROCS=$procs "$out/spawn" 3 | sed 's/^/go /'
    GOMAXPROCS=$procs target/release/examples/yield 1000 3 | sed 's/^/ours /'
    GOMAXPROCS=$procs "$out/yield" 1000 3 | sed 's/^/go /'
    GOMAXPROCS=$procs target/release/examples/skynet 3 | grep round | sed "s/^round [0-9]*: Result: [0-9]* in \([0-9]*\) ms/ours skynet procs=$procs: \1 ms/"
    GOMAXPROCS=$procs "$out/skynet" | sed 's/^/go /'
  done
done
