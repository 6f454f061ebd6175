// The fanout workload in Go: 1 producer -> chan(1024) -> W workers selecting
// on data and quit -> chan(1024) -> 1 collector; ns per item.
// Usage: fanout [items] [workers]   (default 1,000,000 and 64)
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

func main() {
	n, w := 1000000, 64
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	if len(os.Args) > 2 {
		w, _ = strconv.Atoi(os.Args[2])
	}
	data := make(chan int, 1024)
	out := make(chan int, 1024)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(w)
	start := time.Now()
	for i := 0; i < w; i++ {
		go func() {
			defer wg.Done()
			for {
				select {
				case v, ok := <-data:
					if !ok {
						return
					}
					out <- v * 2
				case <-quit:
					return
				}
			}
		}()
	}
	go func() {
		for i := 0; i < n; i++ {
			data <- i
		}
		close(data)
	}()
	sum := 0
	for i := 0; i < n; i++ {
		sum += <-out
	}
	took := time.Since(start)
	close(quit)
	wg.Wait()
	if sum != n*(n-1) {
		panic("wrong sum")
	}
	fmt.Printf("fanout procs=%d: %.1f ns/item\n", runtime.GOMAXPROCS(0), float64(took.Nanoseconds())/float64(n))
}
