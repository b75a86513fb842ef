#!/usr/bin/env python3
"""The chaos soak (Scripts/soak.sh runs it; see there for how). In a directory of its own:

- HOSTS long-lived host processes (Scripts/soak/host.py, on libplugind through the Python
  package) launch a mix of good and hostile plugins of one extension point, round after round;
- the driver, meanwhile, as the owner at a shell: approves, disables, enables and revokes
  plugins, installs, updates (`install --force` of another build) and uninstalls them, all with
  the `plugind` CLI; and kills workers, launchers and hosts (SIGKILL) at random.

Invariants, checked all along and at the end (each breach is a violation, printed in full):
- no host ends unless the driver killed it; every failure a host sees is a typed plugind.Error,
  and an echo comes back unchanged (host.py);
- a good plugin is never reported crashed, exited, over a limit, quarantined or timed out: the
  deaths the driver causes are not the plugin's (`workerKilled`), and it provokes no timeout of a
  good plugin, whose requests have the host's default deadline; with or without a CPU hog;
- the crash log (`plugind quarantine list --json`, read every 30 s and at the end) holds no crash
  record and no quarantine of a good plugin;
- with --cpu-hog, the hog runs from start to end;
- every CLI decision the model says is valid succeeds, every other one fails with a message, and
  none ends by a signal;
- no zombie among a live host's descendants lasts 5 s; nothing a killed host started outlives it
  by 10 s; nothing at all is left once the hosts are stopped;
- the first host (never killed) holds no more descriptors, threads or memory at the end than
  after its first minute, beyond the bounds below;
- at the end, `plugind list --all --json` shows each plugin in the state the applied decisions
  give, and every live host's Monitor lists exactly the available ones.

The summary also says whether a CPU hog ran and how busy the machine was: the load average over
one minute and the CPU pressure ("some avg10" of /proc/pressure/cpu), sampled every second.

  driver.py --minutes N --bin DIR --work DIR [--hosts K] [--seed S] [--json FILE]
            [--cpu-hog PGID --cpu-hog-command TEXT]
"""

import argparse
import json
import os
import random
import selectors
import shutil
import signal
import subprocess
import sys
import time

POINT = "org.plugind.soak.point"
# identifier -> the library product it is built from
GOOD = {"org.plugind.soak.echo-a": "Echo", "org.plugind.soak.echo-b": "Echo"}
HOSTILE = {
    "org.plugind.soak.segfault": "FaultySegfault",
    "org.plugind.soak.abort-at-load": "FaultyAbortAtLoad",
    "org.plugind.soak.hang": "FaultyHang",
    "org.plugind.soak.memory-hog": "FaultyMemoryHog",
    "org.plugind.soak.protocol-garbage": "FaultyProtocolGarbage",
    "org.plugind.soak.fork-bomb": "FaultyForkBomb",
}
PLUGINS = {**GOOD, **HOSTILE}
# What a good plugin may fail with while the driver works around it; anything else is its fault,
# which it never is. Not `timedOut`, with or without a CPU hog: the driver kills (SIGKILL, which is
# `workerKilled`) and never stops a worker, so it provokes no timeout of a good plugin, whose
# requests have the host's default deadline (30 s) for echoes that take milliseconds, and whose
# launches the default launch timeout (10 s). A timeout there is the host's deadline failing a
# well-behaved plugin: the finding the hog is there to provoke. A fault added that does provoke
# one (a SIGSTOP) must be allowed here by name.
GOOD_MAY_FAIL_WITH = {
    "workerKilled", "notApproved", "disabledByOwner", "bundleChanged", "notFound", "invalidated", "connectionClosed",
    "connectionRefused", "cancelled", "spawnFailed",
}
CRASH_LOG_SECONDS = 30
GROWTH_BOUNDS = {"descriptors": 16, "threads": 16, "residentKiB": 64 * 1024}
WARM_UP_SECONDS = 60
ZOMBIE_SECONDS = 5
ORPHAN_SECONDS = 10


def log(message):
    print("soak: " + message, file=sys.stderr, flush=True)


