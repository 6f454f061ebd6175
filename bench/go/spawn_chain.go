// The spawn_chain workload in Go: each goroutine spawns the next, N deep.
// Usage: spawn_chain [N]   (default 1,000,000)
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

func link(i, n int, done chan<- int) {
	if i == n {
		done <- i
		return
	}
	go link(i+1, n, done)
}

func main() {
	n := 1000000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	done := make(chan int)
	start := time.Now()
	go link(1, n, done)
	if got := <-done; got != n {
		panic("the chain broke")
	}
	el := time.Since(start)
	fmt.Printf("spawn_chain procs=%d: %.1f ns/goroutine\n", runtime.GOMAXPROCS(0), float64(el.Nanoseconds())/float64(n))
}
