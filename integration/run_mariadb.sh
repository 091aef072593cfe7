#!/usr/bin/env bash
# run_mariadb.sh: MariaDB (Debian's mariadb-server: mariadbd, its own datadir made by
# mariadb-install-db, --skip-networking) with its socket in the mount, and the `mariadb`
# client (`-S`): root logs in by the unix_socket plugin (the server reads the client's
# uid with SO_PEERCRED), creates a table, inserts (a 1 MB row too) and selects; a user
# made IDENTIFIED VIA unix_socket for uid 65534 logs in as that uid and sees its grants
# only, and uid 65534 asking to be root is refused. On kernel sockets, then server and
# clients through `udsfs run --mount $MNT`: the same answers both times, and through
# udsfs the server's socket is a udsfs socket.
UDSFS_MOUNT_ARGS=(--allow-other) # a client runs as uid 65534
source "$(dirname "$0")/lib.sh"
source "$LIB_DIR/lib_run.bash"

need_cmd mariadbd mariadb-server
need_cmd mariadb-install-db mariadb-server
need_cmd mariadb mariadb-client
need_cmd mariadb-admin mariadb-client
need_cmd setpriv util-linux
chmod 755 "$TMP" # uid 65534 must reach the kernel run's socket

head -c 700000 /dev/urandom | base64 -w0 >"$TMP/big.txt" # 933,336 bytes
BIG_SUM=$(md5sum <"$TMP/big.txt" | cut -d' ' -f1)

# one_run MODE DIR: mariadbd on DIR/mysqld.sock with MODE's sockets; answers in $TMP/MODE.out.
one_run() {
    local mode=$1 dir=$2 d=$TMP/mdb-$1 out=$TMP/$1.out
    UDSFS_RUN_VIA=$mode
    mkdir -p "$dir" "$d"
    chmod 755 "$dir"
    local sock=$dir/mysqld.sock
    mariadb-install-db --no-defaults --datadir="$d/data" --user=root \
        --auth-root-authentication-method=socket --skip-test-db >"$d/install.out" 2>&1 ||
        fail "mariadb-install-db failed: $(tail -n 20 "$d/install.out")"
    run_cmd -- mariadbd --no-defaults --datadir="$d/data" --socket="$sock" --skip-networking \
        --user=root --pid-file="$d/mariadbd.pid" --log-error="$d/error.log" \
        --innodb-buffer-pool-size=16M --max-allowed-packet=16M
    start_bg MARIADBD "${RUN_CMD[@]}" >"$d/mariadbd.out" 2>&1
    wait_listening "$sock" 60000
    expect_socket_home "$sock"
    local sql=(timeout 30 mariadb --no-defaults -S "$sock" -u root --max-allowed-packet=16M)
    {
        via -- "${sql[@]}" -e 'SELECT CURRENT_USER(), USER()'
        via -- "${sql[@]}" -e 'CREATE DATABASE t; CREATE TABLE t.a (id INT PRIMARY KEY, v LONGTEXT)'
        via -- "${sql[@]}" -e 'INSERT INTO t.a VALUES (1, "one"), (2, "two"), (3, "three")'
        # a row larger than any one message: many reads and writes on the stream
        printf 'INSERT INTO t.a VALUES (4, "%s");\n' "$(cat "$TMP/big.txt")" | via -- "${sql[@]}"
        via -- "${sql[@]}" -e 'SELECT id, v FROM t.a WHERE id < 4 ORDER BY id; SELECT LENGTH(v), MD5(v) FROM t.a WHERE id = 4'
        echo "big row read back equal: $([ "$(via -- "${sql[@]}" -N -B -e 'SELECT v FROM t.a WHERE id = 4' | md5sum | cut -d' ' -f1)" == "$(printf '%s\n' "$(cat "$TMP/big.txt")" | md5sum | cut -d' ' -f1)" ] && echo yes || echo no)"
        via -- "${sql[@]}" -e 'UPDATE t.a SET v = "uno" WHERE id = 1; DELETE FROM t.a WHERE id = 2; SELECT id, v FROM t.a WHERE id < 4 ORDER BY id'
        # peer credentials: a unix_socket user for uid 65534 (named as the system names it)
        local nobody
        nobody=$(id -nu 65534)
        via -- "${sql[@]}" -e "CREATE USER '$nobody'@'localhost' IDENTIFIED VIA unix_socket; GRANT SELECT ON t.* TO '$nobody'@'localhost'"
        local as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups timeout 30 mariadb --no-defaults -S "$sock")
        via -- "${as_nobody[@]}" -u "$nobody" -e 'SELECT CURRENT_USER(); SELECT COUNT(*) FROM t.a'
        via -- "${as_nobody[@]}" -u "$nobody" -e 'DELETE FROM t.a' 2>&1 | sed 's/^ERROR \([0-9]*\).*/ERROR \1/'
        via -- "${as_nobody[@]}" -u root -e 'SELECT 1' 2>&1 | sed 's/^ERROR \([0-9]*\).*/ERROR \1/'
        # several clients at once
        local i pids=()
        for i in 1 2 3 4 5 6 7 8; do
            via -- "${sql[@]}" -N -B -e "INSERT INTO t.a VALUES (10 + $i, REPEAT('x', 1000 * $i)); SELECT SLEEP(0.2)" >/dev/null &
            pids+=($!)
        done
        for i in "${pids[@]}"; do wait "$i" || echo "a concurrent client failed: $?"; done
        via -- "${sql[@]}" -N -B -e 'SELECT COUNT(*), SUM(LENGTH(v)) FROM t.a WHERE id > 10'
        via -- timeout 30 mariadb-admin --no-defaults -S "$sock" -u root ping
        via -- timeout 60 mariadb-admin --no-defaults -S "$sock" -u root shutdown
    } >"$out" 2>&1 || true
    exit_status "$out" "mariadbd" "$MARIADBD" 60000 "$d/error.log"
    show_answers "$mode" "$out" "$d"/*.out "$d/error.log"
}

one_run kernel "$TMP/k"
one_run udsfs "$MNT/mdb"
kernel_said 'root@localhost	root@localhost' "root did not log in by unix_socket on the kernel"
kernel_said 'big row read back equal: yes' "the kernel run did not read the 1 MB row back"
kernel_said "$(id -nu 65534)@localhost" "uid 65534 did not log in as its own user on the kernel"
[ "$(grep -cx 'ERROR [0-9]*' "$TMP/kernel.out")" -eq 2 ] || fail "the kernel run did not refuse uid 65534's DELETE and its claim to be root"
kernel_said 'mariadbd exit status: 0' "mariadbd did not exit 0 on the kernel"
same_answers "MariaDB" tail -n 20 "$TMP/mdb-udsfs/error.log"
ok "mariadbd and its clients (unix_socket logins of root and uid 65534, 8 at once) through udsfs run: the same $(wc -l <"$TMP/udsfs.out") answers as on kernel sockets"
