#!/usr/bin/env python3
"""One host of the chaos soak (Scripts/soak.sh): a long-lived process on libplugind, through the
Python package, that launches the plugins of one extension point over and over while the driver
changes decisions, installs, updates and kills things around it.

Each round: take the Monitor's latest state, pick one of its plugins, start it, send it one to
three requests (a random size each; the host's default deadline for the echoes, whose deadline
the driver holds to, 2 s for the hostile plugins, so that a hang costs a round 2 s) and end it.
The outcome of every round is counted per plugin: "ok" when every reply came back right, else
the code of the typed error (plugind.Error.code); timeouts whose reason says the machine was busy
are counted apart too. Anything else -- an exception that is not a plugind.Error, a failure
without an error, an echo that came back changed -- is a violation, written out in full.

About once a second the host prints one JSON line on standard output: its counts, violations and
what it holds (descriptors, threads, resident memory), which the driver reads to check for
growth. SIGUSR1 stops its rounds (it then only follows
the Monitor and reports what it lists, for the driver's final check); SIGTERM ends it after the
round in progress.

  host.py POINT SEED
"""

import json
import os
import random
import select
import signal
import sys
import time

import plugind

# Plugins that answer every request with the request's own bytes.
ECHOES = ("org.plugind.soak.echo-a", "org.plugind.soak.echo-b")


def descriptor_kinds():
    """How many descriptors of each kind this process holds ("pipe", "anon_inode:[pidfd]", a path...)."""
    kinds = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + name)
        except OSError:
            continue
        kind = target.split(":[")[0] if ":[" in target and not target.startswith("anon_inode") else target
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def holdings():
    """Descriptors, threads and resident memory (KiB) of this process."""
    descriptors = len(os.listdir("/proc/self/fd"))
    threads = len(os.listdir("/proc/self/task"))
    with open("/proc/self/statm") as statm:
        resident_pages = int(statm.read().split()[1])
    return descriptors, threads, resident_pages * os.sysconf("SC_PAGE_SIZE") // 1024


def one_round(identity, rng):
    """The outcome of starting `identity`, sending it requests and ending it: "ok" or an error code."""
    with plugind.Process(identity) as process:
        with process.connect() as connection:
            for _ in range(rng.randint(1, 3)):
                size = rng.choice((0, 1, 64, 4096, 65536, 1 << 20))
                request = rng.randbytes(size)
                reply = connection.send(request, timeout=None if identity.bundle_identifier in ECHOES else 2.0)
                if identity.bundle_identifier in ECHOES and reply != request:
                    raise AssertionError(
                        "%s answered %d bytes to a %d-byte request, not the same bytes" % (identity.bundle_identifier, len(reply), size)
                    )
    return "ok"


def main():
    point, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    stopping = []
    quiet = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGUSR1, lambda *_: quiet.append(True))
    monitor = plugind.Monitor(point)
    outcomes = {}
    examples = {}  # identifier -> error code -> the first message with that code
    busy_timeouts = {}  # identifier -> timeouts whose reason says the machine was busy
    violations = []  # the first 50 in full; `violationCount` counts them all
    violation_count = 0
    rounds = 0
    last_report = 0.0
    while not stopping:
        monitor.update()
        identities = monitor.identities
        if identities and not quiet:
            identity = rng.choice(identities)
            problem = None
            try:
                outcome = one_round(identity, rng)
            except plugind.Error as error:
                outcome = error.code
                examples.setdefault(identity.bundle_identifier, {}).setdefault(outcome, error.message)
                if outcome == "timedOut" and "the machine was busy" in error.message:
                    busy_timeouts[identity.bundle_identifier] = busy_timeouts.get(identity.bundle_identifier, 0) + 1
                    examples[identity.bundle_identifier].setdefault("timedOut (the machine was busy)", error.message)
                if error.message == "libplugind reported a failure without an error":
                    problem = "a failure without an error"
            except Exception as error:  # every failure must be a plugind.Error: anything else is a finding
                problem = "%s: %s" % (type(error).__name__, error)
            if problem is not None:
                outcome = "untyped"
                violation_count += 1
                if len(violations) < 50:
                    violations.append("%s: %s" % (identity.bundle_identifier, problem))
            per_plugin = outcomes.setdefault(identity.bundle_identifier, {})
            per_plugin[outcome] = per_plugin.get(outcome, 0) + 1
            rounds += 1
        else:
            # Nothing usable, or quiet: wait for the Monitor to say something changed (at most a
            # second, the reports' pace).
            select.select([monitor.fileno()], [], [], 1.0)
        now = time.monotonic()
        if now - last_report >= 1.0 or stopping:
            last_report = now
            descriptors, threads, resident = holdings()
            report = {
                "pid": os.getpid(),
                "rounds": rounds,
                "identities": sorted(identity.bundle_identifier for identity in identities),
                "outcomes": outcomes,
                "examples": examples,
                "busyTimeouts": busy_timeouts,
                "violations": violations,
                "violationCount": violation_count,
                "descriptors": descriptors,
                "threads": threads,
                "residentKiB": resident,
                "descriptorKinds": descriptor_kinds(),
            }
            print(json.dumps(report), flush=True)
    monitor.close()


if __name__ == "__main__":
    main()
