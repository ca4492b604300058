"""donelog: each test's verdict written down the moment it ends, so that a pytest run whose nested VM wedges
or dies (scripts/nested-kvm.md "Known problems") still tells what it finished; scripts/check.sh runs the rest.

As a pytest plugin (tests/integration/conftest.py calls these hooks), driven by the environment:
  BRISK_DONE_LOG   append "<outcome>\\t<nodeid>\\t<seconds>" for each finished test (fsynced: the file is on the
                   nested VM's 9p share) and write the collected node ids to BRISK_DONE_LOG.collected
  BRISK_SELECT     a file of node ids, one per line: run only these
  BRISK_DESELECT   a file of node ids: run all but these

As a program:
  donelog.py verdict FAILED_OUT COLLECTED LOG...
      merges the logs (a later log's verdict on a test replaces an earlier one's); prints
      "N passed, N failed, N skipped" and writes the node ids that failed, or never finished, to FAILED_OUT
  donelog.py done LOG...
      prints the node ids the logs have a verdict for
"""
import os
import sys


def _ids(path):
    with open(path) as f:
        return {line.strip() for line in f if line.strip()}


def _append(path, line):
    with open(path, "a") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def collection_modifyitems(config, items):
    """Applies BRISK_SELECT / BRISK_DESELECT, then records what remains collected."""
    keep = _ids(os.environ["BRISK_SELECT"]) if os.environ.get("BRISK_SELECT") else None
    drop = _ids(os.environ["BRISK_DESELECT"]) if os.environ.get("BRISK_DESELECT") else set()
    if keep is not None or drop:
        chosen, gone = [], []
        for i in items:
            (chosen if (keep is None or i.nodeid in keep) and i.nodeid not in drop else gone).append(i)
        if gone:
            config.hook.pytest_deselected(items=gone)
            items[:] = chosen
    log = os.environ.get("BRISK_DONE_LOG")
    if log:
        with open(log + ".collected", "w") as f:
            f.write("".join(i.nodeid + "\n" for i in items))


def runtest_logreport(report):
    """One line per test: its setup when that did not pass, its call, a failed teardown."""
    log = os.environ.get("BRISK_DONE_LOG")
    if not log:
        return
    if report.when == "call" or (report.when == "setup" and not report.passed) or \
            (report.when == "teardown" and report.failed):
        _append(log, f"{report.outcome}\t{report.nodeid}\t{report.duration:.2f}\n")


def _verdicts(logs):
    """{nodeid: outcome}: within one log, failed beats skipped beats passed; a later log replaces."""
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    final = {}
    for path in logs:
        if not os.path.exists(path):
            continue
        run = {}
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 3 or parts[0] not in rank:
                    continue  # a line cut short when the VM died
                outcome, nodeid = parts[0], parts[1]
                if rank[outcome] >= rank[run.get(nodeid, "passed")]:
                    run[nodeid] = outcome
        final.update(run)
    return final


def main(argv):
    if len(argv) >= 4 and argv[1] == "verdict":
        failed_out, collected, logs = argv[2], argv[3], argv[4:]
        final = _verdicts(logs)
        unfinished = _ids(collected) - set(final) if os.path.exists(collected) else set()
        failed = sorted({n for n, o in final.items() if o == "failed"} | unfinished)
        with open(failed_out, "w") as f:
            f.write("".join(n + "\n" for n in failed))
        n = {o: sum(1 for v in final.values() if v == o) for o in ("passed", "skipped")}
        print(f"{n['passed']} passed, {len(failed)} failed, {n['skipped']} skipped"
              + (f" ({len(unfinished)} never finished)" if unfinished else ""))
        return 0
    if len(argv) >= 2 and argv[1] == "done":
        print("".join(n + "\n" for n in sorted(_verdicts(argv[2:]))), end="")
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
