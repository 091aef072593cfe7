//! Hostile input to the parsers: proptest fuzzing of what a user
//! writes to `ctl` and `msg` files and of the address syntax, through the
//! public API only.
//!
//! - `ctl::parse`: random bytes, and near-valid command lines built with a
//!   known answer (Ok(command) or EINVAL);
//! - `msgfmt::Assembler::push`, which every `msg` write goes through: random
//!   bytes, valid records with every field in any order, and each kind of
//!   damage, all cut into writes at random points and checked against a
//!   one-pass model of the stream (`expect_stream`): records come out whole
//!   and identical whatever the split; a bad record fails the write that
//!   completes its header, with EINVAL or EMSGSIZE, and keeps no garbage;
//! - `engine::Addr::parse`: `Addr::parse(a.display()) == a` for abstract names
//!   (any bytes, up to 107) and paths (up to 108 bytes).
//!
//! Every property runs `UDSFS_FUZZ_CASES` cases (default 1000, a few seconds
//! in all); set it higher for a longer hunt. `malformed_forms` lists the
//! malformed inputs worth remembering with the errno each gives.
//! Run with `--nocapture` to see the figures.

use std::sync::atomic::{AtomicUsize, Ordering};

use nix::errno::Errno;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use udsfs::ctl::{self, Command};
use udsfs::engine::socket::{RCV_SHUTDOWN, SEND_SHUTDOWN, SHUTDOWN_MASK};
use udsfs::engine::timeo::Direction;
use udsfs::engine::{Addr, Buf, Ucred};
use udsfs::msgfmt::{self, Assembler, MAX_HEADER, SCM_MAX_FD, SendHeader};

const DEFAULT_CASES: u32 = 1000;

