// Skynet in Go (atemerev/skynet): 10-ary tree, 1,000,000 leaves, channels.
// Usage: skynet [rounds] [leaves]
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

func skynet(c chan int, num int, size int, div int) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int)
	var sum int
	for i := 0; i < div; i++ {
		subNum := num + i*(size/div)
		go skynet(rc, subNum, size/div, div)
	}
	for i := 0; i < div; i++ {
		sum += <-rc
	}
	c <- sum
}

func main() {
	rounds, leaves := 3, 1000000
	if len(os.Args) > 1 {
		rounds, _ = strconv.Atoi(os.Args[1])
	}
	if len(os.Args) > 2 {
		leaves, _ = strconv.Atoi(os.Args[2])
	}
	for r := 0; r < rounds; r++ {
		c := make(chan int)
		start := time.Now()
		go skynet(c, 0, leaves, 10)
		result := <-c
		took := time.Since(start)
		if result != leaves*(leaves-1)/2 {
			panic("wrong")
		}
		fmt.Printf("skynet procs=%d: %.2f ms\n", runtime.GOMAXPROCS(0), float64(took.Microseconds())/1000)
	}
}
