package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

func main() {
	n := 2000000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	ping := make(chan int)
	pong := make(chan int)
	go func() {
		for v := range ping {
			pong <- v
		}
	}()
	for i := 0; i < 10000; i++ {
		ping <- i
		<-pong
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		ping <- i
		if <-pong != i {
			panic("wrong")
		}
	}
	took := time.Since(start)
	fmt.Printf("pingpong procs=%d: %.1f ns per round trip\n", runtime.GOMAXPROCS(0), float64(took.Nanoseconds())/float64(n))
}