fn cases() -> u32 {
    std::env::var("UDSFS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

/// Runs `test` on `cases()` values of `strategy`; panics with the minimal
/// failing input; prints how many inputs were tried.
fn fuzz<S: Strategy>(name: &str, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let config = Config {
        cases: cases(),
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    };
    let tried = AtomicUsize::new(0);
    let mut runner = TestRunner::new(config);
    let res = runner.run(&strategy, |v| {
        tried.fetch_add(1, Ordering::Relaxed);
        test(v)
    });
    let n = tried.load(Ordering::Relaxed);
    match res {
        Ok(()) => println!("{name}: {n} inputs fuzzed, all passed"),
        Err(e) => panic!("{name}: failed after {n} inputs: {e}"),
    }
}

// ------------------------------------------------------------------ helpers

/// How a writer may spell a name after `@`: each byte raw (unless it is a
/// backslash or whitespace) or as `\xHH` in either case; a backslash also as `\\`.
fn spelling(name: &[u8]) -> impl Strategy<Value = Vec<u8>> + use<> {
    let name = name.to_vec();
    vec(0u8..4, name.len()).prop_map(move |how| {
        let mut out = Vec::new();
        for (&b, &h) in name.iter().zip(&how) {
            let raw_ok = b != b'\\' && !b.is_ascii_whitespace();
            match h {
                0 | 1 if raw_ok => out.push(b),
                0 if b == b'\\' => out.extend_from_slice(b"\\\\"),
                1 | 2 => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
                _ => out.extend_from_slice(format!("\\x{b:02X}").as_bytes()),
            }
        }
        out
    })
}

/// Up to 300 bytes of `byte` after one of `starts`: random input that gets
/// past the first word of the format often enough to reach what follows it.
fn after_one_of<B: Strategy<Value = u8>>(
    starts: &[&'static [u8]],
    byte: B,
) -> impl Strategy<Value = Vec<u8>> + use<B> {
    (prop::sample::select(starts.to_vec()), vec(byte, 0..300))
        .prop_map(|(start, rest)| cat(&[start, &rest]))
}

/// Path bytes: no NUL, no whitespace, not starting with `@`.
fn path_bytes(len: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        6 => prop::sample::select(
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/".to_vec()
        ),
        1 => any::<u8>().prop_filter("no NUL or whitespace", |b| *b != 0 && !b.is_ascii_whitespace()),
    ];
    vec(byte, len).prop_filter("not abstract", |p| p.first() != Some(&b'@'))
}

/// ASCII whitespace as Rust (and so the ctl parser) counts it, newline aside.
fn ws(min: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(prop::sample::select(b" \t\x0c".to_vec()), min..min + 3)
}

/// The text of a header field a writer would write for an address: both
/// kinds take `\xHH` escapes (and `\\` for a backslash).
fn addr_text(a: &Addr) -> Vec<u8> {
    a.display().into_bytes()
}

fn parse_ctl(line: &[u8]) -> Result<Command, Errno> {
    ctl::parse(line)
}

/// A command line with the answer the parser must give.
#[derive(Clone, Debug)]
struct Case {
    line: Vec<u8>,
    want: Result<Command, Errno>,
}

fn case(line: Vec<u8>, want: Result<Command, Errno>) -> Case {
    Case { line, want }
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

// ------------------------------------------------------------------ ctl::parse

/// Any bytes: Ok or an errno, never a panic; whatever parses means the same
/// when written back in canonical form.
#[test]
fn ctl_parse_random_bytes() {
    let input = after_one_of(
        &[
            b"",
            b"bind ",
            b"bind @",
            b"connect ",
            b"connect @",
            b"listen ",
            b"shutdown ",
            b"passcred ",
            b"oobinline ",
            b"peek_off ",
            b"owner ",
            b"passpidfd ",
            b"sndbuf ",
            b"rcvbufforce ",
            b"rcvtimeo ",
            b"sndtimeo ",
            b"capture_proto ",
        ],
        any::<u8>(),
    );
    fuzz("ctl::parse, random bytes", input, |line| {
        let Ok(cmd) = ctl::parse(&line) else {
            return Ok(());
        };
        let canon: Vec<u8> = match &cmd {
            Command::Bind(a) | Command::Connect(a) => {
                let word: &[u8] = if matches!(cmd, Command::Bind(_)) {
                    b"bind"
                } else {
                    b"connect"
                };
                match a {
                    None => word.to_vec(),
                    Some(a) => cat(&[word, b" ", &addr_text(a)]),
                }
            }
            Command::Listen(n) => format!("listen {n}").into_bytes(),
            Command::Shutdown(h) => match *h {
                RCV_SHUTDOWN => b"shutdown rd".to_vec(),
                SEND_SHUTDOWN => b"shutdown wr".to_vec(),
                SHUTDOWN_MASK => b"shutdown rdwr".to_vec(),
                other => return Err(TestCaseError::fail(format!("shutdown how={other}"))),
            },
            Command::Passcred(on) => {
                format!("passcred {}", if *on { "on" } else { "off" }).into_bytes()
            }
            Command::OobInline(on) => {
                format!("oobinline {}", if *on { "on" } else { "off" }).into_bytes()
            }
            Command::PeekOff(n) => format!("peek_off {n}").into_bytes(),
            Command::Owner(n) => format!("owner {n}").into_bytes(),
            Command::Passpidfd(on) => {
                format!("passpidfd {}", if *on { "on" } else { "off" }).into_bytes()
            }
            Command::Buffer { buf, val, force } => {
                let word = if *buf == Buf::Send {
                    "sndbuf"
                } else {
                    "rcvbuf"
                };
                let force = if *force { "force" } else { "" };
                format!("{word}{force} {val}").into_bytes()
            }
            Command::Timeout { dir, millis } => {
                let word = if *dir == Direction::Recv {
                    "rcvtimeo"
                } else {
                    "sndtimeo"
                };
                format!("{word} {millis}").into_bytes()
            }
            Command::CaptureProto(None) => b"capture_proto".to_vec(),
            Command::CaptureProto(Some(p)) => format!("capture_proto {p}").into_bytes(),
        };
        prop_assert_eq!(
            parse_ctl(&canon),
            Ok(cmd.clone()),
            "canonical form {:?}",
            String::from_utf8_lossy(&canon)
        );
        Ok(())
    });
}

/// The lines `WORD ARG` for each argument: each of a command's spellings with the
/// command it means, or EINVAL.
fn word_cases(
    word: &'static [u8],
    good: &[(Command, &[&'static [u8]])],
    bad: &[&'static [u8]],
) -> impl Strategy<Value = Case> + use<> {
    let mut args: Vec<(&'static [u8], Result<Command, Errno>)> = good
        .iter()
        .flat_map(|(c, spellings)| spellings.iter().map(|&a| (a, Ok(c.clone()))))
        .collect();
    args.extend(bad.iter().map(|&a| (a, Err(Errno::EINVAL))));
    prop::sample::select(args).prop_map(move |(a, want)| case(cat(&[word, b" ", a]), want))
}

fn ctl_case() -> impl Strategy<Value = Case> {
    let verb = prop_oneof![Just((true, &b"bind"[..])), Just((false, &b"connect"[..]))];
    let mk = |bind: bool, a: Option<Addr>| {
        if bind {
            Command::Bind(a)
        } else {
            Command::Connect(a)
        }
    };
    let abstract_ok =
        (verb.clone(), vec(any::<u8>(), 0..=107)).prop_flat_map(move |((bind, w), name)| {
            spelling(&name).prop_map(move |sp| {
                case(
                    cat(&[w, b" @", &sp]),
                    Ok(mk(bind, Some(Addr::Abstract(name.clone())))),
                )
            })
        });
    let abstract_long =
        (verb.clone(), vec(any::<u8>(), 108..=130)).prop_flat_map(|((_, w), name)| {
            spelling(&name).prop_map(move |sp| case(cat(&[w, b" @", &sp]), Err(Errno::EINVAL)))
        });
    let broken = prop::sample::select(vec![
        &b"\\"[..],
        b"\\x",
        b"\\x4",
        b"\\xg0",
        b"\\x0g",
        b"\\q",
        b"\\X41",
        b"\\x-1",
        b"\\x+1",
        b"\\x\xc3\xa9",
    ]);
    let abstract_broken =
        (verb.clone(), vec(any::<u8>(), 0..50), broken).prop_flat_map(|((_, w), name, bad)| {
            spelling(&name).prop_map(move |sp| case(cat(&[w, b" @", &sp, bad]), Err(Errno::EINVAL)))
        });
    // A path is written escaped, as status files show it.
    let path = (verb.clone(), path_bytes(1..=130)).prop_map(move |((bind, w), p)| {
        let a = Addr::Path(p.clone());
        let want = if p.len() <= 108 {
            Ok(mk(bind, Some(a.clone())))
        } else {
            Err(Errno::EINVAL)
        };
        case(cat(&[w, b" ", a.display().as_bytes()]), want)
    });
    let path_nul = (verb.clone(), path_bytes(1..=40), path_bytes(1..=40))
        .prop_map(|((_, w), a, b)| case(cat(&[w, b" ", &a, b"\0", &b]), Err(Errno::EINVAL)));
    let bare = verb.prop_map(move |(bind, w)| case(w.to_vec(), Ok(mk(bind, None))));
    let listen_n =
        any::<i64>().prop_map(|n| case(format!("listen {n}").into_bytes(), Ok(Command::Listen(n))));
    let listen_bad = word_cases(
        b"listen",
        &[],
        &[
            b"-",
            b"+",
            b"abc",
            b"5x",
            b"5 6",
            b"0x10",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999999",
            b"1e3",
            b"\xff",
        ],
    );
    let listen_bare = Just(case(b"listen".to_vec(), Ok(Command::Listen(-1))));
    let shutdown = word_cases(
        b"shutdown",
        &[
            (Command::Shutdown(RCV_SHUTDOWN), &[b"rd", b"0"]),
            (Command::Shutdown(SEND_SHUTDOWN), &[b"wr", b"1"]),
            (Command::Shutdown(SHUTDOWN_MASK), &[b"rdwr", b"2"]),
        ],
        &[b"", b"3", b"RD", b"rd wr", b"wrrd"],
    );
    let passcred = word_cases(
        b"passcred",
        &[
            (Command::Passcred(true), &[b"on", b"1"]),
            (Command::Passcred(false), &[b"off", b"0"]),
        ],
        &[b"", b"yes", b"ON", b"on off"],
    );
    let unknown = prop::sample::select(vec![
        &b"Bind"[..],
        b"BIND",
        b"bin",
        b"binds",
        b"listenx",
        b"accept",
        b"close",
        b"send",
        b"@x",
        b"#",
        b"bind=x",
    ])
    .prop_map(|w| case(cat(&[w, b" x"]), Err(Errno::EINVAL)));
    let core = prop_oneof![
        4 => abstract_ok,
        1 => abstract_long,
        2 => abstract_broken,
        3 => path,
        1 => path_nul,
        1 => bare,
        2 => listen_n,
        2 => listen_bad,
        1 => listen_bare,
        2 => shutdown,
        2 => passcred,
        2 => unknown,
    ];
    // Blanks anywhere between words, before and after; a trailing CR.
    (core, ws(0), ws(1), ws(0), any::<bool>()).prop_map(|(c, lead, sep, trail, cr)| {
        let mut line = lead;
        match c.line.iter().position(|&b| b == b' ') {
            Some(i) => {
                line.extend_from_slice(&c.line[..i]);
                line.extend_from_slice(&sep);
                line.extend_from_slice(&c.line[i + 1..]);
            }
            None => line.extend_from_slice(&c.line),
        }
        line.extend_from_slice(&trail);
        if cr {
            line.push(b'\r');
        }
        Case { line, ..c }
    })
}

/// Near-valid command lines, each built with the answer it must get.
#[test]
fn ctl_parse_near_valid() {
    fuzz("ctl::parse, near-valid lines", ctl_case(), |c| {
        prop_assert_eq!(
            parse_ctl(&c.line),
            c.want,
            "line {:?}",
            String::from_utf8_lossy(&c.line)
        );
        Ok(())
    });
}

// ------------------------------------------------------------------ msg records

/// A record a writer may send: the header it means, the header line as
/// written (fields in any order, blanks anywhere) and the payload.
#[derive(Debug)]
struct Rec {
    header: SendHeader,
    line: Vec<u8>,
    payload: Vec<u8>,
}

fn copy_header(h: &SendHeader) -> SendHeader {
    SendHeader {
        len: h.len,
        to: h.to.clone(),
        creds: h.creds,
        rights: h.rights.clone(),
        oob: h.oob,
    }
}

// (SendHeader is not Clone)
impl Clone for Rec {
    fn clone(&self) -> Rec {
        Rec {
            header: copy_header(&self.header),
            line: self.line.clone(),
            payload: self.payload.clone(),
        }
    }
}

impl Rec {
    fn bytes(&self) -> Vec<u8> {
        cat(&[&self.line, b"\n", &self.payload])
    }
}

/// An address as a `to=` field can carry it: abstract names of any bytes
/// (escaped), paths of printable ASCII (a header is one UTF-8 line of
/// blank-separated fields).
fn some_addr() -> impl Strategy<Value = Addr> {
    let printable = vec(0x21u8..=0x7e, 1..=108).prop_filter("not abstract", |p| p[0] != b'@');
    prop_oneof![
        vec(any::<u8>(), 0..=107).prop_map(Addr::Abstract),
        printable.prop_map(Addr::Path),
    ]
}

fn record(max_payload: usize) -> impl Strategy<Value = Rec> {
    (
        vec(any::<u8>(), 0..=max_payload),
        prop::option::of(some_addr()),
        prop::option::of((any::<i32>(), 0..u32::MAX, 0..u32::MAX)),
        prop::option::of(vec(0u64..100_000, 0..=SCM_MAX_FD)),
    )
        .prop_flat_map(|(payload, to, creds, rights)| {
            let mut fields: Vec<Vec<u8>> = Vec::new();
            fields.push(format!("len={}", payload.len()).into_bytes());
            if let Some(a) = &to {
                fields.push(cat(&[b"to=", &addr_text(a)]));
            }
            if let Some((p, u, g)) = creds {
                fields.push(format!("creds={p}:{u}:{g}").into_bytes());
            }
            if let Some(r) = &rights {
                let list: Vec<String> = r.iter().map(u64::to_string).collect();
                fields.push(format!("rights={}", list.join(",")).into_bytes());
            }
            let header = SendHeader {
                len: payload.len(),
                to,
                creds: creds.map(|(pid, uid, gid)| Ucred { pid, uid, gid }),
                rights: rights.unwrap_or_default(),
                oob: false,
            };
            let n = fields.len();
            let order = Just((0..n).collect::<Vec<_>>()).prop_shuffle();
            (order, ws(0), vec(ws(1), n - 1), ws(0)).prop_map(move |(order, lead, seps, trail)| {
                let mut line = lead;
                for (k, &i) in order.iter().enumerate() {
                    if k > 0 {
                        line.extend_from_slice(&seps[k - 1]);
                    }
                    line.extend_from_slice(&fields[i]);
                }
                line.extend_from_slice(&trail);
                Rec {
                    header: copy_header(&header),
                    line,
                    payload: payload.clone(),
                }
            })
        })
}

/// What the daemon's `Assembler` must make of a whole stream, worked out in
/// one pass over it: where each whole record ends, and where the first bad
/// record becomes detectable (its header line complete, or MAX_HEADER bytes
/// without a newline) with the errno it gives.
struct Expected {
    ends: Vec<usize>,
    error: Option<(usize, Errno)>,
}

fn expect_stream(stream: &[u8]) -> Expected {
    let mut ends = Vec::new();
    let mut at = 0;
    loop {
        let rest = &stream[at..];
        let Some(nl) = rest.iter().take(MAX_HEADER).position(|&b| b == b'\n') else {
            let error = (rest.len() >= MAX_HEADER).then_some((at + MAX_HEADER, Errno::EINVAL));
            return Expected { ends, error };
        };
        let shows = at + nl + 1;
        let len = match msgfmt::parse_header(&rest[..nl]) {
            Ok(h) if h.len > msgfmt::MAX_RW_COUNT => Err(Errno::EMSGSIZE),
            Ok(h) => Ok(h.len),
            Err(e) => Err(e),
        };
        let len = match len {
            Ok(len) => len,
            Err(e) => {
                return Expected {
                    ends,
                    error: Some((shows, e)),
                };
            }
        };
        if stream.len() - shows < len {
            return Expected { ends, error: None };
        }
        at = shows + len;
        ends.push(at);
    }
}

/// Feeds `stream` to a fresh `Assembler` in `pieces` (one write each) and
/// checks every answer against `expect_stream`: each write returns exactly
/// the records it completes, whole and identical to the input; the write
/// that makes a bad record detectable fails with its errno and sends
/// nothing of itself; the next write starts afresh. Returns the records
/// that came out and the errnos the writes got.
fn feed(stream: &[u8], pieces: &[Vec<u8>]) -> Result<(Vec<u8>, Vec<Errno>), TestCaseError> {
    let mut a = Assembler::default();
    // Where the assembler last started afresh, and what it expects from there.
    let mut base = 0;
    let mut exp = expect_stream(stream);
    let mut sent = 0;
    let mut pos = 0;
    let (mut out, mut errors) = (Vec::new(), Vec::new());
    for piece in pieces {
        let end = pos + piece.len();
        let got = a.push(piece);
        match exp.error {
            Some((at, errno)) if base + at <= end => {
                prop_assert_eq!(
                    got.map(|r| r.len()),
                    Err(errno),
                    "the write {}..{} makes the bad record at {} whole",
                    pos,
                    end,
                    base + at
                );
                errors.push(errno);
                base = end;
                sent = end;
                exp = expect_stream(&stream[end..]);
            }
            _ => {
                let upto = exp
                    .ends
                    .iter()
                    .map(|e| base + e)
                    .filter(|&e| e <= end)
                    .max()
                    .unwrap_or(sent)
                    .max(sent);
                let got = got.map_err(|e| {
                    TestCaseError::fail(format!("write {pos}..{end} failed with {e}"))
                })?;
                prop_assert!(
                    got == stream[sent..upto],
                    "write {}..{} gave {} bytes, want the records in {}..{}",
                    pos,
                    end,
                    got.len(),
                    sent,
                    upto
                );
                whole_records(&got)?;
                out.extend_from_slice(&got);
                sent = upto;
            }
        }
        pos = end;
    }
    Ok((out, errors))
}

/// Any bytes, in any pieces: each write gets what `expect_stream` says,
/// never a panic; every record that comes out passes at most 253 sockets
/// and means the same when written back in canonical form.
#[test]
fn assembler_random_bytes() {
    // Mostly the bytes headers are made of, so that records do form.
    let byte = prop_oneof![
        3 => prop::sample::select(b"len=0123456789 \n@,:torightscreds".to_vec()),
        1 => any::<u8>(),
    ];
    let stream = after_one_of(
        &[
            b"",
            b"len=",
            b"len=0\n",
            b"len=3\n",
            b"len=0 ",
            b"len=1 to=@",
            b"len=0 rights=",
        ],
        byte,
    );
    let input = (stream, vec(0.0f64..1.0, 0..12));
    fuzz(
        "msgfmt::Assembler, random bytes in random pieces",
        input,
        |(stream, cuts)| {
            let (out, _) = feed(&stream, &chunks(&stream, &cuts))?;
            let mut at = 0;
            while at < out.len() {
                let (h, start, end) = msgfmt::record_at(&out, at)
                    .map_err(|e| TestCaseError::fail(format!("record at {at}: {e}")))?;
                prop_assert!(h.rights.len() <= SCM_MAX_FD);
                let mut line = format!("len={}", h.len).into_bytes();
                if let Some(a) = &h.to {
                    line.extend_from_slice(&cat(&[b" to=", &addr_text(a)]));
                }
                if let Some(c) = h.creds {
                    line.extend_from_slice(
                        format!(" creds={}:{}:{}", c.pid, c.uid, c.gid).as_bytes(),
                    );
                }
                let list: Vec<String> = h.rights.iter().map(u64::to_string).collect();
                line.extend_from_slice(format!(" rights={}\n", list.join(",")).as_bytes());
                let again = cat(&[&line, &out[start..end]]);
                let mut fresh = Assembler::default();
                prop_assert_eq!(
                    fresh.push(&again),
                    Ok(again.clone()),
                    "canonical form of {:?}",
                    String::from_utf8_lossy(&out[at..start])
                );
                let (h2, _, _) = msgfmt::record_at(&again, 0)
                    .map_err(|e| TestCaseError::fail(format!("canonical form: {e}")))?;
                prop_assert_eq!(h2, h);
                at = end;
            }
            Ok(())
        },
    );
}

/// One kind of damage to a valid record, with the errno it must give.
#[derive(Clone, Debug)]
enum Damage {
    LenPlus,
    LenMinus,
    NoLen,
    Unknown,
    BareWord,
    EmptyKey,
    TooManyRights(usize),
    CredsParts(usize),
    CredsNobodyMax,
    LenNotNumber,
    NoNewline,
    LongAbstract(usize),
    LongPath(usize),
    BrokenEscape,
    NotUtf8,
}

impl Damage {
    /// Damage to the framing, not the header: in a stream it cannot be
    /// told from a record still coming (or one followed by another).
    fn framing(&self) -> bool {
        matches!(self, Damage::LenPlus | Damage::LenMinus | Damage::NoNewline)
    }
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        Just(Damage::LenPlus),
        Just(Damage::LenMinus),
        Just(Damage::NoLen),
        Just(Damage::Unknown),
        Just(Damage::BareWord),
        Just(Damage::EmptyKey),
        (SCM_MAX_FD + 1..=400).prop_map(Damage::TooManyRights),
        prop::sample::select(vec![1usize, 2, 4, 5]).prop_map(Damage::CredsParts),
        Just(Damage::CredsNobodyMax),
        Just(Damage::LenNotNumber),
        Just(Damage::NoNewline),
        (108usize..=140).prop_map(Damage::LongAbstract),
        (109usize..=200).prop_map(Damage::LongPath),
        Just(Damage::BrokenEscape),
        Just(Damage::NotUtf8),
    ]
}

/// `r` with `d` done to it (always EINVAL).
fn damaged(r: &Rec, d: &Damage) -> Vec<u8> {
    let len = r.payload.len();
    // the header's fields but those starting with one of `drop`
    let fields = |drop: &[&str]| -> Vec<u8> {
        String::from_utf8_lossy(&r.line)
            .split_ascii_whitespace()
            .filter(|f| !drop.iter().any(|p| f.starts_with(p)))
            .collect::<Vec<_>>()
            .join(" ")
            .into_bytes()
    };
    let with = |extra: &[u8], len: usize| {
        let others = fields(&["len="]);
        cat(&[
            format!("len={len} ").as_bytes(),
            &others,
            b" ",
            extra,
            b"\n",
            &r.payload,
        ])
    };
    match d {
        Damage::LenPlus => with(b"", len + 1),
        Damage::LenMinus if len > 0 => with(b"", len - 1),
        Damage::LenMinus => cat(&[&r.line, b"\n", b"x"]),
        Damage::NoLen => cat(&[&fields(&["len="]), b"\n", &r.payload]),
        Damage::Unknown => with(b"flags=0", len),
        Damage::BareWord => with(b"oob", len),
        Damage::EmptyKey => with(b"=1", len),
        Damage::TooManyRights(n) => {
            let list: Vec<String> = (0..*n).map(|i| (i % 1000).to_string()).collect();
            cat(&[
                format!("len={len} ").as_bytes(),
                &fields(&["len=", "rights="]),
                format!(" rights={}\n", list.join(",")).as_bytes(),
                &r.payload,
            ])
        }
        Damage::CredsParts(n) => {
            let parts = ["1", "2", "3", "4", "5"][..*n].join(":");
            with(format!("creds={parts}").as_bytes(), len)
        }
        Damage::CredsNobodyMax => with(b"creds=1:4294967295:0", len),
        Damage::LenNotNumber => cat(&[format!("len={len}x\n").as_bytes(), &r.payload]),
        Damage::NoNewline => cat(&[&r.line, &r.payload])
            .into_iter()
            .filter(|&b| b != b'\n')
            .collect(),
        Damage::LongAbstract(n) => with(&cat(&[b"to=@", &vec![b'a'; *n]]), len),
        Damage::LongPath(n) => with(&cat(&[b"to=", &vec![b'p'; *n]]), len),
        Damage::BrokenEscape => with(b"to=@ab\\x4", len),
        Damage::NotUtf8 => with(b"to=\xff\xfe", len),
    }
}

/// Each kind of damage, written in any pieces, gets what the daemon must
/// give: damage to a header fails the write that completes the header line
/// with EINVAL; damage to the framing is a record still coming.
#[test]
fn assembler_damaged_records() {
    fuzz(
        "msgfmt::Assembler, damaged records in random pieces",
        (record(32), damage(), vec(0.0f64..1.0, 0..8)),
        |(r, d, cuts)| {
            let buf = damaged(&r, &d);
            let (_, errors) = feed(&buf, &chunks(&buf, &cuts))?;
            // (The payload after a refused header is read afresh, as
            // headers: it may fail again.)
            if !d.framing() {
                prop_assert_eq!(
                    errors.first(),
                    Some(&Errno::EINVAL),
                    "{:?}: {:?}",
                    d,
                    String::from_utf8_lossy(&buf[..buf.len().min(300)])
                );
            }
            Ok(())
        },
    );
}

/// Cuts `stream` at `cuts` (fractions of its length).
fn chunks(stream: &[u8], cuts: &[f64]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|f| (f * stream.len() as f64) as usize)
        .collect();
    at.push(0);
    at.push(stream.len());
    at.sort_unstable();
    at.windows(2).map(|w| stream[w[0]..w[1]].to_vec()).collect()
}

/// Checks that `out` is a run of whole records.
fn whole_records(out: &[u8]) -> Result<usize, TestCaseError> {
    let mut at = 0;
    let mut n = 0;
    while at < out.len() {
        let (_, _, end) = msgfmt::record_at(out, at).map_err(|e| {
            TestCaseError::fail(format!("output is not whole records at {at}: {e}"))
        })?;
        at = end;
        n += 1;
    }
    Ok(n)
}

/// The assembler keeps no part of a record: a fresh record comes back whole at
/// once (`failure` says what was left otherwise).
fn nothing_buffered(a: &mut Assembler, failure: &str) -> Result<(), TestCaseError> {
    let probe = b"len=2\nok";
    prop_assert_eq!(a.push(probe), Ok(probe.to_vec()), "{}", failure);
    Ok(())
}

/// Valid record streams, cut anywhere, come out exactly, in whole records
/// that mean what was written; nothing stays buffered.
#[test]
fn assembler_valid_streams() {
    let input = (vec(record(300), 0..8), vec(0.0f64..1.0, 0..12));
    fuzz(
        "msgfmt::Assembler, valid streams in random pieces",
        input,
        |(recs, cuts)| {
            let stream: Vec<u8> = recs.iter().flat_map(Rec::bytes).collect();
            let mut a = Assembler::default();
            let mut out = Vec::new();
            for piece in chunks(&stream, &cuts) {
                let got = a
                    .push(&piece)
                    .map_err(|e| TestCaseError::fail(format!("push failed: {e}")))?;
                whole_records(&got)?;
                out.extend_from_slice(&got);
            }
            prop_assert_eq!(out.len(), stream.len());
            prop_assert!(out == stream, "reassembled stream differs");
            prop_assert_eq!(whole_records(&out)?, recs.len());
            // Each record means what its writer meant.
            let mut at = 0;
            for r in &recs {
                let (h, start, end) = msgfmt::record_at(&out, at)
                    .map_err(|e| TestCaseError::fail(format!("record at {at}: {e}")))?;
                prop_assert_eq!(h, copy_header(&r.header));
                prop_assert!(out[start..end] == r.payload[..]);
                at = end;
            }
            let (model_out, errors) = feed(&stream, &chunks(&stream, &cuts))?;
            prop_assert!(model_out == stream && errors.is_empty());
            nothing_buffered(&mut a, "something stayed buffered")
        },
    );
}

/// A bad record in a stream: where its error shows, and which errno.
#[derive(Clone, Debug)]
enum Bad {
    /// A header that does not parse.
    Header(Vec<u8>),
    /// No newline within MAX_HEADER bytes (n bytes, then a newline).
    Endless(usize),
    /// len= past the longest record (MAX_RW_COUNT).
    TooBig(usize),
}

impl Bad {
    /// The bytes, how far into them the error shows, and the errno.
    fn shape(&self) -> (Vec<u8>, usize, Errno) {
        match self {
            Bad::Header(h) => (cat(&[h, b"\npayload"]), h.len() + 1, Errno::EINVAL),
            Bad::Endless(n) => (cat(&[&vec![b'a'; *n], b"\n"]), MAX_HEADER, Errno::EINVAL),
            Bad::TooBig(n) => {
                let h = format!("len={n}\n").into_bytes();
                let l = h.len();
                (cat(&[&h, b"xyz"]), l, Errno::EMSGSIZE)
            }
        }
    }
}

fn bad() -> impl Strategy<Value = Bad> {
    prop_oneof![
        prop::sample::select(vec![
            &b"bogus"[..],
            b"len=abc",
            b"len=-1",
            b"len=1 creds=1:2",
            b"len=0 to=@\\xZZ",
            b"",
            b"len=0 rights=1,x",
            b"len=0 \xff",
        ])
        .prop_map(|h| Bad::Header(h.to_vec())),
        (MAX_HEADER..MAX_HEADER + 2000).prop_map(Bad::Endless),
        (msgfmt::MAX_RW_COUNT + 1..msgfmt::MAX_RW_COUNT + 100_000).prop_map(Bad::TooBig),
        Just(Bad::TooBig(usize::MAX)),
    ]
}

/// A stream with a bad record fails exactly at the write that makes the bad
/// header whole (or overlong), with EINVAL or EMSGSIZE; the records before it
/// that earlier writes completed came out; nothing of it stays buffered.
#[test]
fn assembler_bad_streams() {
    let input = (
        vec(record(100), 0..5),
        bad(),
        vec(record(20), 0..3),
        vec(0.0f64..1.0, 0..12),
    );
    fuzz(
        "msgfmt::Assembler, streams with a bad record",
        input,
        |(good, bad, after, cuts)| {
            let prefix: Vec<u8> = good.iter().flat_map(Rec::bytes).collect();
            let (bad_bytes, shows_at, errno) = bad.shape();
            let stream = cat(&[
                &prefix,
                &bad_bytes,
                &after.iter().flat_map(Rec::bytes).collect::<Vec<_>>(),
            ]);
            let detect = prefix.len() + shows_at;
            let mut a = Assembler::default();
            let mut out = Vec::new();
            let mut pos = 0;
            let mut failed = false;
            let mut log = Vec::new();
            for piece in chunks(&stream, &cuts) {
                let end = pos + piece.len();
                let res = a.push(&piece);
                log.push(format!("{pos}..{end}: {:?}", res.as_ref().map(Vec::len)));
                if end >= detect {
                    prop_assert_eq!(
                        res.map(|_| ()),
                        Err(errno),
                        "{:?}: the write covering {}..{} (error shows at {})",
                        bad,
                        pos,
                        end,
                        detect
                    );
                    failed = true;
                    // what came out: the good records completed before this write
                    let mut want = 0;
                    for r in &good {
                        let l = r.bytes().len();
                        if want + l > pos {
                            break;
                        }
                        want += l;
                    }
                    prop_assert!(
                        out == prefix[..want],
                        "records out before the failure: {} bytes, want {}; bad record at {}; writes: {}",
                        out.len(),
                        want,
                        prefix.len(),
                        log.join(", ")
                    );
                    break;
                }
                let got = res.map_err(|e| {
                    TestCaseError::fail(format!(
                        "{e} at {pos}..{end}, before the bad record ({detect})"
                    ))
                })?;
                out.extend_from_slice(&got);
                pos = end;
            }
            prop_assert!(failed, "the bad record was never reported");
            nothing_buffered(&mut a, "garbage stayed buffered after the error")
        },
    );
}

// ------------------------------------------------------------------ addresses

/// Abstract names of any bytes up to 107 survive display and parse, also
/// inside a ctl command; longer ones are refused.
#[test]
fn abstract_names_round_trip() {
    fuzz(
        "Addr::parse(display), abstract names",
        vec(any::<u8>(), 0..=140),
        |name| {
            let a = Addr::Abstract(name.clone());
            let shown = a.display();
            prop_assert!(
                !shown.bytes().any(|b| b.is_ascii_whitespace()),
                "display {:?} has blanks",
                shown
            );
            if name.len() <= 107 {
                prop_assert_eq!(Addr::parse(shown.as_bytes()), Ok(a.clone()));
                prop_assert_eq!(
                    parse_ctl(format!("connect {shown}").as_bytes()),
                    Ok(Command::Connect(Some(a)))
                );
            } else {
                prop_assert_eq!(Addr::parse(shown.as_bytes()), Err(Errno::EINVAL));
            }
            Ok(())
        },
    );
}

/// A path up to 108 bytes (any bytes but NUL) that parses survives display
/// and parse: what status files show as `local=`/`peer=` names the same
/// socket when given back to `connect`.
#[test]
fn paths_round_trip() {
    let byte = prop_oneof![
        4 => prop::sample::select(b"abcxyz./-_".to_vec()),
        1 => 1u8..=255,
    ];
    let input = vec(byte, 1..=108).prop_filter("not abstract", |p| p[0] != b'@');
    fuzz("Addr::parse(display), paths", input, |p| {
        let a = Addr::Path(p.clone());
        let shown = a.display();
        prop_assert_eq!(
            Addr::parse(shown.as_bytes()),
            Ok(a.clone()),
            "path {:?} shows as {:?}",
            String::from_utf8_lossy(&p),
            shown
        );
        Ok(())
    });
}

// ------------------------------------------------------------------ the list

/// A row of `malformed_forms`' tables: `input` is refused with EINVAL.
fn einval<T>(input: impl Into<Vec<u8>>) -> (Vec<u8>, Result<T, Errno>) {
    (input.into(), Err(Errno::EINVAL))
}

/// Malformed (and borderline) inputs worth remembering, with what each gives.
#[test]
fn malformed_forms() {
    let long = |c: u8, n: usize| vec![c; n];
    let rights = |n: usize| {
        let l: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
        format!("len=0 rights={}\n", l.join(","))
    };
    let ctl_cases: Vec<(Vec<u8>, Result<Command, Errno>)> = vec![
        einval(b"bind @\\x4"),
        einval(b"bind @\\x"),
        einval(b"bind @\\"),
        einval(b"bind @\\q"),
        einval(b"bind @\\xZZ"),
        // "\x+1" is not two hex digits (u8::from_str_radix would take it as 1)
        einval(b"bind @\\x+1"),
        (
            b"bind @\\x00".to_vec(),
            Ok(Command::Bind(Some(Addr::Abstract(vec![0])))),
        ),
        (
            b"bind @".to_vec(),
            Ok(Command::Bind(Some(Addr::Abstract(vec![])))),
        ),
        einval(b"bind a\0b"),
        (
            cat(&[b"bind ", &long(b'p', 108)]),
            Ok(Command::Bind(Some(Addr::Path(long(b'p', 108))))),
        ),
        einval(cat(&[b"bind ", &long(b'p', 109)])),
        (
            cat(&[b"connect @", &long(b'n', 107)]),
            Ok(Command::Connect(Some(Addr::Abstract(long(b'n', 107))))),
        ),
        einval(cat(&[b"connect @", &long(b'n', 108)])),
        einval(b"listen -"),
        (b"listen -5".to_vec(), Ok(Command::Listen(-5))),
        einval(b"listen 9223372036854775808"),
        einval(b"listen 5 6"),
        (b"listen\t\t7\r".to_vec(), Ok(Command::Listen(7))),
        einval(b"shutdown"),
        einval(b"shutdown 3"),
        einval(b"passcred"),
        einval(b"passcred yes"),
        einval(b"BIND x"),
        einval(b""),
        einval(b"\xff\xfe"),
        einval(long(b'x', 1 << 20)),
    ];
    let mut bad = Vec::new();
    println!("ctl::parse:");
    for (line, want) in &ctl_cases {
        let got = parse_ctl(line);
        let shown = String::from_utf8_lossy(&line[..line.len().min(60)]).into_owned();
        println!(
            "  {:<64} {:?}",
            format!("{shown:?}"),
            got.as_ref().map_err(|e| *e)
        );
        if &got != want {
            bad.push(format!("ctl::parse({shown:?}) = {got:?}, want {want:?}"));
        }
    }

    let mut header_4095 = b"len=0".to_vec();
    header_4095.resize(MAX_HEADER - 1, b' ');
    header_4095.push(b'\n');
    let mut header_4096 = header_4095.clone();
    header_4096.insert(0, b' ');
    let rec_cases: Vec<(Vec<u8>, Result<usize, Errno>)> = vec![
        einval(b"len=abc\n"),
        einval(b"len=-1\n"),
        einval(b"len=\n"),
        einval(b"len=99999999999999999999999\n"),
        // a header line or payload still coming: nothing out yet, no error
        (b"len=0".to_vec(), Ok(0)),
        (b"len=5\nabc".to_vec(), Ok(0)),
        // a field given twice is refused: a record must not mean two things
        einval(b"len=1 len=2\nab"),
        einval(b"to=@x\n"),
        einval(b"len=0 oob\n"),
        einval(b"len=0 =1\n"),
        einval(b"len=0 creds=1:2\n"),
        einval(b"len=0 creds=1:2:3:4\n"),
        einval(b"len=0 creds=1:4294967295:0\n"),
        einval(b"len=0 creds=a:0:0\n"),
        einval(b"len=0 rights=1,x\n"),
        einval(b"len=0 rights=-1\n"),
        (rights(253).into_bytes(), Ok(rights(253).len())),
        einval(rights(254).into_bytes()),
        (
            cat(&[b"len=0 to=@", &long(b'n', 107), b"\n"]),
            Ok(b"len=0 to=@\n".len() + 107),
        ),
        einval(cat(&[b"len=0 to=@", &long(b'n', 108), b"\n"])),
        einval(cat(&[b"len=0 to=", &long(b'p', 109), b"\n"])),
        einval(b"len=0 to=\xff\n"),
        (header_4095.clone(), Ok(MAX_HEADER)),
        einval(header_4096),
        einval(long(b'a', 5000)),
    ];
    println!("msgfmt::Assembler::push, one write (bytes out):");
    for (buf, want) in &rec_cases {
        let got = Assembler::default().push(buf).map(|out| out.len());
        let shown = String::from_utf8_lossy(&buf[..buf.len().min(60)]).into_owned();
        println!("  {:<64} {:?}", format!("{shown:?}"), got);
        if &got != want {
            bad.push(format!("push({shown:?}) = {got:?}, want {want:?}"));
        }
    }

    type AsmCase = (&'static str, Vec<Vec<u8>>, Result<Vec<u8>, Errno>);
    let asm_cases: Vec<AsmCase> = vec![
        (
            "4096 header bytes without a newline",
            vec![long(b'a', MAX_HEADER)],
            Err(Errno::EINVAL),
        ),
        (
            "4095 header bytes without a newline, so far",
            vec![long(b'a', MAX_HEADER - 1)],
            Ok(vec![]),
        ),
        (
            "len=MAX_RW_COUNT+1",
            vec![format!("len={}\n", msgfmt::MAX_RW_COUNT + 1).into_bytes()],
            Err(Errno::EMSGSIZE),
        ),
        (
            "len=MAX_RW_COUNT, payload to come",
            vec![format!("len={}\n", msgfmt::MAX_RW_COUNT).into_bytes()],
            Ok(vec![]),
        ),
        (
            "len=2^64-1",
            vec![format!("len={}\n", usize::MAX).into_bytes()],
            Err(Errno::EMSGSIZE),
        ),
        (
            "a good record then garbage in one write",
            vec![b"len=1\nxbogus\n".to_vec()],
            Err(Errno::EINVAL),
        ),
        (
            "header split in two writes",
            vec![b"len".to_vec(), b"=3 to=@x\nabc".to_vec()],
            Ok(b"len=3 to=@x\nabc".to_vec()),
        ),
        (
            "254 rights",
            vec![rights(254).into_bytes()],
            Err(Errno::EINVAL),
        ),
    ];
    println!("msgfmt::Assembler::push:");
    for (what, pieces, want) in &asm_cases {
        let mut a = Assembler::default();
        let mut got = Ok(Vec::new());
        for p in pieces {
            got = a.push(p);
            if got.is_err() {
                break;
            }
        }
        println!(
            "  {:<64} {:?}",
            what,
            got.as_ref()
                .map(|v| String::from_utf8_lossy(v).into_owned())
        );
        if &got != want {
            bad.push(format!("Assembler: {what}: got {got:?}, want {want:?}"));
        }
    }
    println!(
        "{} malformed forms checked",
        ctl_cases.len() + rec_cases.len() + asm_cases.len()
    );
    assert!(
        bad.is_empty(),
        "malformed forms with the wrong answer:\n{}",
        bad.join("\n")
    );
}
