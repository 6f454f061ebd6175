// The timers workload in Go: N goroutines (default 100,000), goroutine i
// sleeping BASE + (i mod SPREAD) ms (defaults 1000 and 1000) through
// time.Sleep; each measures its oversleep (time slept less time asked).
// Prints the p99 oversleep (nearest rank), then p50 and max on lines of
// their own, all in ms. Panics if a sleeper never woke or woke early.
// Usage: timers [N] [BASE_MS] [SPREAD_MS]
package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"
)

const never = math.MinInt64

func arg(i, def int) int {
	if len(os.Args) > i {
		v, err := strconv.Atoi(os.Args[i])
		if err != nil {
			panic(err)
		}
		return v
	}
	return def
}

func percentile(sorted []int64, p float64) int64 {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

func main() {
	n, base, spread := arg(1, 100000), arg(2, 1000), arg(3, 1000)
	late := make([]int64, n)
	for i := range late {
		late[i] = never
	}
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			d := time.Duration(base+i%spread) * time.Millisecond
			t := time.Now()
			time.Sleep(d)
			late[i] = int64(time.Since(t) - d)
			wg.Done()
		}(i)
	}
	wg.Wait()
	sort.Slice(late, func(a, b int) bool { return late[a] < late[b] })
	if late[0] == never {
		panic("timers: a sleeper never woke")
	}
	if late[0] < 0 {
		panic(fmt.Sprintf("timers: woke %d ns early", -late[0]))
	}
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	procs := runtime.GOMAXPROCS(0)
	fmt.Printf("timers procs=%d: %.3f ms oversleep p99 (%d sleepers woke, none early)\n", procs, ms(percentile(late, 99)), n)
	fmt.Printf("timers procs=%d p50: %.3f ms\n", procs, ms(percentile(late, 50)))
	fmt.Printf("timers procs=%d max: %.3f ms\n", procs, ms(late[n-1]))
}
