// The timers_churn workload in Go: 1,000 timers stay pending (1 h) while
// one goroutine does R rounds (default 333,334) of time.NewTimer, Reset and
// Stop on a fresh timer; ns per operation (3 per round). Panics if a Reset
// or Stop found its timer not pending, or a background timer fired.
// Usage: timers_churn [R]
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

const background = 1000

func far(i int) time.Duration {
	return time.Hour + time.Duration(i%1000)*time.Microsecond
}

func main() {
	n := 333334
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	bg := make([]*time.Timer, background)
	for i := range bg {
		bg[i] = time.NewTimer(far(i))
	}
	pending := 0
	start := time.Now()
	for i := 0; i < n; i++ {
		t := time.NewTimer(far(i))
		if t.Reset(far(i+1) + time.Hour) {
			pending++
		}
		if t.Stop() {
			pending++
		}
	}
	took := time.Since(start)
	if pending != 2*n {
		panic("timers_churn: a reset or stop found its timer not pending")
	}
	for _, t := range bg {
		select {
		case <-t.C:
			panic("timers_churn: a background timer fired")
		default:
		}
		if !t.Stop() {
			panic("timers_churn: a background timer fired")
		}
	}
	fmt.Printf("timers_churn procs=%d: %.1f ns/op (%d ops)\n", runtime.GOMAXPROCS(0), float64(took.Nanoseconds())/float64(3*n), 3*n)
}
