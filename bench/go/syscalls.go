// The syscalls workload in Go: 2 CPU-bound goroutines each run STEPS
// (default 204,800,000) steps of a 64-bit LCG, once alone and once beside
// 100 goroutines looping syscall.Nanosleep(1 ms) (a syscall.Syscall, so
// entersyscall/exitsyscall; time.Sleep is no system call), started first
// and warmed up (200 sleeps). Prints the slowdown (compute time beside the
// sleepers / alone), then the peak OS threads, sampled every 2 ms from
// /proc/self/status by a goroutine while the sleepers run, and once at the
// end. Panics on a compute result that differs from the LCG's closed form.
// Usage: syscalls [STEPS]
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	A        uint64 = 6364136223846793005
	C        uint64 = 1442695040888963407
	sleepers        = 100
	compute         = 2
)

func lcg(x uint64, n int) uint64 {
	for i := 0; i < n; i++ {
		x = x*A + C
	}
	return x
}

// jump: n LCG steps from x in O(log n).
func jump(x, n uint64) uint64 {
	am, cm := uint64(1), uint64(0)
	a, c := A, C
	for n > 0 {
		if n&1 == 1 {
			am, cm = am*a, cm*a+c
		}
		a, c = a*a, c*a+c
		n >>= 1
	}
	return am*x + cm
}

func phase(steps int) (time.Duration, []uint64) {
	res := make([]uint64, compute)
	var wg sync.WaitGroup
	wg.Add(compute)
	start := time.Now()
	for k := 0; k < compute; k++ {
		go func(k int) {
			res[k] = lcg(uint64(k+1), steps)
			wg.Done()
		}(k)
	}
	wg.Wait()
	return time.Since(start), res
}

func threads() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		panic(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Threads:") {
			n, err := strconv.Atoi(strings.TrimSpace(l[len("Threads:"):]))
			if err != nil {
				panic(err)
			}
			return n
		}
	}
	panic("no Threads: line")
}

func main() {
	steps := 204800000
	if len(os.Args) > 1 {
		steps, _ = strconv.Atoi(os.Args[1])
	}
	check := func(what string, res []uint64) {
		for k, r := range res {
			if r != jump(uint64(k+1), uint64(steps)) {
				panic("syscalls: wrong compute result (" + what + ")")
			}
		}
	}
	alone, res := phase(steps)
	check("alone", res)

	var stop, sampling int32
	var sleeps int64
	var peak int64
	sampled := make(chan struct{})
	go func() {
		for atomic.LoadInt32(&sampling) == 0 {
			if n := int64(threads()); n > peak {
				peak = n
			}
			time.Sleep(2 * time.Millisecond)
		}
		close(sampled)
	}()
	var wg sync.WaitGroup
	wg.Add(sleepers)
	for i := 0; i < sleepers; i++ {
		go func() {
			ts := syscall.Timespec{Nsec: 1000000}
			for {
				syscall.Nanosleep(&ts, nil)
				atomic.AddInt64(&sleeps, 1)
				if atomic.LoadInt32(&stop) != 0 {
					break
				}
			}
			wg.Done()
		}()
	}
	for atomic.LoadInt64(&sleeps) < 2*sleepers {
		time.Sleep(time.Millisecond)
	}
	beside, res := phase(steps)
	check("beside the sleepers", res)
	atomic.StoreInt32(&stop, 1)
	wg.Wait()
	atomic.StoreInt32(&sampling, 1)
	<-sampled
	if n := int64(threads()); n > peak {
		peak = n
	}
	total := atomic.LoadInt64(&sleeps)
	if total < sleepers {
		panic("syscalls: a sleeper never slept")
	}
	procs := runtime.GOMAXPROCS(0)
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	fmt.Printf("syscalls procs=%d: %.3f x no-syscall time (compute ok; %d sleeps; alone %.1f ms, beside %.1f ms)\n",
		procs, float64(beside)/float64(alone), total, ms(alone), ms(beside))
	fmt.Printf("syscalls procs=%d threads: %d threads\n", procs, peak)
}
