// unixprobe: a Go program that uses AF_UNIX sockets only through the
// standard net package (raw system calls, no C library), for
// integration/run_seccomp.sh.
//
//	unixprobe dial PATH MSG     connects, sends MSG and a newline, prints the reply line and its pid
//	unixprobe serve PATH N      listens, answers N connections: "go got " + the line
//	unixprobe http PATH N       serves N HTTP requests (net/http): "hello from Go: " + the path
//	unixprobe dgram PATH MSG    sends one datagram from an abstract name and prints the answer
package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

func die(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "unixprobe: "+f+"\n", a...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 4 {
		die("usage: unixprobe dial|serve|dgram PATH ARG")
	}
	path := os.Args[2]
	switch os.Args[1] {
	case "dial":
		c, err := net.Dial("unix", path)
		if err != nil {
			die("%v", err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := fmt.Fprintf(c, "%s\n", os.Args[3]); err != nil {
			die("write: %v", err)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			die("read: %v", err)
		}
		fmt.Printf("reply: %s", line)
		fmt.Printf("remote: %s\n", c.RemoteAddr())
		fmt.Printf("pid: %d\n", os.Getpid())
		c.Close()
	case "serve":
		n, _ := strconv.Atoi(os.Args[3])
		l, err := net.Listen("unix", path)
		if err != nil {
			die("%v", err)
		}
		fmt.Printf("listening on %s pid %d\n", l.Addr(), os.Getpid())
		for i := 0; i < n; i++ {
			c, err := l.Accept()
			if err != nil {
				die("accept: %v", err)
			}
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				die("read: %v", err)
			}
			fmt.Fprintf(c, "go got %s", line)
			c.Close()
		}
		l.Close()
		fmt.Printf("served %d\n", n)
	case "http":
		n, _ := strconv.Atoi(os.Args[3])
		l, err := net.Listen("unix", path)
		if err != nil {
			die("%v", err)
		}
		done := make(chan bool)
		var count int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello from Go: %s\n", r.URL.Path)
			if int(atomic.AddInt32(&count, 1)) == n {
				close(done)
			}
		})
		fmt.Printf("listening on %s\n", l.Addr())
		go http.Serve(l, h)
		<-done
		time.Sleep(100 * time.Millisecond)
		l.Close()
		fmt.Printf("served %d\n", n)
	case "dgram":
		local := &net.UnixAddr{Name: fmt.Sprintf("@unixprobe-%d", os.Getpid()), Net: "unixgram"}
		c, err := net.DialUnix("unixgram", local, &net.UnixAddr{Name: path, Net: "unixgram"})
		if err != nil {
			die("%v", err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write([]byte(os.Args[3])); err != nil {
			die("write: %v", err)
		}
		buf := make([]byte, 256)
		n, err := c.Read(buf)
		if err != nil {
			die("read: %v", err)
		}
		fmt.Printf("reply: %s\n", buf[:n])
		fmt.Printf("local: %s\n", c.LocalAddr())
	default:
		die("unknown mode %s", os.Args[1])
	}
}
