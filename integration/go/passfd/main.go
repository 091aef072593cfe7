// passfd: a Go program that passes descriptors over AF_UNIX with the net
// package's WriteMsgUnix and ReadMsgUnix (raw system calls, no C library),
// for integration/run_seccomp_passfd.sh.
//
//	passfd send PATH FILE   connects to PATH and sends "file" with FILE's descriptor,
//	                        then "pair" with one end of a new socketpair; prints what the
//	                        pair is, what the peer writes into its end, the reply line
//	passfd recv PATH        listens at PATH, accepts one connection and receives two
//	                        messages, each with one descriptor: prints the first file's
//	                        contents, what the second is, writes "written by the
//	                        receiver\n" into it (a socket) and answers "received 2"
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

func die(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "passfd: "+f+"\n", a...)
	os.Exit(1)
}

// sendWith sends text with fd as SCM_RIGHTS in one message.
func sendWith(c *net.UnixConn, text string, fd int) {
	n, oobn, err := c.WriteMsgUnix([]byte(text), syscall.UnixRights(fd), nil)
	if err != nil {
		die("WriteMsgUnix %s: %v", text, err)
	}
	if n != len(text) || oobn != len(syscall.UnixRights(fd)) {
		die("WriteMsgUnix %s: wrote %d bytes and %d of control", text, n, oobn)
	}
}

// receiveOne reads one message and the one descriptor it carries.
func receiveOne(c *net.UnixConn) (string, *os.File) {
	buf := make([]byte, 64)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		die("ReadMsgUnix: %v", err)
	}
	if flags&syscall.MSG_CTRUNC != 0 {
		die("ReadMsgUnix: MSG_CTRUNC")
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		die("control messages: %v (%d of them)", err, len(msgs))
	}
	fds, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		die("SCM_RIGHTS: %v (%d descriptors)", err, len(fds))
	}
	return string(buf[:n]), os.NewFile(uintptr(fds[0]), "passed")
}

// kindOf says what fd is: a udsfs socket is its `.udsfs/sock/N/data` file.
func kindOf(fd uintptr) string {
	target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		die("readlink: %v", err)
	}
	if strings.Contains(target, "/.udsfs/sock/") {
		return "udsfs socket"
	}
	if strings.HasPrefix(target, "socket:") {
		return "kernel socket"
	}
	return "file"
}

func main() {
	if len(os.Args) < 3 {
		die("usage: passfd send PATH FILE | passfd recv PATH")
	}
	path := os.Args[2]
	switch os.Args[1] {
	case "send":
		if len(os.Args) != 4 {
			die("usage: passfd send PATH FILE")
		}
		f, err := os.Open(os.Args[3])
		if err != nil {
			die("%v", err)
		}
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			die("%v", err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		sendWith(c, "file", int(f.Fd()))
		f.Close()
		pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			die("socketpair: %v", err)
		}
		sendWith(c, "pair", pair[1])
		syscall.Close(pair[1])
		fmt.Printf("socketpair: %s\n", kindOf(uintptr(pair[0])))
		mine := os.NewFile(uintptr(pair[0]), "pair")
		got, err := io.ReadAll(mine)
		if err != nil {
			die("read from the pair: %v", err)
		}
		fmt.Printf("through the passed socket: %s", got)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			die("read the reply: %v", err)
		}
		fmt.Printf("reply: %s", line)
		fmt.Printf("pid: %d\n", os.Getpid())
	case "recv":
		os.Remove(path)
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			die("%v", err)
		}
		fmt.Printf("listening pid %d\n", os.Getpid())
		c, err := l.AcceptUnix()
		if err != nil {
			die("accept: %v", err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		text, f := receiveOne(c)
		body, err := io.ReadAll(f)
		if err != nil {
			die("read the passed file: %v", err)
		}
		f.Close()
		fmt.Printf("%s: %s", text, body)
		text, s := receiveOne(c)
		fmt.Printf("%s: received a %s\n", text, kindOf(s.Fd()))
		if _, err := s.WriteString("written by the receiver\n"); err != nil {
			die("write into the passed socket: %v", err)
		}
		s.Close()
		fmt.Printf("%s: written\n", text)
		fmt.Fprintf(c, "received 2\n")
		c.Close()
		l.Close()
	default:
		die("unknown mode %s", os.Args[1])
	}
}
