// integration/java/UnixNio.java: Java's own AF_UNIX sockets (JDK 16+ NIO:
// SocketChannel/ServerSocketChannel of StandardProtocolFamily.UNIX) under load, for
// run_java.sh, which runs it on kernel sockets and through `udsfs run` and compares
// what it prints. Usage: java UnixNio DIR MNT (DIR: where the sockets are bound; MNT:
// the udsfs mount, for the lines that say where the sockets live and how many ends
// had lanes, which start with "where:" or "lanes:" and are not compared).
//
// Every other line is a summary the kernel decides alone (counts, checksums,
// exception types and messages), printed by the main thread in a fixed order, so the
// two runs print the same lines.

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.*;
import java.nio.file.*;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import java.util.zip.CRC32;
import jdk.net.ExtendedSocketOptions;
import jdk.net.UnixDomainPrincipal;

public class UnixNio {
    // A frame: magic, writer id, seq, payload length, CRC32 of the payload, payload.
    static final int REQ = 0x4A415641, REP = 0x4543484F, HDR = 24, MAX = 1 << 20;
    static Path dir;
    static String mnt;
    static final List<String> errors = Collections.synchronizedList(new ArrayList<>());

    static void say(String s) {
        System.out.println(s);
        System.out.flush();
    }

    // --------------------------------------------------------------- frames

    static long mix(long x) {
        x ^= x >>> 33;
        x *= 0xff51afd7ed558ccdL;
        x ^= x >>> 33;
        x *= 0xc4ceb9fe1a85ec53L;
        return x ^ (x >>> 33);
    }

    // Payload sizes: mostly under 16 KiB, every tenth 60-140 KiB (more than one
    // write's worth for a socket buffer, so a writer's frame spans several copies).
    static byte[] payload(int tid, int seq) {
        long h = mix(tid * 1_000_003L + seq);
        int n = seq % 10 == 9 ? 60_000 + (int) Long.remainderUnsigned(h, 80_000) : (int) Long.remainderUnsigned(h, 16_384);
        byte[] b = new byte[n];
        fill(b, h);
        return b;
    }

    static void fill(byte[] b, long seed) {
        long x = seed | 1;
        for (int i = 0; i < b.length; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            b[i] = (byte) x;
        }
    }

    static long crc(byte[] b) {
        CRC32 c = new CRC32();
        c.update(b);
        return c.getValue();
    }

    static ByteBuffer frame(int magic, int tid, int seq, byte[] p) {
        ByteBuffer b = ByteBuffer.allocate(HDR + p.length);
        b.putInt(magic).putInt(tid).putInt(seq).putInt(p.length).putLong(crc(p)).put(p).flip();
        return b;
    }

    static final AtomicLong shortWrites = new AtomicLong();

    // One write() call per frame: a blocking stream socket takes it whole (Linux sleeps
    // for room until every byte is in), which is what keeps frames from several
    // threads on one channel apart. A short write is counted (the kernel makes none)
    // and the rest written.
    static void writeFrame(SocketChannel ch, ByteBuffer b) throws IOException {
        ch.write(b);
        if (b.hasRemaining()) {
            shortWrites.incrementAndGet();
            while (b.hasRemaining()) ch.write(b);
        }
    }

    // Reads exactly b.remaining() bytes; false on EOF before the first byte, an
    // exception on EOF within.
    static boolean readFully(SocketChannel ch, ByteBuffer b) throws IOException {
        boolean any = false;
        while (b.hasRemaining()) {
            int n = ch.read(b);
            if (n < 0) {
                if (!any) return false;
                throw new IOException("EOF within a frame");
            }
            if (n > 0) any = true;
        }
        return true;
    }

    // A frame read whole: {tid, seq, payload}, or null at EOF.
    record Frame(int magic, int tid, int seq, byte[] p, boolean crcOk) {}

    static Frame readFrame(SocketChannel ch) throws IOException {
        ByteBuffer h = ByteBuffer.allocate(HDR);
        if (!readFully(ch, h)) return null;
        h.flip();
        int magic = h.getInt(), tid = h.getInt(), seq = h.getInt(), len = h.getInt();
        long c = h.getLong();
        if (len < 0 || len > MAX) throw new IOException("bad frame length " + len);
        ByteBuffer p = ByteBuffer.allocate(len);
        if (len > 0 && !readFully(ch, p)) throw new IOException("EOF before a payload");
        return new Frame(magic, tid, seq, p.array(), crc(p.array()) == c);
    }

