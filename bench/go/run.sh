#!/usr/bin/env bash
# Side-by-side run of the workloads that exist so far: this runtime and Go,
# same machine, interleaved, GOMAXPROCS 1 and 2; prints every figure, then a
# table of medians (min-max) and the ratio ours/Go. Needs Go (golang-go).
# Usage: bash bench/go/run.sh [runs]   (from the repository root)
set -euo pipefail
runs=${1:-3}
export HOME=${HOME:-/root} GOCACHE=${GOCACHE:-/tmp/gocache} GOPATH=${GOPATH:-/tmp/gopath}
command -v go >/dev/null || { echo "go not found: apt-get install -y golang-go" >&2; exit 1; }
out=target/go-peers
mkdir -p "$out"
progs="spawn yield skynet pingpong thread_ring prime_sieve prodcons"
for p in $progs; do go build -o "$out/$p" "bench/go/$p.go"; done
cargo build --release $(for p in $progs; do printf -- '--example %s ' "$p"; done)
ex=target/release/examples
log=$out/run.log
: >"$log"
for procs in 1 2; do
  export GOMAXPROCS=$procs
  for k in $(seq "$runs"); do
    echo "run $k/$runs, GOMAXPROCS=$procs" >&2
    { $ex/spawn 3 | sed 's/^/ours /'
      "$out/spawn" 3 | sed 's/^/go /'
      $ex/yield 1000 3 | sed 's/ goroutines=1000//; s/^/ours /'
      "$out/yield" 1000 3 | sed 's/ goroutines=1000//; s/^/go /'
      $ex/skynet 3 | sed -n "s/^round [0-9]*: Result: 499999500000 in \([0-9]*\) ms/ours skynet procs=$procs: \1 ms/p"
      "$out/skynet" | sed 's/^/go /'
      $ex/pingpong | sed -n "s/^\([0-9.]*\) ns per round trip.*/ours pingpong procs=$procs: \1 ns/p"
      "$out/pingpong" | sed 's/^/go /'
      $ex/thread_ring | sed -n "s/^\([0-9.]*\) ns per hop.*/ours thread_ring procs=$procs: \1 ns/p"
      "$out/thread_ring" | sed 's/^/go /'
      $ex/prime_sieve | sed -n "s/.* in \([0-9]*\) ms$/ours prime_sieve procs=$procs: \1 ms/p"
      "$out/prime_sieve" | sed 's/^/go /'
      $ex/prodcons | sed 's/^/ours /'
      "$out/prodcons" | sed 's/^/go /'
    } | tee -a "$log"
  done
done
echo
stats() { # prints "median min max" of the numbers on stdin
  sort -n | awk '{ a[NR] = $1 } END { if (!NR) { print "- - -"; exit }
    m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; print m, a[1], a[NR] }'
}
printf '%-12s %5s | %-26s | %-26s | %s\n' workload procs "ours median (min-max)" "go median (min-max)" "ours/go"
grep ' procs=' "$log" | awk '{ print $2, $3 }' | sort -u | while read -r w p; do
  read -r om olo ohi < <(awk -v w="$w" -v p="$p" '$1 == "ours" && $2 == w && $3 == p { print $4 }' "$log" | stats)
  read -r gm glo ghi < <(awk -v w="$w" -v p="$p" '$1 == "go" && $2 == w && $3 == p { print $4 }' "$log" | stats)
  ratio=$(awk -v o="$om" -v g="$gm" 'BEGIN { if (g > 0) printf "%.2f", o / g; else print "-" }')
  printf '%-12s %5s | %8s (%s-%s) | %8s (%s-%s) | %s\n' "$w" "$(p=${p#procs=}; echo ${p%:})" "$om" "$olo" "$ohi" "$gm" "$glo" "$ghi" "$ratio"
done
