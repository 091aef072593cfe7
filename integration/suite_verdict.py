# suite_verdict.py: the verdict of a run_*_tests script, someone else's test suite run on
# kernel sockets and through udsfs (each way a "pass"): every test that passes on the
# kernel passes in every pass, or an exceptions line (lib.sh exceptions_listed) lists it
# for that pass; a line that no longer applies is stale, and so an error too.
import sys


def listed_lines(path):
    """The exceptions: (set of passes, entry) a line, an entry a test's name or
    BINARY::* for every test of a binary."""
    return [(set(p.split(",")), e) for p, e in (l.split() for l in open(path))]


def verdict(kernel, passes, listed, failure_lines, least=70):
    """kernel: {test: status}; passes: {pass: {test: status}} ("ok" a success);
    failure_lines(pass, test): what to show of a test that failed unlisted. Exits
    with the reasons when anything is wrong."""
    passed = sorted(t for t, s in kernel.items() if s == "ok")
    counts = {s: sum(v == s for v in kernel.values()) for s in sorted(set(kernel.values()))}
    print(f"kernel: {len(kernel)} run: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    bad = []
    if len(passed) < least:
        bad.append(f"kernel: only {len(passed)} tests passed")
    for t, s in sorted(kernel.items()):
        if s != "ok":
            print(f"    kernel: {t}: {s}")
    for p, got in passes.items():
        mine = {e for ps, e in listed if p in ps}

        def covers(t):
            return t in mine or f"{t.split('::')[0]}::*" in mine

        print(f"{p}: {sum(got.get(t) == 'ok' for t in passed)} of {len(passed)} kernel passes "
              f"pass through udsfs; {len(mine)} listed for {p}")
        for t in passed:
            st = got.get(t, "none")
            if st == "ok":
                continue
            if covers(t):
                print(f"    {p}: {t}: {st} (listed)")
                continue
            bad.append(f"{p}: {t} passes on the kernel, {st} through udsfs, not listed")
            print(f"--- {p}: {t}:\n    " + "\n    ".join(failure_lines(p, t)), file=sys.stderr)
        for e in sorted(mine):
            hit = [t for t in kernel if t == e or (e.endswith("::*") and t.startswith(e[:-1]))]
            if not hit:
                bad.append(f"{p}: listed {e} ran neither there nor on the kernel (remove or rename the line)")
            elif all(got.get(t) == "ok" for t in hit):
                bad.append(f"{p}: listed {e} passes now (remove the line, or {p} from it)")
    if bad:
        sys.exit("FAIL: " + "\n      ".join(bad))
