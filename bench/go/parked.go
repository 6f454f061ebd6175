// The parked workload in Go: N goroutines (default 100,000) block on a
// receive from one channel; prints the growth of resident memory plus page
// tables per goroutine (VmRSS + VmPTE from /proc/self/status), then closes the channel and waits for
// all of them; also prints spawn+park (ns per goroutine) and the time to
// wake all (ms) on lines of their own.
// Usage: parked [N]
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		panic(err)
	}
	var kb int64
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") || strings.HasPrefix(l, "VmPTE:") {
			f := strings.Fields(l)
			v, _ := strconv.ParseInt(f[1], 10, 64)
			kb += v
		}
	}
	return kb * 1024
}

func main() {
	n := 100000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	ch := make(chan struct{})
	var parked int64
	var wg sync.WaitGroup
	wg.Add(n)
	before := rss()
	start := time.Now()
	for i := 0; i < n; i++ {
		go func() {
			atomic.AddInt64(&parked, 1)
			if _, ok := <-ch; ok {
				panic("got a value")
			}
			wg.Done()
		}()
	}
	for atomic.LoadInt64(&parked) < int64(n) {
		runtime.Gosched()
	}
	park := time.Since(start)
	grew := rss() - before
	start = time.Now()
	close(ch)
	wg.Wait()
	wake := time.Since(start)
	procs := runtime.GOMAXPROCS(0)
	fmt.Printf("parked procs=%d: %.0f B/parked (%d goroutines; wake %.0f ns per goroutine)\n", procs,
		float64(grew)/float64(n), n, float64(wake.Nanoseconds())/float64(n))
	fmt.Printf("parked procs=%d spawn_park: %.0f ns/goroutine\n", procs, float64(park.Nanoseconds())/float64(n))
	fmt.Printf("parked procs=%d wake_all: %.3f ms\n", procs, float64(wake.Nanoseconds())/1e6)
}
