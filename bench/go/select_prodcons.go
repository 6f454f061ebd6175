// The select_prodcons workload in Go (BenchmarkSelectProdCons shape, with
// two idle channels in place of the timer and the close channel).
// Usage: select_prodcons [items]   (default 1,000,000)
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
	items := int64(1000000)
	if len(os.Args) > 1 {
		items, _ = strconv.ParseInt(os.Args[1], 10, 64)
	}
	procs := runtime.GOMAXPROCS(0)
	chunks := items / chunk
	c := make(chan int64, 2*procs)
	myc := make(chan int, 128)
	idle1 := make(chan bool)
	idle2 := make(chan bool)
	start := time.Now()
	for p := 0; p < procs; p++ {
		go func() {
			foo := 1
			for atomic.AddInt64(&chunks, -1) >= 0 {
				for g := 0; g < chunk; g++ {
					for i := 0; i < 100; i++ {
						foo *= 2
						foo /= 2
					}
					select {
					case myc <- 1:
					case <-idle1:
						panic("idle fired")
					case <-idle2:
						panic("idle fired")
					}
				}
			}
			myc <- 0
			if foo != 1 {
				panic("work")
			}
			c <- 0
		}()
		go func() {
			foo := 1
			got := int64(0)
		loop:
			for {
				select {
				case v := <-myc:
					if v == 0 {
						break loop
					}
				case <-idle1:
					panic("idle fired")
				case <-idle2:
					panic("idle fired")
				}
				got++
				for i := 0; i < 100; i++ {
					foo *= 2
					foo /= 2
				}
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
	fmt.Printf("select_prodcons procs=%d: %.1f ns/item\n", procs, float64(el.Nanoseconds())/float64(items))
}