    // --------------------------------------------------------------- server stats

    static final class Stats {
        final AtomicInteger conns = new AtomicInteger(), frames = new AtomicInteger(), bad = new AtomicInteger();
        final AtomicLong bytes = new AtomicLong();
        final Set<Integer> writers = ConcurrentHashMap.newKeySet();

        // Checks a request frame against what its writer sent (its seq in order on its
        // connection): true if good.
        boolean check(Frame f, Map<Integer, Integer> next) {
            int want = next.getOrDefault(f.tid, 0);
            next.put(f.tid, f.seq + 1);
            boolean good = f.magic == REQ && f.crcOk && f.seq == want
                    && crc(f.p) == crc(payload(f.tid, f.seq));
            frames.incrementAndGet();
            bytes.addAndGet(f.p.length);
            writers.add(f.tid);
            if (!good) bad.incrementAndGet();
            return good;
        }

        String line(String name) {
            return name + ": " + conns.get() + " connections, " + writers.size() + " writers, " + frames.get()
                    + " frames, " + bytes.get() + " payload bytes, " + bad.get() + " bad";
        }
    }

    // --------------------------------------------------------------- servers

    static ServerSocketChannel listen(Path p) throws IOException {
        ServerSocketChannel s = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        s.bind(UnixDomainSocketAddress.of(p), 64);
        return s;
    }

    static SocketChannel connect(Path p) throws IOException {
        return SocketChannel.open(UnixDomainSocketAddress.of(p));
    }

    // The thread-pool server: one acceptor hands each connection to a pool of 8.
    static final class PoolServer {
        final ServerSocketChannel ss;
        final ExecutorService pool = Executors.newFixedThreadPool(8);
        final Stats stats = new Stats();
        final Thread acceptor;
        volatile String acceptEnd = "none";

        PoolServer(Path p) throws IOException {
            ss = listen(p);
            acceptor = new Thread(this::acceptLoop, "acceptor");
            acceptor.start();
        }

        void acceptLoop() {
            try {
                while (true) {
                    SocketChannel c = ss.accept();
                    stats.conns.incrementAndGet();
                    pool.submit(() -> serve(c));
                }
            } catch (IOException e) {
                acceptEnd = e.getClass().getName();
            }
        }

        void serve(SocketChannel c) {
            Map<Integer, Integer> next = new HashMap<>();
            try (c) {
                Frame f;
                while ((f = readFrame(c)) != null) {
                    if (!stats.check(f, next)) {
                        errors.add("pool server: a bad frame from writer " + f.tid + " seq " + f.seq);
                        return;
                    }
                    writeFrame(c, frame(REP, f.tid, f.seq, f.p));
                }
            } catch (IOException e) {
                errors.add("pool server: " + e);
            }
        }

        // Closing the listener wakes the acceptor blocked in accept().
        void stop() throws Exception {
            ss.close();
            acceptor.join(10_000);
            pool.shutdown();
            if (!pool.awaitTermination(20, TimeUnit.SECONDS)) errors.add("pool server: the pool did not end");
        }
    }

    // The Selector (epoll) server: one thread, non-blocking channels.
    static final class SelectorServer {
        final ServerSocketChannel ss;
        final Selector sel = Selector.open();
        final Stats stats = new Stats();
        final Thread loop;
        volatile boolean stopping;

        static final class Conn {
            ByteBuffer in = ByteBuffer.allocate(64 * 1024);
            final ArrayDeque<ByteBuffer> out = new ArrayDeque<>();
            final Map<Integer, Integer> next = new HashMap<>();
            boolean eof;
        }

        SelectorServer(Path p) throws IOException {
            ss = listen(p);
            ss.configureBlocking(false);
            ss.register(sel, SelectionKey.OP_ACCEPT);
            loop = new Thread(this::run, "selector");
            loop.start();
        }

