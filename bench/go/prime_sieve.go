package main

import (
	"fmt"
	"runtime"
	"time"
)

func generate(ch chan<- int) {
	for i := 2; ; i++ {
		ch <- i
	}
}

func filter(in <-chan int, out chan<- int, prime int) {
	for {
		i := <-in
		if i%prime != 0 {
			out <- i
		}
	}
}

func main() {
	start := time.Now()
	ch := make(chan int)
	go generate(ch)
	last := 0
	for i := 0; i < 10000; i++ {
		last = <-ch
		ch1 := make(chan int)
		go filter(ch, ch1, last)
		ch = ch1
	}
	fmt.Printf("prime_sieve procs=%d: %d ms (last %d)\n", runtime.GOMAXPROCS(0), time.Since(start).Milliseconds(), last)
}
