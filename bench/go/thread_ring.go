package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

const ring = 503

func member(id int, in <-chan int, out chan<- int, done chan<- int) {
	for {
		n := <-in
		if n == 0 {
			done <- id
			return
		}
		out <- n - 1
	}
}

func main() {
	n := 5000000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	done := make(chan int)
	first := make(chan int)
	in := first
	for id := 1; id < ring; id++ {
		out := make(chan int)
		go member(id, in, out, done)
		in = out
	}
	go member(ring, in, first, done)
	start := time.Now()
	first <- n
	w := <-done
	took := time.Since(start)
	if w != n%ring+1 {
		panic("wrong last holder")
	}
	fmt.Println(w)
	fmt.Printf("thread_ring procs=%d: %.1f ns per hop\n", runtime.GOMAXPROCS(0), float64(took.Nanoseconds())/float64(n))
}