        void run() {
            try {
                while (!stopping) {
                    sel.select(1000);
                    for (Iterator<SelectionKey> it = sel.selectedKeys().iterator(); it.hasNext(); ) {
                        SelectionKey k = it.next();
                        it.remove();
                        if (!k.isValid()) continue;
                        if (k.isAcceptable()) {
                            SocketChannel c;
                            while ((c = ss.accept()) != null) {
                                stats.conns.incrementAndGet();
                                c.configureBlocking(false);
                                c.register(sel, SelectionKey.OP_READ, new Conn());
                            }
                            continue;
                        }
                        try {
                            step(k);
                        } catch (IOException e) {
                            errors.add("selector server: " + e);
                            k.channel().close();
                        }
                    }
                }
            } catch (IOException e) {
                errors.add("selector loop: " + e);
            }
        }

        void step(SelectionKey k) throws IOException {
            SocketChannel c = (SocketChannel) k.channel();
            Conn s = (Conn) k.attachment();
            if (k.isReadable()) {
                int n = c.read(s.in);
                if (n < 0) s.eof = true;
                s.in.flip();
                while (s.in.remaining() >= HDR) {
                    int len = s.in.getInt(s.in.position() + 12);
                    if (len < 0 || len > MAX) throw new IOException("bad frame length " + len);
                    if (s.in.remaining() < HDR + len) {
                        if (s.in.capacity() < HDR + len) {
                            ByteBuffer bigger = ByteBuffer.allocate(HDR + len);
                            bigger.put(s.in);
                            s.in = bigger;
                            s.in.flip();
                        }
                        break;
                    }
                    int magic = s.in.getInt(), tid = s.in.getInt(), seq = s.in.getInt();
                    s.in.getInt();
                    long want = s.in.getLong();
                    byte[] p = new byte[len];
                    s.in.get(p);
                    Frame f = new Frame(magic, tid, seq, p, crc(p) == want);
                    if (!stats.check(f, s.next)) throw new IOException("bad frame from " + tid + " seq " + seq);
                    s.out.add(frame(REP, tid, seq, p));
                }
                s.in.compact();
            }
            while (!s.out.isEmpty()) {
                ByteBuffer b = s.out.peek();
                c.write(b);
                if (b.hasRemaining()) break;
                s.out.poll();
            }
            if (s.eof && s.out.isEmpty()) {
                k.cancel();
                c.close();
                return;
            }
            int ops = (s.eof ? 0 : SelectionKey.OP_READ) | (s.out.isEmpty() ? 0 : SelectionKey.OP_WRITE);
            k.interestOps(ops);
        }

        void stop() throws Exception {
            stopping = true;
            sel.wakeup();
            loop.join(10_000);
            for (SelectionKey k : sel.keys()) k.channel().close();
            sel.close();
        }
    }

    // --------------------------------------------------------------- clients

    // A client with a connection of its own: a request, its echo, FRAMES times.
    static void ownClient(Path p, int tid, int frames, AtomicInteger good) {
        try (SocketChannel c = connect(p)) {
            for (int seq = 0; seq < frames; seq++) {
                byte[] b = payload(tid, seq);
                writeFrame(c, frame(REQ, tid, seq, b));
                Frame r = readFrame(c);
                if (r == null) throw new IOException("EOF before the echo of seq " + seq);
                if (r.magic == REP && r.tid == tid && r.seq == seq && r.crcOk && Arrays.equals(r.p, b)) good.incrementAndGet();
                else errors.add("client " + tid + ": a wrong echo for seq " + seq);
            }
        } catch (IOException e) {
            errors.add("client " + tid + ": " + e);
        }
    }

