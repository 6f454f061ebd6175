// The pingpong_cross workload in Go: two goroutines bounce a value over two
// channels of capacity 1, each side only busy-polling them with
// non-blocking operations (select with default), never blocking and never
// yielding, so each holds its own P and every round trip crosses between
// two Ps. Needs GOMAXPROCS >= 2. A side panics after 10 s without progress.
// Usage: pingpong_cross [trips] [warm-up trips]
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

const stall = 10 * time.Second

// send polls a non-blocking send until it succeeds.
func send(c chan int, v int) {
	var since time.Time
	for tries := 1; ; tries++ {
		select {
		case c <- v:
			return
		default:
		}
		if tries%4096 == 0 {
			if since.IsZero() {
				since = time.Now()
			} else if time.Since(since) > stall {
				panic("pingpong_cross: no progress for 10 s (the two sides share a P?)")
			}
		}
	}
}

// recv polls a non-blocking receive until it gets a value.
func recv(c chan int) int {
	var since time.Time
	for tries := 1; ; tries++ {
		select {
		case v := <-c:
			return v
		default:
		}
		if tries%4096 == 0 {
			if since.IsZero() {
				since = time.Now()
			} else if time.Since(since) > stall {
				panic("pingpong_cross: no progress for 10 s (the two sides share a P?)")
			}
		}
	}
}

func main() {
	n, warm := 2000000, 10000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	if len(os.Args) > 2 {
		warm, _ = strconv.Atoi(os.Args[2])
	}
	if runtime.GOMAXPROCS(0) < 2 {
		panic("pingpong_cross needs GOMAXPROCS >= 2")
	}
	ping := make(chan int, 1)
	pong := make(chan int, 1)
	echoed := make(chan int)
	took := make(chan time.Duration)
	go func() {
		for i := 0; i < warm+n; i++ {
			send(pong, recv(ping))
		}
		echoed <- warm + n
	}()
	go func() {
		trip := func(i int) {
			send(ping, i)
			if recv(pong) != i {
				panic("pingpong_cross: wrong value")
			}
		}
		for i := 0; i < warm; i++ {
			trip(i)
		}
		start := time.Now()
		for i := 0; i < n; i++ {
			trip(i)
		}
		took <- time.Since(start)
	}()
	t := <-took
	if <-echoed != warm+n {
		panic("pingpong_cross: echo side lost trips")
	}
	fmt.Printf("pingpong_cross procs=%d: %.1f ns per round trip\n", runtime.GOMAXPROCS(0), float64(t.Nanoseconds())/float64(n))
}