class Processes:
    """One reading of /proc: each process's parent, state, start time and command line."""

    def __init__(self):
        self.parent, self.state, self.start, self.children = {}, {}, {}, {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % name) as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid = int(name)
            self.state[pid], self.parent[pid], self.start[pid] = fields[0], int(fields[1]), int(fields[19])
            self.children.setdefault(self.parent[pid], []).append(pid)

    def descendants(self, pid):
        found, stack = [], list(self.children.get(pid, []))
        while stack:
            child = stack.pop()
            found.append(child)
            stack.extend(self.children.get(child, []))
        return found

    @staticmethod
    def command(pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as cmdline:
                return " ".join(part.decode(errors="replace") for part in cmdline.read().split(b"\0") if part) or "?"
        except OSError:
            return "?"

    @staticmethod
    def pidfd_holding(holder, pid):
        """Whether `holder` keeps a pidfd for `pid` (which tells a reap never attempted from one lost)."""
        try:
            for name in os.listdir("/proc/%d/fdinfo" % holder):
                try:
                    with open("/proc/%d/fdinfo/%s" % (holder, name)) as info:
                        if "Pid:\t%d\n" % pid in info.read():
                            return "its parent holds a pidfd for it (descriptor %s)" % name
                except OSError:
                    continue
        except OSError:
            return "its parent's descriptors could not be read"
        return "its parent holds no pidfd for it"

    @staticmethod
    def is_launcher(pid):
        """A launcher, or a spare or worker it forked (a fork keeps the launcher's command line)."""
        return "--launcher" in Processes.command(pid).split(" ")


class Model:
    """What the owner's decisions so far make of each plugin: installed build, and the policy."""

    def __init__(self):
        self.installed = {identifier: None for identifier in PLUGINS}  # None, 1 or 2
        # identifier -> {"state": "approved"|"disabled", "approval": build or None}
        self.policy = {}

    def expected_state(self, identifier):
        build = self.installed[identifier]
        if build is None:
            return None
        policy = self.policy.get(identifier)
        if policy is None:
            return "unapproved"
        if policy["state"] == "disabled":
            return "disabled"
        return "available" if policy["approval"] == build else "approval-outdated"

    def predict(self, verb, identifier):
        """Whether the command should succeed, and the model after it."""
        build, policy = self.installed[identifier], self.policy.get(identifier)
        if verb == "approve":
            return build is not None
        if verb == "disable":
            return True
        if verb == "enable":
            return policy is not None and policy["approval"] is not None
        if verb == "revoke":
            return policy is not None
        if verb.startswith("install"):  # install-1, install-2: refused over another build
            return build is None or build == int(verb[-1])
        if verb.startswith("update"):  # update-1, update-2: install --force, always
            return True
        if verb == "uninstall":
            return build is not None
        raise ValueError(verb)

    def apply(self, verb, identifier):
        build, policy = self.installed[identifier], self.policy.get(identifier)
        if verb == "approve":
            self.policy[identifier] = {"state": "approved", "approval": build}
        elif verb == "disable":
            self.policy[identifier] = {"state": "disabled", "approval": policy["approval"] if policy else None}
        elif verb == "enable":
            self.policy[identifier] = {"state": "approved", "approval": policy["approval"]}
        elif verb == "revoke":
            del self.policy[identifier]
        elif verb.startswith("install") or verb.startswith("update"):
            self.installed[identifier] = int(verb[-1])
        elif verb == "uninstall":
            self.installed[identifier] = None


class Interrupted(Exception):
    """SIGTERM: the soak is to end now (soak.sh sends it when it is itself ended)."""


class Host:
    def __init__(self, index, environment, selector, seed):
        self.index = index
        with open(os.path.join(environment["SOAK_WORK"], "host-%d.log" % index), "ab") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, os.path.join(os.path.dirname(__file__), "host.py"), POINT, str(seed)],
                stdout=subprocess.PIPE, stderr=log_file, env=environment,
            )
        os.set_blocking(self.process.stdout.fileno(), False)
        selector.register(self.process.stdout, selectors.EVENT_READ, self)
        self.started = time.monotonic()
        self.buffer = b""
        self.report = None
        self.baseline = None
        self.peak = {}
        self.killed = False

    def read(self):
        try:
            data = self.process.stdout.read()
        except BlockingIOError:
            return
        if not data:
            return
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            self.report = json.loads(line)
            if self.baseline is None and time.monotonic() - self.started >= WARM_UP_SECONDS:
                self.baseline = dict(self.report)
            if self.baseline is not None:
                for key in GROWTH_BOUNDS:
                    self.peak[key] = max(self.peak.get(key, 0), self.report[key])


