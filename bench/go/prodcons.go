// The prodcons workload in Go (BenchmarkChanProdCons0/10/100 shape):
// GOMAXPROCS producers and consumers on one channel; ns per item.
// Usage: prodcons [items] [capacity]   (no capacity: 0, 10 and 100)
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
)

const chunk = 1000

func main() {
	items := int64(4000000)
	if len(os.Args) > 1 {
		items, _ = strconv.ParseInt(os.Args[1], 10, 64)
	}
	procs := runtime.GOMAXPROCS(0)
	caps := []int{0, 10, 100}
	if len(os.Args) > 2 {
		c, _ := strconv.Atoi(os.Args[2])
		caps = []int{c}
	}
	for _, capacity := range caps {
		chunks := items / chunk
		c := make(chan int64, 2*procs)
		myc := make(chan int, capacity)
		start := time.Now()
		for p := 0; p < procs; p++ {
			go func() {
				for atomic.AddInt64(&chunks, -1) >= 0 {
					for g := 0; g < chunk; g++ {
						myc <- 1
					}
				}
				myc <- 0
				c <- 0
			}()
			go func() {
				got := int64(0)
				for <-myc != 0 {
					got++
				}
				c <- got
			}()
		}
		total := int64(0)
		for p := 0; p < 2*procs; p++ {
			total += <-c
		}
		if total != items {
			panic("items lost")
		}
		el := time.Since(start)
		fmt.Printf("prodcons%d procs=%d: %.1f ns/item\n", capacity, procs, float64(el.Nanoseconds())/float64(items))
	}
}
