// The fib workload in Go: fib(N) (default 30) as a spawn tree with a
// cutoff (default 15): fib(n) for n >= cutoff starts a goroutine for
// fib(n-1) (its result comes back on a channel of capacity 1), computes
// fib(n-2) itself and adds the two; below the cutoff it recurses serially.
// The answer is checked against an iterative fib.
// Usage: fib [N] [cutoff]
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

var cutoff = 15

func serial(n int) int {
	if n < 2 {
		return n
	}
	return serial(n-1) + serial(n-2)
}

func fib(n int) int {
	if n < cutoff {
		return serial(n)
	}
	c := make(chan int, 1)
	go func() { c <- fib(n - 1) }()
	b := fib(n - 2)
	return <-c + b
}

func main() {
	n := 30
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	if len(os.Args) > 2 {
		cutoff, _ = strconv.Atoi(os.Args[2])
	}
	want, next := 0, 1
	for i := 0; i < n; i++ {
		want, next = next, want+next
	}
	start := time.Now()
	got := fib(n)
	took := time.Since(start)
	if got != want {
		panic(fmt.Sprintf("fib: fib(%d) = %d, want %d", n, got, want))
	}
	fmt.Printf("fib procs=%d: %.3f ms (fib(%d) = %d)\n", runtime.GOMAXPROCS(0), float64(took.Nanoseconds())/1e6, n, got)
}
