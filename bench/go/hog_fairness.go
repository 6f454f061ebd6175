// The hog_fairness workload in Go. Part 1 is runtime/proc_test.go's
// BenchmarkPingPongHog at the GOMAXPROCS it is given: a hog spinning on a
// non-blocking select beside a ping-pong pair on unbuffered channels, N
// round trips (default 1,000,000); ns per round trip (the value passed is
// counted up at each hop and the last checked). Part 2: GOMAXPROCS hogs in
// plain tight loops (preempted asynchronously) beside a probe sleeping 1 ms
// in a loop for MS milliseconds (default 5000); prints the probe's p99 and
// max lateness (nearest rank; ms) on lines of their own.
// Usage: hog_fairness [N] [MS]
package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync/atomic"
	"time"
)

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
	n, probeMs := arg(1, 1000000), arg(2, 5000)
	procs := runtime.GOMAXPROCS(0)

	// Part 1: BenchmarkPingPongHog.
	stop, done := make(chan bool), make(chan int)
	go func() {
		spins := 0
		for {
			select {
			case <-stop:
				done <- spins
				return
			default:
				spins++
			}
		}
	}()
	ping, pong := make(chan int), make(chan int)
	go func() {
		for j := 0; j < n; j++ {
			pong <- <-ping + 1
		}
		close(stop)
		done <- 0
	}()
	go func() {
		for i := 0; i < n; i++ {
			ping <- <-pong + 1
		}
		done <- 0
	}()
	start := time.Now()
	ping <- 0 // Start ping-pong
	<-stop
	took := time.Since(start)
	last := <-ping // Let last ponger exit
	spins := <-done + <-done + <-done
	if last != 2*n {
		panic("hog_fairness: wrong ping-pong value")
	}

	// Part 2: GOMAXPROCS hogs and a probe.
	var halt, started int32
	counts := make(chan int64)
	for i := 0; i < procs; i++ {
		go func() {
			atomic.AddInt32(&started, 1)
			var k int64
			for atomic.LoadInt32(&halt) == 0 {
				k++
			}
			counts <- k
		}()
	}
	for atomic.LoadInt32(&started) < int32(procs) {
		time.Sleep(time.Millisecond)
	}
	var late []int64
	dur := time.Duration(probeMs) * time.Millisecond
	for begin := time.Now(); time.Since(begin) < dur; {
		t := time.Now()
		time.Sleep(time.Millisecond)
		late = append(late, int64(time.Since(t)-time.Millisecond))
	}
	atomic.StoreInt32(&halt, 1)
	for i := 0; i < procs; i++ {
		if <-counts == 0 {
			panic("hog_fairness: a hog never ran")
		}
	}
	sort.Slice(late, func(a, b int) bool { return late[a] < late[b] })
	if late[0] < 0 {
		panic(fmt.Sprintf("hog_fairness probe: woke %d ns early", -late[0]))
	}
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	fmt.Printf("hog_fairness procs=%d: %.1f ns/round trip (%d round trips, hog spun %d; probe slept %d times, p50 %.3f ms late)\n",
		procs, float64(took.Nanoseconds())/float64(n), n, spins, len(late), ms(percentile(late, 50)))
	fmt.Printf("hog_fairness procs=%d probe_p99: %.3f ms\n", procs, ms(percentile(late, 99)))
	fmt.Printf("hog_fairness procs=%d probe_max: %.3f ms\n", procs, ms(late[len(late)-1]))
}
