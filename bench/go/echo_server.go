// The Go server of the bench tool's echo workloads (bench/src/workloads/
// echo.rs): TCP echo on 127.0.0.1, one goroutine per connection, each
// reading into a 4 KiB buffer and writing back what it read until end of
// file (Go's TCP connections have TCP_NODELAY by default). Prints
// "PORT\t<port>" and serves until its stdin closes. The load generator is
// the bench tool's own client, in another process.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

func echo(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
	}
}

func main() {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < rl.Max {
		rl.Cur = rl.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	fmt.Printf("PORT\t%d\n", ln.Addr().(*net.TCPAddr).Port)
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "echo: accept:", err)
			time.Sleep(5 * time.Millisecond)
			continue
		}
		go echo(c)
	}
}