    // WRITERS threads write FRAMES frames each to one channel at once; one reader thread
    // takes every echo, each writer's in its order.
    static void sharedClient(Path p, int base, int writers, int frames, AtomicInteger good) throws Exception {
        try (SocketChannel c = connect(p)) {
            Thread reader = new Thread(() -> {
                Map<Integer, Integer> next = new HashMap<>();
                try {
                    for (int i = 0; i < writers * frames; i++) {
                        Frame r = readFrame(c);
                        if (r == null) throw new IOException("EOF after " + i + " echoes");
                        int want = next.getOrDefault(r.tid, 0);
                        next.put(r.tid, r.seq + 1);
                        if (r.magic == REP && r.seq == want && r.crcOk && crc(r.p) == crc(payload(r.tid, r.seq)))
                            good.incrementAndGet();
                        else errors.add("shared " + base + ": a wrong echo from writer " + r.tid + " seq " + r.seq);
                    }
                } catch (IOException e) {
                    errors.add("shared " + base + " reader: " + e);
                }
            }, "reader-" + base);
            reader.start();
            List<Thread> ws = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                int tid = base + w;
                Thread t = new Thread(() -> {
                    try {
                        for (int seq = 0; seq < frames; seq++) writeFrame(c, frame(REQ, tid, seq, payload(tid, seq)));
                    } catch (IOException e) {
                        errors.add("shared writer " + tid + ": " + e);
                    }
                }, "writer-" + tid);
                ws.add(t);
                t.start();
            }
            for (Thread t : ws) t.join();
            reader.join();
        }
    }

    // OWN clients of their own and SHARED channels of WRITERS writers each, at once.
    static String load(Path p, int own, int ownFrames, int shared, int writers, int sharedFrames) throws Exception {
        AtomicInteger good = new AtomicInteger();
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < own; i++) {
            int tid = 1 + i;
            ts.add(new Thread(() -> ownClient(p, tid, ownFrames, good), "client-" + tid));
        }
        for (int s = 0; s < shared; s++) {
            int base = 1000 + 100 * s;
            ts.add(new Thread(() -> {
                try {
                    sharedClient(p, base, writers, sharedFrames, good);
                } catch (Exception e) {
                    errors.add("shared " + base + ": " + e);
                }
            }, "shared-" + base));
        }
        for (Thread t : ts) t.start();
        for (Thread t : ts) t.join();
        int want = own * ownFrames + shared * writers * sharedFrames;
        return "clients: " + own + " own connections x " + ownFrames + " frames, " + shared + " shared by "
                + writers + " writers x " + sharedFrames + " frames: " + good.get() + " of " + want + " echoes good";
    }

    // N connections held open after one echo each, while the lines say how many of the
    // mount's ends are on a lane (-DlanesWait=MS, 5000 unless told, for them to come up).
    static void holdAndCountLanes(String what, Path p, int n) throws Exception {
        List<SocketChannel> held = new ArrayList<>();
        AtomicInteger good = new AtomicInteger();
        for (int i = 0; i < n; i++) {
            SocketChannel c = connect(p);
            held.add(c);
            int tid = 500 + i;
            writeFrame(c, frame(REQ, tid, 0, payload(tid, 0)));
            Frame r = readFrame(c);
            if (r != null && r.crcOk && r.seq == 0) good.incrementAndGet();
        }
        say(what + " held: " + good.get() + " of " + n + " echoed");
        Path socks = Paths.get(mnt, ".udsfs", "sock");
        if (!Files.isDirectory(socks)) {
            say("lanes: " + what + ": no udsfs mount here");
        } else {
            int most = 0;
            long wait = Long.getLong("lanesWait", 5000) * 1_000_000L;
            for (long end = System.nanoTime() + wait; System.nanoTime() < end && most < 2 * n; ) {
                most = Math.max(most, lanedEnds(socks));
                Thread.sleep(50);
            }
            say("lanes: " + what + ": " + most + " of " + 2 * n + " ends direct");
        }
        for (SocketChannel c : held) c.close();
    }

    static int lanedEnds(Path socks) throws IOException {
        int n = 0;
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(socks)) {
            for (Path s : ds) {
                try {
                    for (String l : Files.readAllLines(s.resolve("status"))) if (l.equals("lane=direct")) n++;
                } catch (IOException gone) {
                    // a socket closed while we listed
                }
            }
        }
        return n;
    }

    // Where the socket bound at P lives: the kernel's table, the mount's, or neither.
    static String where(Path p) throws IOException {
        String abs = p.toAbsolutePath().toString();
        if (tableHas(Paths.get("/proc/net/unix"), abs)) return "kernel";
        String rel = abs.startsWith(mnt + "/") ? abs.substring(mnt.length() + 1) : abs.substring(1);
        Path t = Paths.get(mnt, ".udsfs", "unix");
        return Files.exists(t) && tableHas(t, rel) ? "udsfs" : "nowhere";
    }

    static boolean tableHas(Path table, String path) throws IOException {
        for (String l : Files.readAllLines(table)) {
            String[] f = l.trim().split("\\s+");
            if (f.length >= 8 && f[7].equals(path)) return true;
        }
        return false;
    }

    // --------------------------------------------------------------- bulk, EOF

    static final int CHUNK = 64 * 1024;

    // LEN bytes of a stream seeded SEED, written in chunks; its CRC32.
    static long sendStream(SocketChannel c, long len, long seed) throws IOException {
        CRC32 crc = new CRC32();
        byte[] b = new byte[CHUNK];
        for (long off = 0; off < len; off += CHUNK) {
            fill(b, seed + off);
            int n = (int) Math.min(CHUNK, len - off);
            crc.update(b, 0, n);
            ByteBuffer bb = ByteBuffer.wrap(b, 0, n);
            while (bb.hasRemaining()) c.write(bb);
        }
        return crc.getValue();
    }

    static long streamCrc(long len, long seed) {
        CRC32 crc = new CRC32();
        byte[] b = new byte[CHUNK];
        for (long off = 0; off < len; off += CHUNK) {
            fill(b, seed + off);
            crc.update(b, 0, (int) Math.min(CHUNK, len - off));
        }
        return crc.getValue();
    }

    // Reads to EOF: {bytes, crc}.
    static long[] drain(SocketChannel c) throws IOException {
        CRC32 crc = new CRC32();
        ByteBuffer b = ByteBuffer.allocate(CHUNK);
        long total = 0;
        while (true) {
            b.clear();
            int n = c.read(b);
            if (n < 0) break;
            crc.update(b.array(), 0, n);
            total += n;
        }
        return new long[] {total, crc.getValue()};
    }

    static String ex(Throwable e) {
        return e.getClass().getName() + ": " + e.getMessage();
    }

    static final long UP = 6L << 20, DOWN = 5L << 20, DUPLEX = 16L << 20;

    // Half-close: the client's 6 MiB then shutdownOutput; the server reads to EOF,
    // answers its count and CRC and 5 MiB, and shuts its side.
    static void halfClose() throws Exception {
        Path p = dir.resolve("half.sock");
        try (ServerSocketChannel ss = listen(p)) {
            CompletableFuture<String> srv = CompletableFuture.supplyAsync(() -> {
                try (SocketChannel c = ss.accept()) {
                    long[] got = drain(c);
                    int again = c.read(ByteBuffer.allocate(16));
                    ByteBuffer h = ByteBuffer.allocate(16).putLong(got[0]).putLong(got[1]).flip();
                    while (h.hasRemaining()) c.write(h);
                    sendStream(c, DOWN, 77);
                    c.shutdownOutput();
                    return "server got " + got[0] + " bytes, crc " + (got[1] == streamCrc(UP, 11) ? "ok" : "WRONG")
                            + ", a read after EOF: " + again;
                } catch (IOException e) {
                    return "server: " + ex(e);
                }
            }, Executors.newSingleThreadExecutor());
            try (SocketChannel c = connect(p)) {
                long sent = sendStream(c, UP, 11);
                c.shutdownOutput();
                ByteBuffer h = ByteBuffer.allocate(16);
                readFully(c, h);
                h.flip();
                long n = h.getLong(), cs = h.getLong();
                long[] rest = drain(c);
                say("half-close: " + srv.get());
                say("half-close: client: server said " + n + " bytes, crc " + (cs == sent ? "ok" : "WRONG") + "; got "
                        + rest[0] + " bytes to EOF, crc " + (rest[1] == streamCrc(DOWN, 77) ? "ok" : "WRONG"));
            }
        }
        Files.delete(p);
    }

    // Full duplex, on DUPLEX_CONNS connections at once: the server echoes 16 MiB on each
    // as it reads; on each the client writes from one thread and reads from another.
    static final int DUPLEX_CONNS = 3;

    static void duplex() throws Exception {
        Path p = dir.resolve("duplex.sock");
        try (ServerSocketChannel ss = listen(p)) {
            ExecutorService threads = Executors.newCachedThreadPool();
            List<Future<String>> lines = new ArrayList<>();
            for (int i = 0; i < DUPLEX_CONNS; i++) {
                SocketChannel c = connect(p);
                SocketChannel a = ss.accept();
                Future<String> echo = threads.submit(() -> {
                    try (a) {
                        ByteBuffer b = ByteBuffer.allocate(CHUNK);
                        long total = 0;
                        while (true) {
                            b.clear();
                            if (a.read(b) < 0) break;
                            b.flip();
                            total += b.remaining();
                            while (b.hasRemaining()) a.write(b);
                        }
                        a.shutdownOutput();
                        return "server echoed " + total + " bytes";
                    }
                });
                Future<long[]> back = threads.submit(() -> drain(c));
                long seed = 23 + i;
                lines.add(threads.submit(() -> {
                    try (c) {
                        long sent = sendStream(c, DUPLEX, seed);
                        c.shutdownOutput();
                        long[] got = back.get();
                        return "duplex: " + echo.get() + "; client got " + got[0] + " bytes back, crc "
                                + (got[1] == sent ? "ok" : "WRONG");
                    }
                }));
            }
            for (Future<String> l : lines) say(l.get());
            threads.shutdown();
        }
        Files.delete(p);
    }

    static void peerClosed() throws Exception {
        Path p = dir.resolve("closed.sock");
        try (ServerSocketChannel ss = listen(p)) {
            // The server closes at once: the client reads EOF, then writes: EPIPE.
            try (SocketChannel c = connect(p)) {
                ss.accept().close();
                int r = c.read(ByteBuffer.allocate(16));
                String w;
                try {
                    for (int i = 0; i < 3; i++) c.write(ByteBuffer.wrap(new byte[100]));
                    w = "writes went through";
                } catch (IOException e) {
                    w = ex(e);
                }
                say("peer closed: read " + r + ", then write: " + w);
            }
            // The server closes with the client's bytes unread: the client's read is
            // ECONNRESET on Linux, not EOF.
            try (SocketChannel c = connect(p)) {
                SocketChannel a = ss.accept();
                c.write(ByteBuffer.wrap(new byte[1000]));
                a.close();
                String r;
                try {
                    r = "read " + c.read(ByteBuffer.allocate(16));
                } catch (IOException e) {
                    r = ex(e);
                }
                say("peer closed with bytes unread: " + r);
            }
        }
        Files.delete(p);
    }

    // --------------------------------------------------------------- blocked calls

    // Waits until thread T sleeps in the native call named NAME (its top frame).
    static void waitIn(Thread t, String name) throws InterruptedException {
        for (int i = 0; i < 1000; i++) {
            StackTraceElement[] st = t.getStackTrace();
            if (st.length > 0 && st[0].getMethodName().equals(name)) {
                Thread.sleep(100);
                return;
            }
            Thread.sleep(10);
        }
        errors.add(t.getName() + " never reached " + name);
    }

    // A thread named NAME running CALL, once it is blocked in the native method WHERE; R
    // gets CALL's result or its exception's class name.
    static Thread blockedIn(String name, String where, CompletableFuture<String> r,
            Callable<String> call) throws Exception {
        Thread t = new Thread(() -> {
            try {
                r.complete(call.call());
            } catch (Throwable e) {
                r.complete(e.getClass().getName());
            }
        }, name);
        t.start();
        waitIn(t, where);
        return t;
    }

    static void blocked() throws Exception {
        Path p = dir.resolve("block.sock");
        try (ServerSocketChannel ss = listen(p)) {
            // A read blocked on a channel another thread closes (NIO dup2s a dead socket
            // over the descriptor and signals the reader).
            try (SocketChannel c = connect(p); SocketChannel a = ss.accept()) {
                CompletableFuture<String> r = new CompletableFuture<>();
                blockedIn("blocked-reader", "read0", r,
                        () -> "read " + c.read(ByteBuffer.allocate(16)));
                c.close();
                say("read blocked, channel closed by another thread: " + r.get(10, TimeUnit.SECONDS));
                ByteBuffer b = ByteBuffer.allocate(16);
                say("the peer then reads: " + a.read(b));
            }
            // A read blocked in a thread that is interrupted.
            try (SocketChannel c = connect(p); SocketChannel a = ss.accept()) {
                CompletableFuture<String> r = new CompletableFuture<>();
                Thread t = blockedIn("interrupted-reader", "read0", r,
                        () -> "read " + c.read(ByteBuffer.allocate(16)));
                t.interrupt();
                say("read blocked, thread interrupted: " + r.get(10, TimeUnit.SECONDS) + ", channel open: " + c.isOpen());
            }
            // A write blocked on a full socket, its channel closed by another thread.
            try (SocketChannel c = connect(p); SocketChannel a = ss.accept()) {
                CompletableFuture<String> r = new CompletableFuture<>();
                blockedIn("blocked-writer", "write0", r, () -> {
                    ByteBuffer b = ByteBuffer.allocate(4 << 20);
                    while (true) c.write(b.clear());
                });
                c.close();
                say("write blocked, channel closed by another thread: " + r.get(10, TimeUnit.SECONDS));
                long[] got = drain(a);
                say("the peer then reads to EOF: " + (got[0] > 0 ? "some bytes" : "no bytes"));
            }
        }
        Files.delete(p);
    }

    // --------------------------------------------------------------- names, errors

    static String tryConnect(Path p) {
        try (SocketChannel c = connect(p)) {
            return "connected";
        } catch (IOException e) {
            return ex(e);
        }
    }

    static String rel(Object addr) {
        String s = String.valueOf(addr);
        return s.replace(dir.toString(), "DIR");
    }

    static void names() throws Exception {
        // A listener closed: its file stays (Java does not unlink it), nothing listens.
        Path left = dir.resolve("left.sock");
        ServerSocketChannel ls = listen(left);
        say("listener address: " + rel(ls.getLocalAddress()));
        statLines("a listener's socket file", left);
        ls.close();
        say("after the listener closed: exists " + Files.exists(left) + ", connect: " + tryConnect(left));
        try (ServerSocketChannel again = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            again.bind(UnixDomainSocketAddress.of(left));
            say("bind over the file left: bound");
        } catch (IOException e) {
            say("bind over the file left: " + ex(e));
        }
        Files.delete(left);
        say("connect to no file: " + tryConnect(dir.resolve("none.sock")));
        say("connect in no directory: " + tryConnect(dir.resolve("nodir/x.sock")));
        Path d = dir.resolve("adir");
        Files.createDirectory(d);
        say("connect to a directory: " + tryConnect(d));
        Files.delete(d);

        // A client bound to a name of its own: not listening, refused; the server sees
        // the name as its peer's.
        Path srvp = dir.resolve("names.sock"), cli = dir.resolve("client.sock");
        try (ServerSocketChannel ss = listen(srvp); SocketChannel c = SocketChannel.open(StandardProtocolFamily.UNIX)) {
            c.bind(UnixDomainSocketAddress.of(cli));
            say("connect to a bound client's name: " + tryConnect(cli));
            c.connect(UnixDomainSocketAddress.of(srvp));
            try (SocketChannel a = ss.accept(); SocketChannel u = connect(srvp); SocketChannel ua = ss.accept()) {
                say("bound client: local " + rel(c.getLocalAddress()) + ", remote " + rel(c.getRemoteAddress())
                        + "; accepted: local " + rel(a.getLocalAddress()) + ", remote " + rel(a.getRemoteAddress()));
                say("unnamed client: local '" + rel(u.getLocalAddress()) + "', accepted's remote '"
                        + rel(ua.getRemoteAddress()) + "'");
                UnixDomainPrincipal pc = a.getOption(ExtendedSocketOptions.SO_PEERCRED);
                say("peer credentials: user " + pc.user().getName() + ", group " + pc.group().getName());
                say("SO_SNDBUF " + c.getOption(StandardSocketOptions.SO_SNDBUF) + ", SO_RCVBUF "
                        + c.getOption(StandardSocketOptions.SO_RCVBUF));
                c.setOption(StandardSocketOptions.SO_SNDBUF, 65536);
                say("SO_SNDBUF after setting 65536: " + c.getOption(StandardSocketOptions.SO_SNDBUF));
                say("SO_LINGER " + c.getOption(StandardSocketOptions.SO_LINGER));
            }
        }
        Files.delete(cli);
        Files.delete(srvp);

        // The socket file deleted after bind: connections made before go on, a new
        // connect finds no name, and a new listener may bind the name again.
        Path del = dir.resolve("deleted.sock");
        try (ServerSocketChannel ss = listen(del); SocketChannel c = connect(del); SocketChannel a = ss.accept()) {
            Files.delete(del);
            say("after the delete: exists " + Files.exists(del) + ", connect: " + tryConnect(del));
            c.write(ByteBuffer.wrap("still here".getBytes()));
            ByteBuffer b = ByteBuffer.allocate(32);
            a.read(b);
            say("the connection made before: '" + new String(b.array(), 0, b.position()) + "'");
            say("the listener's address after the delete: " + rel(ss.getLocalAddress()));
            try (ServerSocketChannel ss2 = listen(del); SocketChannel c2 = connect(del); SocketChannel a2 = ss2.accept()) {
                c2.write(ByteBuffer.wrap("new".getBytes()));
                ByteBuffer b2 = ByteBuffer.allocate(8);
                a2.read(b2);
                say("a new listener at the name: '" + new String(b2.array(), 0, b2.position()) + "'");
            }
            Files.delete(del);
        }
    }

    static void statLines(String what, Path p) throws IOException {
        BasicFileAttributes nofollow = Files.readAttributes(p, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        int mode = (Integer) Files.getAttribute(p, "unix:mode");
        say(what + ": isOther " + Files.readAttributes(p, BasicFileAttributes.class).isOther() + ", regular " + Files.isRegularFile(p) + ", directory "
                + Files.isDirectory(p) + ", lstat isOther " + nofollow.isOther() + ", unix:mode "
                + Integer.toOctalString(mode) + ", permissions " + PosixFilePermissions.toString(Files.getPosixFilePermissions(p))
                + ", size " + Files.size(p) + ", nlink " + Files.getAttribute(p, "unix:nlink"));
    }

    // --------------------------------------------------------------- main

    // Each phase runs in a thread of its own for LIMIT seconds at most; past that the
    // threads' stacks go to stderr and the next phase runs, so a hang says where it
    // hangs and the later phases still answer. -Dphases=a,b runs only those; -DlimitScale=N gives each N times its
    // time (to look at a hang from outside).
    interface Body {
        void run() throws Exception;
    }

    static Set<String> only;

    static void phase(String name, int limit, Body body) throws InterruptedException, IOException {
        if (only != null && !only.contains(name)) return;
        say("== " + name);
        long shortBefore = shortWrites.get();
        Thread t = new Thread(() -> {
            try {
                body.run();
            } catch (Throwable e) {
                say("phase " + name + ": " + ex(e));
            }
        }, "phase-" + name);
        t.setDaemon(true);
        t.start();
        t.join(limit * 1000L * Integer.getInteger("limitScale", 1));
        if (t.isAlive()) {
            say("phase " + name + ": timed out after " + limit + " s");
            System.err.println("phase " + name + " timed out; threads:");
            for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
                System.err.println("thread " + e.getKey().getName() + " " + e.getKey().getState());
                for (StackTraceElement s : e.getValue()) System.err.println("    at " + s);
            }
            System.err.flush();
        }
        // What went wrong in the phase's threads, and what it left behind (each phase
        // removes its socket files), belongs to its answers.
        say("short writes: " + (shortWrites.get() - shortBefore));
        List<String> errs;
        synchronized (errors) {
            errs = new ArrayList<>(errors);
            errors.clear();
        }
        Collections.sort(errs);
        for (String e : errs) say("error: " + e);
        try (DirectoryStream<Path> left = Files.newDirectoryStream(dir)) {
            for (Path l : left) {
                say("left in the directory: " + dir.relativize(l));
                Files.deleteIfExists(l);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        dir = Paths.get(args[0]).toAbsolutePath();
        mnt = args[1];
        String ph = System.getProperty("phases");
        if (ph != null) only = new HashSet<>(Arrays.asList(ph.split(",")));

        phase("pool", 40, () -> {
            Path sock = dir.resolve("pool.sock");
            PoolServer pool = new PoolServer(sock);
            say("where: " + where(sock));
            statLines("the pool's socket file", sock);
            holdAndCountLanes("pool", sock, 6);
            say(load(sock, 16, 40, 3, 4, 60));
            pool.stop();
            say(pool.stats.line("pool server") + ", accept ended by " + pool.acceptEnd);
            Files.delete(sock);
        });
        phase("selector", 40, () -> {
            Path sock = dir.resolve("selector.sock");
            SelectorServer sel = new SelectorServer(sock);
            say("where: " + where(sock));
            holdAndCountLanes("selector", sock, 4);
            say(load(sock, 10, 30, 2, 3, 40));
            sel.stop();
            say(sel.stats.line("selector server"));
            Files.delete(sock);
        });
        phase("half-close", 20, UnixNio::halfClose);
        phase("duplex", 10, UnixNio::duplex);
        phase("peer-closed", 10, UnixNio::peerClosed);
        phase("blocked", 20, UnixNio::blocked);
        phase("names", 10, UnixNio::names);

        say("done");
        System.exit(0);
    }
}
