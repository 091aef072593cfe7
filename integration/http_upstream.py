"""An HTTP/1.1 server on a unix socket (socketserver's UnixStreamServer with an
http.server handler), the upstream that run_curl.sh, run_nginx.sh and run_haproxy.sh
talk to. Usage: http_upstream.py SOCK [CONNECTIONS].

GET PATH answers "upstream saw PATH"; a POST to a path ending in /echo answers its body
whole, any other POST "N bytes, sum S" of its body. Without CONNECTIONS it serves
connections on threads until killed; with CONNECTIONS it serves that many, one after the
other (keep-alive: a connection may carry several requests), prints "served N
connections" and exits. run_varnish.sh's backend imports Handler and ThreadingServer."""

import http.server
import socketserver
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    content_type = "application/octet-stream"

    def address_string(self):
        return "unix"  # a unix peer has no host address

    def log_message(self, *a):
        pass

    def reply(self, body):
        self.send_response(200)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply(("upstream saw %s\n" % self.path).encode())

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path.endswith("/echo"):
            self.reply(body)
        else:
            self.reply(b"%d bytes, sum %d\n" % (len(body), sum(body)))


class ThreadingServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def main():
    if len(sys.argv) == 2:
        ThreadingServer(sys.argv[1], Handler).serve_forever()
    connections = int(sys.argv[2])
    server = socketserver.UnixStreamServer(sys.argv[1], Handler)
    print("listening on", server.server_address, flush=True)
    for _ in range(connections):
        server.handle_request()
    server.server_close()
    print("served", connections, "connections", flush=True)


if __name__ == "__main__":
    main()