class Soak:
    def __init__(self, arguments):
        self.arguments = arguments
        self.rng = random.Random(arguments.seed)
        self.work = arguments.work
        self.bin = arguments.bin
        self.model = Model()
        self.violations = []
        self.counts = {}
        self.cli_failures = {}
        self.selector = selectors.DefaultSelector()
        self.hosts = []
        self.finished_hosts = []
        self.zombies = {}  # (pid, start) -> first seen
        self.commands = {}  # (pid, start) -> its command line, read while it ran
        self.orphan_checks = []  # (deadline, [(pid, start)], what)
        self.environment = self.make_environment()
        self.load_samples = []  # the load average over one minute, every second
        self.pressure_samples = []  # CPU pressure "some avg10", every second, where the kernel has it
        self.hog_ended_after = None  # seconds into the soak, if the hog ended early
        self.started = None
        self.crash_log = {}  # identifier -> {"crashes": n, "quarantined": bool}, as last read
        self.crash_log_reported = set()

    # --- set-up

    def make_environment(self):
        work = self.work
        for directory in ("config", "state", "data", "admin", "points", "run", "path", "home"):
            os.makedirs(os.path.join(work, directory), exist_ok=True)
        repository = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        environment = dict(os.environ)
        environment.update(
            HOME=os.path.join(work, "home"),
            XDG_CONFIG_HOME=os.path.join(work, "config"),
            XDG_STATE_HOME=os.path.join(work, "state"),
            XDG_DATA_HOME=os.path.join(work, "data"),
            PLUGIND_ADMIN_POLICY_DIR=os.path.join(work, "admin"),
            PLUGIND_EXTENSION_POINTS_PATH=os.path.join(work, "points"),
            PLUGIND_RUNTIME_DIR=os.path.join(work, "run"),
            PLUGIND_PATH=os.path.join(work, "path"),
            PLUGIND_LOG="file",
            PLUGIND_MEMORY_LIMIT=str(256 << 20),
            PLUGIND_WORKER=os.path.join(self.bin, "plugind-worker"),
            PLUGIND_LIBRARY=os.path.join(self.bin, "libPlugindHost.so"),
            PYTHONPATH=os.path.join(repository, "Bindings", "Python", "src"),
            PYTHONDONTWRITEBYTECODE="1",
            PATH=self.bin + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
            SOAK_WORK=work,
        )
        return environment

    def source(self, identifier, build):
        """The bundle `plugind install` takes for this build of the plugin (made once)."""
        name = identifier.rsplit(".", 1)[1]
        bundle = os.path.join(self.work, "sources", "%s-%d" % (name, build), name + ".appex")
        if not os.path.isdir(bundle):
            os.makedirs(bundle)
            product = PLUGINS[identifier]
            manifest = {
                "manifestVersion": 1, "identifier": identifier, "name": name, "version": "%d.0.0" % build,
                "extensionPoint": POINT, "library": "lib%s.so" % product,
            }
            with open(os.path.join(bundle, "manifest.json"), "w") as file:
                json.dump(manifest, file, indent=2)
            shutil.copy(os.path.join(self.bin, "lib%s.so" % product), bundle)
            os.chmod(bundle, 0o755)
        return bundle

    # --- the owner's commands

    def plugind(self, *arguments):
        result = subprocess.run(
            ["plugind", *arguments], env=self.environment, capture_output=True, text=True, timeout=120,
        )
        return result.returncode, result.stdout, result.stderr

    def decide(self, verb, identifier):
        expected = self.model.predict(verb, identifier)
        if verb == "approve":
            arguments = ["approve", identifier, "--yes"]
        elif verb.startswith("install") or verb.startswith("update"):
            arguments = ["install", self.source(identifier, int(verb[-1]))] + (["--force"] if verb.startswith("update") else [])
        else:
            arguments = [verb, identifier]
        status, _, stderr = self.plugind(*arguments)
        self.count("decisions." + verb.split("-")[0])
        if status < 0 or status >= 128:
            self.violation("plugind %s ended with status %d: %s" % (" ".join(arguments), status, stderr.strip()))
        elif status == 0 and not expected:
            self.violation("plugind %s succeeded where the model expected a refusal" % " ".join(arguments))
            self.model.apply(verb, identifier)
        elif status != 0 and expected:
            self.violation("plugind %s failed (%d): %s" % (" ".join(arguments), status, stderr.strip()))
        elif status != 0:
            if not stderr.strip():
                self.violation("plugind %s failed without a message" % " ".join(arguments))
            first = stderr.strip().splitlines()[0] if stderr.strip() else ""
            self.cli_failures.setdefault(verb, first)
        else:
            self.model.apply(verb, identifier)

    def clear_quarantine(self, identifier):
        """The owner clears a quarantine (so that the crashing plugins keep being launched rather
        than refused for the rest of the run). Not part of the model: it succeeds or fails with a
        message, never by a signal."""
        status, _, stderr = self.plugind("quarantine", "clear", identifier)
        self.count("decisions.quarantine clear")
        if status < 0 or status >= 128 or (status != 0 and not stderr.strip()):
            self.violation("plugind quarantine clear %s ended with status %d: %s" % (identifier, status, stderr.strip()))

    # --- faults

    def kill_descendant(self, launchers):
        living = [host for host in self.hosts if host.process.poll() is None]
        if not living:
            return
        host = self.rng.choice(living)
        processes = Processes()
        candidates = [pid for pid in processes.descendants(host.process.pid) if Processes.is_launcher(pid) == launchers]
        if not candidates:
            return
        try:
            os.kill(self.rng.choice(candidates), signal.SIGKILL)
            self.count("faults.launcher killed" if launchers else "faults.worker killed")
        except ProcessLookupError:
            pass

    def kill_host(self):
        # The first host is never killed: it is the one whose growth is measured.
        killable = [host for host in self.hosts[1:] if host.process.poll() is None]
        if not killable:
            return
        host = self.rng.choice(killable)
        processes = Processes()
        left = [(pid, processes.start[pid]) for pid in processes.descendants(host.process.pid)]
        host.killed = True
        host.process.kill()
        self.count("faults.host killed")
        self.orphan_checks.append((time.monotonic() + ORPHAN_SECONDS, left, "host %d (pid %d)" % (host.index, host.process.pid)))

    # --- bookkeeping

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def violation(self, what):
        log("VIOLATION: " + what)
        self.violations.append(what)

    def read_hosts(self, timeout):
        for key, _ in self.selector.select(timeout):
            key.data.read()

    def tend_hosts(self):
        for index, host in enumerate(self.hosts):
            status = host.process.poll()
            if status is None:
                continue
            host.read()
            self.selector.unregister(host.process.stdout)
            host.process.stdout.close()
            if not host.killed:
                self.violation("host %d (pid %d) ended by itself with status %d; see %s/host-%d.log" % (
                    host.index, host.process.pid, status, self.work, host.index))
            self.finished_hosts.append(host)
            self.hosts[index] = Host(host.index, self.environment, self.selector, self.rng.randrange(1 << 30))

    def check_processes(self):
        now = time.monotonic()
        processes = Processes()
        seen = set()
        for host in self.hosts:
            if host.process.poll() is not None:
                continue
            for pid in processes.descendants(host.process.pid):
                if processes.state.get(pid) != "Z" and (pid, processes.start[pid]) not in self.commands:
                    self.commands[(pid, processes.start[pid])] = Processes.command(pid)
                if processes.state.get(pid) == "Z":
                    key = (pid, processes.start[pid])
                    seen.add(key)
                    first = self.zombies.setdefault(key, now)
                    if now - first >= ZOMBIE_SECONDS and first != -1:
                        parent = processes.parent.get(pid)
                        self.violation("a zombie under host %d: pid %d (%s), child of %d (%s), for %d s; %s" % (
                            host.index, pid, self.commands.get(key, "not seen running"), parent, Processes.command(parent),
                            now - first, Processes.pidfd_holding(parent, pid)))
                        self.zombies[key] = -1
        self.zombies = {key: value for key, value in self.zombies.items() if key in seen}
        due = [check for check in self.orphan_checks if check[0] <= now]
        self.orphan_checks = [check for check in self.orphan_checks if check[0] > now]
        for _, left, what in due:
            self.check_gone(left, what, processes)

    def sample_machine(self):
        """How busy the machine is now, and whether the hog still runs."""
        try:
            with open("/proc/loadavg") as loadavg:
                self.load_samples.append(float(loadavg.read().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
        try:
            with open("/proc/pressure/cpu") as pressure:
                for line in pressure:
                    if line.startswith("some "):
                        fields = dict(field.split("=", 1) for field in line.split()[1:] if "=" in field)
                        self.pressure_samples.append(float(fields["avg10"]))
        except (OSError, ValueError, KeyError):
            pass
        group = self.arguments.cpu_hog
        if group is not None and self.hog_ended_after is None:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                self.hog_ended_after = time.monotonic() - (self.started or time.monotonic())
                self.violation("the CPU hog (process group %d) ended %d s into the soak: what follows ran without it" % (
                    group, self.hog_ended_after))
            except PermissionError:
                pass

    def check_crash_log(self):
        """No crash record and no quarantine of a good plugin, as the owner's CLI reads the crash log."""
        status, output, stderr = self.plugind("quarantine", "list", "--json")
        if status != 0:
            self.violation("plugind quarantine list --json failed (%d): %s" % (status, stderr.strip()))
            return
        try:
            entries = json.loads(output)["plugins"]
        except (ValueError, KeyError, TypeError) as error:
            self.violation("plugind quarantine list --json printed no document with plugins (%s): %s" % (error, output[:200]))
            return
        self.crash_log = {}
        for entry in entries:
            identifier = entry.get("identifier")
            crashes = entry.get("crashes") or []
            self.crash_log[identifier] = {"crashes": len(crashes), "quarantined": bool(entry.get("quarantined"))}
            if identifier not in GOOD:
                continue
            for crash in crashes:
                key = (identifier, "crash", str(crash.get("time")), crash.get("reason"))
                if key not in self.crash_log_reported:
                    self.crash_log_reported.add(key)
                    self.violation("the good plugin %s has a crash record (%s): %s" % (identifier, crash.get("time"), crash.get("reason")))
            if entry.get("quarantined"):
                key = (identifier, "quarantine", str(entry.get("since")))
                if key not in self.crash_log_reported:
                    self.crash_log_reported.add(key)
                    self.violation("the good plugin %s is quarantined (since %s): %s" % (identifier, entry.get("since"), entry.get("reason")))

    def check_gone(self, left, what, processes):
        survivors = [pid for pid, start in left if processes.start.get(pid) == start and processes.state.get(pid) != "Z"]
        if survivors:
            self.violation("%s: %d of its processes outlived it by %d s: %s" % (what, len(survivors), ORPHAN_SECONDS, survivors))

    # --- the run

    def run(self):
        minutes = self.arguments.minutes
        for identifier in PLUGINS:
            self.decide("install-1", identifier)
            self.decide("approve", identifier)
        for index in range(self.arguments.hosts):
            self.hosts.append(Host(index, self.environment, self.selector, self.rng.randrange(1 << 30)))
        started = self.started = time.monotonic()
        deadline = started + minutes * 60
        last_check = last_progress = last_crash_log = started
        actions = [
            (30, lambda identifier: self.decide(self.rng.choice(("approve", "disable", "enable", "revoke")), identifier)),
            (12, lambda identifier: self.decide(self.rng.choice(("install-1", "install-2", "update-1", "update-2", "uninstall")), identifier)),
            (6, lambda identifier: self.clear_quarantine(self.rng.choice(sorted(HOSTILE)))),
            (25, lambda identifier: self.kill_descendant(launchers=False)),
            (10, lambda identifier: self.kill_descendant(launchers=True)),
            (2, lambda identifier: self.kill_host()),
        ]
        weights = [weight for weight, _ in actions]
        while time.monotonic() < deadline:
            _, action = self.rng.choices(actions, weights)[0]
            action(self.rng.choice(sorted(PLUGINS)))
            self.count("operations")
            # The pace of the owner and the faults: the hosts' reports are read meanwhile.
            pause_until = time.monotonic() + self.rng.uniform(0.05, 0.4)
            while (left := pause_until - time.monotonic()) > 0:
                self.read_hosts(left)
            self.tend_hosts()
            now = time.monotonic()
            if now - last_check >= 1:
                last_check = now
                self.check_processes()
                self.sample_machine()
            if now - last_crash_log >= CRASH_LOG_SECONDS:
                last_crash_log = now
                self.check_crash_log()
            if now - last_progress >= 30:
                last_progress = now
                log("%d of %d s: %d operations, %d faults, %d host rounds, %d violations, load average %s" % (
                    now - started, minutes * 60, self.counts.get("operations", 0), self.faults(), self.rounds(),
                    len(self.violations), self.load_samples[-1] if self.load_samples else "?"))
        self.sample_machine()
        self.finish()

    def stop_hosts(self):
        """Ends every host (SIGTERM: after its round in progress; SIGKILL 30 s later) and waits for it."""
        for host in self.hosts:
            host.killed = True
            if host.process.poll() is None:
                host.process.terminate()
        for host in self.hosts:
            try:
                host.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                host.process.kill()
                host.process.wait()

    def faults(self):
        return sum(value for key, value in self.counts.items() if key.startswith("faults."))

    def rounds(self):
        reports = [host.report for host in self.hosts + self.finished_hosts if host.report]
        return sum(report["rounds"] for report in reports)

    def finish(self):
        # The final state, as the CLI and every live Monitor see it, once decisions stop and the
        # hosts stop launching (SIGUSR1: a crashing plugin launched now could still be quarantined).
        for host in self.hosts:
            host.process.send_signal(signal.SIGUSR1)
        self.read_hosts(0)
        status, output, stderr = self.plugind("list", "--all", "--json")
        if status != 0:
            self.violation("plugind list --all --json failed: " + stderr.strip())
            listed = {}
        else:
            listed = {plugin["identifier"]: plugin["state"] for plugin in json.loads(output)["plugins"]}
        for identifier in sorted(PLUGINS):
            expected, actual = self.model.expected_state(identifier), listed.get(identifier)
            if actual == "quarantined" and identifier in HOSTILE and expected == "available":
                continue
            if actual != expected:
                self.violation("%s is %s, where the decisions applied make it %s" % (identifier, actual, expected))
        available = sorted(identifier for identifier, state in listed.items() if state == "available")
        converge_by = time.monotonic() + 20
        waiting = list(self.hosts)
        while waiting and time.monotonic() < converge_by:
            self.read_hosts(0.5)
            waiting = [host for host in waiting if not host.report or host.report.get("identities") != available]
        for host in waiting:
            self.violation("host %d's Monitor lists %s, not the available %s, 20 s after the last decision" % (
                host.index, host.report.get("identities") if host.report else None, available))
        # Growth of the first host, never killed.
        first = self.hosts[0]
        if first.baseline is None:
            log("the first host did not live %d s: no growth check" % WARM_UP_SECONDS)
        else:
            for key, bound in GROWTH_BOUNDS.items():
                if first.report[key] - first.baseline[key] > bound:
                    self.violation("host 0 grew by %d in %s after its first minute (bound %d); it holds %s" % (
                        first.report[key] - first.baseline[key], key, bound, first.report.get("descriptorKinds")))
        # Stop the hosts; nothing they started may be left.
        processes = Processes()
        left = [(pid, processes.start[pid]) for host in self.hosts for pid in processes.descendants(host.process.pid)]
        for host in self.hosts:
            host.killed = True
            host.process.terminate()
        for host in self.hosts:
            try:
                host.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.violation("host %d did not end within 60 s of SIGTERM" % host.index)
                host.process.kill()
                host.process.wait()
            host.read()
        gone_by = time.monotonic() + ORPHAN_SECONDS
        while time.monotonic() < gone_by:
            processes = Processes()
            if not [pid for pid, start in left if processes.start.get(pid) == start]:
                break
            self.read_hosts(0.2)
        self.check_gone(left, "the stopped hosts", Processes())
        # Written by the hosts' recorders before they ended: complete now.
        self.check_crash_log()
        for host in self.hosts:
            for line in (host.report or {}).get("violations", []):
                self.violation("host %d: %s" % (host.index, line))
        for host in self.finished_hosts:
            for line in (host.report or {}).get("violations", []):
                self.violation("host %d (an earlier process): %s" % (host.index, line))
        self.check_good_outcomes()

    def outcomes(self):
        total = {}
        for host in self.hosts + self.finished_hosts:
            for identifier, outcomes in ((host.report or {}).get("outcomes") or {}).items():
                for outcome, number in outcomes.items():
                    total.setdefault(identifier, {}).setdefault(outcome, 0)
                    total[identifier][outcome] += number
        return total

    def example(self, identifier, outcome):
        for host in self.hosts + self.finished_hosts:
            message = ((host.report or {}).get("examples") or {}).get(identifier, {}).get(outcome)
            if message:
                return message
        return "(no message kept)"

    def busy_timeouts(self):
        """Per plugin, the timeouts whose reason said the machine was busy."""
        total = {}
        for host in self.hosts + self.finished_hosts:
            for identifier, number in ((host.report or {}).get("busyTimeouts") or {}).items():
                total[identifier] = total.get(identifier, 0) + number
        return total

    def machine(self):
        def spread(samples):
            if not samples:
                return None
            return {"min": min(samples), "mean": round(sum(samples) / len(samples), 2), "max": max(samples), "samples": len(samples)}
        try:
            # With autogroup each session (each plugin worker starts one) shares the processors as one.
            with open("/proc/sys/kernel/sched_autogroup_enabled") as autogroup:
                autogroups = autogroup.read().strip() == "1"
        except OSError:
            autogroups = None
        return {
            "processors": os.cpu_count(),
            "autogroupScheduling": autogroups,
            "loadAverage1Minute": spread(self.load_samples),
            "cpuPressureSome10Seconds": spread(self.pressure_samples),
        }

    def check_good_outcomes(self):
        for identifier, outcomes in self.outcomes().items():
            if identifier not in GOOD:
                continue
            for outcome, number in outcomes.items():
                if outcome != "ok" and outcome not in GOOD_MAY_FAIL_WITH:
                    self.violation("the good plugin %s was reported %s %d times: %s" % (
                        identifier, outcome, number, self.example(identifier, outcome)))

    def summary(self):
        first = self.hosts[0]
        return {
            "minutes": self.arguments.minutes,
            "hosts": self.arguments.hosts,
            "seed": self.arguments.seed,
            "operations": self.counts.get("operations", 0),
            "decisions": {key.split(".", 1)[1]: value for key, value in self.counts.items() if key.startswith("decisions.")},
            "faults": {key.split(".", 1)[1]: value for key, value in self.counts.items() if key.startswith("faults.")},
            "hostRounds": self.rounds(),
            "outcomes": self.outcomes(),
            "busyMachineTimeouts": self.busy_timeouts(),
            "crashLog": self.crash_log,
            "cpuHog": {
                "ran": self.arguments.cpu_hog is not None,
                "command": self.arguments.cpu_hog_command,
                "endedEarlyAfterSeconds": self.hog_ended_after,
            },
            "machine": self.machine(),
            "refusals": self.cli_failures,
            "firstHost": {
                "afterFirstMinute": {key: first.baseline[key] for key in GROWTH_BOUNDS} if first.baseline else None,
                "peak": first.peak,
                "end": {key: first.report[key] for key in GROWTH_BOUNDS} if first.report else None,
                "bounds": GROWTH_BOUNDS,
            },
            "violations": self.violations,
        }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--bin", required=True, help="the build's products (swift build --show-bin-path)")
    parser.add_argument("--work", required=True, help="an empty directory for the soak's plugins, policy and logs")
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--json", help="also write the summary to this file")
    parser.add_argument("--cpu-hog", type=int, metavar="PGID", help="the process group of a CPU hog that runs for the whole soak")
    parser.add_argument("--cpu-hog-command", help="the hog's command line, for the summary")
    arguments = parser.parse_args()
    soak = Soak(arguments)

    def interrupt(*_):
        raise Interrupted()

    signal.signal(signal.SIGTERM, interrupt)
    log("seed %d, %d hosts, %g minutes, in %s%s" % (
        arguments.seed, arguments.hosts, arguments.minutes, arguments.work,
        ", under a CPU hog (%s)" % (arguments.cpu_hog_command or "process group %d" % arguments.cpu_hog) if arguments.cpu_hog is not None else ""))
    try:
        soak.run()
    except Interrupted:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        log("ended by SIGTERM: stopping the hosts; no summary")
        soak.stop_hosts()
        sys.exit(143)
    summary = soak.summary()
    text = json.dumps(summary, indent=2)
    print(text)
    if arguments.json:
        with open(arguments.json, "w") as file:
            file.write(text + "\n")
    load = summary["machine"]["loadAverage1Minute"]
    log("%d operations, %d faults, %d host rounds, %s, load average %s on %s processors: %s" % (
        summary["operations"], soak.faults(), summary["hostRounds"],
        "under a CPU hog" if arguments.cpu_hog is not None else "without a CPU hog",
        "%.2f (%.2f to %.2f)" % (load["mean"], load["min"], load["max"]) if load else "unknown", summary["machine"]["processors"],
        "every invariant held" if not soak.violations else "%d violations" % len(soak.violations)))
    sys.exit(1 if soak.violations else 0)


if __name__ == "__main__":
    main()
