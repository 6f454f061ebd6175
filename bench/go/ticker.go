// The latency_* workloads in Go (bench/src/workloads/ticker.rs): a
// goroutine reads a time.NewTicker(time.Millisecond) and notes the time of
// every receive; after 20 ms alone, a load runs to completion beside it;
// then the ticker stops (at its next receive, so its last gap ends after
// the load). Prints the worst gap between consecutive receives (the later
// after the load began; ms), then the gaps' nearest-rank p99 (ms) and the
// receives during the load per second of load, on lines of their own (the
// first line's comment also says where in the load the worst gap ended).
// Loads (panic on a wrong count):
//
//	latency_yield N PIECES     N goroutines, PIECES pieces of 30 us CPU
//	                           work each (a spin on time.Since),
//	                           runtime.Gosched() after each
//	latency_spin N PIECES      the same without the Gosched calls
//	latency_blocking N K       N goroutines each K x syscall.Nanosleep(100
//	                           ms): a real blocking system call, which Go
//	                           hands off (entersyscall; sysmon retakes the P)
//	latency_hog MS             one goroutine spinning on time.Since for MS
//	                           ms (preempted asynchronously, or at the
//	                           prologue of time.Since, after 10 ms)
//	latency_mpsc PAIRS MSGS    PAIRS producers then PAIRS consumers over
//	                           Go's own unbuffered channels (Go has no
//	                           foreign blocking channel), MSGS a pair
//	latency_echo CONNS TRIPS   TCP echo on 127.0.0.1 in this process: CONNS
//	                           client goroutines, TRIPS round trips of 64 B
//	                           each, one echo goroutine per connection
//
// Usage: ticker <load> <sizes...>
package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	period = time.Millisecond
	warm   = 20 * time.Millisecond
	piece  = 30 * time.Microsecond
	nap    = 100 * time.Millisecond
	msg    = 64
)

func arg(i int) int {
	if len(os.Args) <= i {
		panic(fmt.Sprintf("usage: ticker <load> <sizes...>: argument %d missing", i))
	}
	v, err := strconv.Atoi(os.Args[i])
	if err != nil {
		panic(err)
	}
	return v
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

// spin reads the clock until d has passed; returns the reads.
func spin(d time.Duration) int64 {
	t := time.Now()
	n := int64(1)
	for time.Since(t) < d {
		n++
	}
	return n
}

func pieces(n, k int, yield bool) string {
	var total int64
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			for j := 0; j < k; j++ {
				spin(piece)
				atomic.AddInt64(&total, 1)
				if yield {
					runtime.Gosched()
				}
			}
			wg.Done()
		}()
	}
	wg.Wait()
	if total != int64(n*k) {
		panic("latency: wrong count of pieces")
	}
	return fmt.Sprintf("%d pieces of 30 us", total)
}

// nanosleep sleeps d in the nanosleep system call, resuming after EINTR.
func nanosleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var rem syscall.Timespec
		err := syscall.Nanosleep(&ts, &rem)
		if err == nil {
			return
		}
		if err != syscall.EINTR {
			panic(err)
		}
		ts = rem
	}
}

func blocking(n, k int) string {
	var total int64
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			t := time.Now()
			for j := 0; j < k; j++ {
				nanosleep(nap)
				atomic.AddInt64(&total, 1)
			}
			if time.Since(t) < time.Duration(k)*nap {
				panic("latency_blocking: short sleep")
			}
			wg.Done()
		}()
	}
	wg.Wait()
	if total != int64(n*k) {
		panic("latency_blocking: wrong count of sleeps")
	}
	return fmt.Sprintf("%d sleeps of 100 ms", total)
}

func hog(ms int) string {
	d := time.Duration(ms) * time.Millisecond
	type res struct {
		reads int64
		took  time.Duration
	}
	done := make(chan res)
	go func() {
		t := time.Now()
		n := spin(d)
		done <- res{n, time.Since(t)}
	}()
	r := <-done
	if r.reads <= 1 || r.took < d {
		panic("latency_hog: the hog stopped early")
	}
	return fmt.Sprintf("hog ran %d ms (%d clock reads)", r.took.Milliseconds(), r.reads)
}

func mpsc(pairs, msgs int) string {
	chans := make([]chan int64, pairs)
	for i := range chans {
		chans[i] = make(chan int64)
	}
	var wg sync.WaitGroup
	wg.Add(2 * pairs)
	for _, c := range chans {
		go func(c chan int64) {
			for v := 0; v < msgs; v++ {
				c <- int64(v)
			}
			close(c)
			wg.Done()
		}(c)
	}
	var count, sum int64
	for _, c := range chans {
		go func(c chan int64) {
			var n, s int64
			for v := range c {
				n++
				s += v
			}
			atomic.AddInt64(&count, n)
			atomic.AddInt64(&sum, s)
			wg.Done()
		}(c)
	}
	wg.Wait()
	if count != int64(pairs*msgs) {
		panic("latency_mpsc: wrong count of messages")
	}
	if sum != int64(pairs)*int64(msgs*(msgs-1)/2) {
		panic("latency_mpsc: wrong sum of messages")
	}
	return fmt.Sprintf("%d messages, sum %d", count, sum)
}

