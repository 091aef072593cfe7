#!/usr/bin/env bash
# run_node.sh: Node.js (Debian's nodejs) net server and client on a unix socket, each
# connection passed to a forked child (child_process handle passing over the IPC
# channel, a socketpair) which serves it; run on kernel sockets, then through
# `udsfs run --mount $MNT`: the same lines both times. The program itself says where its
# listening socket lives (/proc/net/unix, or the mount's .udsfs/unix and not
# /proc/net/unix): the guard that the udsfs run used udsfs sockets. On d20381b the child
# aborted through udsfs (`Assertion failed: (type) == (UV_UNKNOWN_HANDLE)`): libuv
# fstat()s a received descriptor with __fxstat64, which the library did not interpose,
# and saw S_IFREG.
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd node nodejs

cat >"$TMP/pass.js" <<'EOF2'
const net = require('net');
const fs = require('fs');
const { fork } = require('child_process');

function where(path, udsfsList) {
  const kernel = fs.readFileSync('/proc/net/unix', 'utf8').split('\n')
    .some((l) => l.split(/\s+/)[7] === path);
  if (kernel) return 'kernel';
  const rel = path.slice(process.env.MNT.length + 1);
  const udsfs = fs.readFileSync(udsfsList, 'utf8').split('\n')
    .some((l) => l.split(/\s+/)[7] === rel);
  return udsfs ? 'udsfs' : 'nowhere';
}

if (process.argv[2] === 'child') {
  let served = 0;
  process.on('message', (m, sock) => {
    if (m !== 'conn') return;
    served++;
    process.send('child: got handle ' + served + ' of type ' + sock.constructor.name);
    sock.on('data', (d) => sock.end('child answers ' + d.toString().toUpperCase()));
  });
  process.send('ready');
} else {
  const path = process.argv[2] + '/node.sock';
  const child = fork(__filename, ['child']);
  const lines = [];
  const server = net.createServer({ pauseOnConnect: true }, (sock) => {
    lines.push('server: a connection, passed on');
    child.send('conn', sock);
  });
  function client(n, done) {
    const c = net.connect(path, () => c.write('ping ' + n));
    let got = '';
    c.on('data', (d) => (got += d));
    c.on('end', () => { lines.push('client ' + n + ' got: ' + got); done(); });
  }
  child.on('message', (m) => {
    if (m !== 'ready') { lines.push(m); return; }
    server.listen(path, () => {
      console.log('where: ' + where(path, process.env.MNT + '/.udsfs/unix'));
      console.log('listening: a socket: ' + fs.statSync(path).isSocket());
      client(1, () => client(2, () => client(3, () => {
        setTimeout(() => { child.kill(); server.close(); }, 100);
      })));
    });
  });
  child.on('exit', (code, sig) => {
    lines.sort().forEach((l) => console.log(l));
    console.log('child exit: ' + code + ' ' + sig);
    console.log('done');
  });
}
EOF2

mkdir "$TMP/k" "$MNT/n"
timeout 30 node "$TMP/pass.js" "$TMP/k" >"$TMP/kernel.out" 2>"$TMP/kernel.err" ||
    fail "node fails on kernel sockets: $(tail -5 "$TMP/kernel.err")"
say "kernel:"
sed 's/^/    /' "$TMP/kernel.out"
UDSFS_RUN_VIA=udsfs
run_cmd -- timeout 30 node "$TMP/pass.js" "$MNT/n"
"${RUN_CMD[@]}" >"$TMP/udsfs.out" 2>"$TMP/udsfs.err" || say "node through udsfs run: status $?"
say "udsfs:"
sed 's/^/    /' "$TMP/udsfs.out"
tail -1 "$TMP/kernel.out" | grep -qx done || fail "the kernel run did not finish"
grep -qx 'where: kernel' "$TMP/kernel.out" || fail "the kernel run did not use kernel sockets"
grep -qx 'where: udsfs' "$TMP/udsfs.out" ||
    fail "the udsfs run did not listen on a udsfs socket: $(head -3 "$TMP/udsfs.out") $(tail -5 "$TMP/udsfs.err")"
ok "node's listening socket was a udsfs socket (in $U/unix, not /proc/net/unix)"
if ! diff <(grep -v '^where: ' "$TMP/kernel.out") <(grep -v '^where: ' "$TMP/udsfs.out") >"$TMP/diff"; then
    cat "$TMP/diff" >&2
    tail -20 "$TMP/udsfs.err" >&2
    fail "node through udsfs run printed differently from the kernel (< kernel, > udsfs)"
fi
ok "node through udsfs run: the same $(wc -l <"$TMP/udsfs.out") lines as on kernel sockets"
[ ! -s "$TMP/udsfs.err" ] || fail "stderr through udsfs run: $(cat "$TMP/udsfs.err")"
