# checks.py — the tally the torchrun workers keep: expect() counts a check and records a failure, and
# report() prints "<name> rank R: K checks, F failed" (the line test_torch.py reads) with each failure.
# Used by trainer_tools.py and parallelism.py; tested through them (test_torch.py).
checks, failures = 0, []


def expect(what, ok):
    global checks
    checks += 1
    if not ok:
        failures.append(what)


def report(name, me):
    """Prints the tally; the exit status a worker ends with: 1 on any failure."""
    for f in failures:
        print(f"  {name} rank {me} FAIL {f}", flush=True)
    print(f"{name} rank {me}: {checks} checks, {len(failures)} failed", flush=True)
    return 1 if failures else 0