func message(conn, i int, buf []byte) {
	for j := range buf {
		buf[j] = byte(uint64(conn)*31 ^ uint64(i)*7 ^ uint64(j))
	}
}

func echo(conns, trips int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	var echoed int64
	var served sync.WaitGroup
	served.Add(conns)
	go func() {
		for i := 0; i < conns; i++ {
			c, err := ln.Accept()
			if err != nil {
				panic(err)
			}
			go func(c net.Conn) {
				defer c.Close()
				buf := make([]byte, 4096)
				var n64 int64
				for {
					n, err := c.Read(buf)
					if err != nil {
						break
					}
					if _, err := c.Write(buf[:n]); err != nil {
						break
					}
					n64 += int64(n)
				}
				atomic.AddInt64(&echoed, n64)
				served.Done()
			}(c)
		}
		ln.Close()
	}()
	var total int64
	var wg sync.WaitGroup
	wg.Add(conns)
	addr := ln.Addr().String()
	for k := 0; k < conns; k++ {
		go func(k int) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				panic(err)
			}
			out, back := make([]byte, msg), make([]byte, msg)
			for i := 0; i < trips; i++ {
				message(k, i, out)
				if _, err := c.Write(out); err != nil {
					panic(err)
				}
				if _, err := io.ReadFull(c, back); err != nil {
					panic(err)
				}
				if !bytes.Equal(out, back) {
					panic("latency_echo: wrong echo")
				}
			}
			c.Close()
			atomic.AddInt64(&total, int64(trips))
			wg.Done()
		}(k)
	}
	wg.Wait()
	served.Wait()
	if total != int64(conns*trips) {
		panic("latency_echo: wrong count of round trips")
	}
	if echoed != total*msg {
		panic("latency_echo: wrong count of bytes echoed")
	}
	return fmt.Sprintf("%d round trips of %d B over %d connections", total, msg, conns)
}

func main() {
	if len(os.Args) < 2 {
		panic("usage: ticker <load> <sizes...>")
	}
	name := os.Args[1]
	var load func() string
	switch name {
	case "latency_yield":
		n, k := arg(2), arg(3)
		load = func() string { return pieces(n, k, true) }
	case "latency_spin":
		n, k := arg(2), arg(3)
		load = func() string { return pieces(n, k, false) }
	case "latency_blocking":
		n, k := arg(2), arg(3)
		load = func() string { return blocking(n, k) }
	case "latency_hog":
		ms := arg(2)
		load = func() string { return hog(ms) }
	case "latency_mpsc":
		p, m := arg(2), arg(3)
		load = func() string { return mpsc(p, m) }
	case "latency_echo":
		c, t := arg(2), arg(3)
		load = func() string { return echo(c, t) }
	default:
		panic("unknown load " + name)
	}

	var stop int32
	got := make(chan []time.Time)
	go func() {
		tk := time.NewTicker(period)
		ticks := make([]time.Time, 0, 1<<14)
		for range tk.C {
			ticks = append(ticks, time.Now())
			if atomic.LoadInt32(&stop) != 0 {
				break
			}
		}
		tk.Stop()
		got <- ticks
	}()
	time.Sleep(warm)
	start := time.Now()
	answer := load()
	end := time.Now()
	atomic.StoreInt32(&stop, 1)
	ticks := <-got

	var gaps []int64
	var worst, worstEnd time.Duration
	during := 0
	for i, t := range ticks {
		if i > 0 && t.After(start) {
			g := t.Sub(ticks[i-1])
			gaps = append(gaps, int64(g))
			if g > worst {
				worst, worstEnd = g, t.Sub(start)
			}
		}
		if !t.Before(start) && !t.After(end) {
			during++
		}
	}
	if len(gaps) == 0 {
		panic(name + ": the ticker never ticked after the load began")
	}
	sort.Slice(gaps, func(a, b int) bool { return gaps[a] < gaps[b] })
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	took := end.Sub(start).Seconds()
	procs := runtime.GOMAXPROCS(0)
	fmt.Printf("%s procs=%d: %.3f ms worst gap (%s; %d ticks in %.3f s of load; the worst gap ended %.1f ms into it)\n",
		name, procs, ms(gaps[len(gaps)-1]), answer, during, took, ms(int64(worstEnd)))
	fmt.Printf("%s procs=%d p99: %.3f ms\n", name, procs, ms(percentile(gaps, 99)))
	fmt.Printf("%s procs=%d ticks_per_s: %.1f ticks/s\n", name, procs, float64(during)/took)
}
