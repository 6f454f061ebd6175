// The steal_skew workload in Go: one goroutine spawns N tasks (default
// 100,000); a fixed xorshift sequence makes 10% spin 1 ms, the rest 1 us.
// Prints makespan / (total spin / GOMAXPROCS).
// Usage: steal_skew [N]
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

func spin(us int) {
	t := time.Now()
	d := time.Duration(us) * time.Microsecond
	for time.Since(t) < d {
	}
}

func main() {
	n := 100000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	plan := make([]int, n)
	x := uint64(0x9E3779B97F4A7C15)
	work := 0
	for i := range plan {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if x%10 == 0 {
			plan[i] = 1000
		} else {
			plan[i] = 1
		}
		work += plan[i]
	}
	var wg sync.WaitGroup
	wg.Add(n)
	start := time.Now()
	go func() {
		for _, us := range plan {
			us := us
			go func() {
				spin(us)
				wg.Done()
			}()
		}
	}()
	wg.Wait()
	took := time.Since(start)
	procs := runtime.GOMAXPROCS(0)
	ideal := float64(work) / float64(procs)
	fmt.Printf("steal_skew procs=%d: %.3f x ideal (%d tasks, %d us of spin)\n", procs, float64(took.Microseconds())/ideal, n, work)
}
