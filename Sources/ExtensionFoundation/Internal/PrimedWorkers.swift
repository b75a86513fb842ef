import Glibc
import PlugindSystem
import PlugindWire

/// A worker made ahead for the plugin launched last, confined exactly as that launch was, waiting
/// for the next launch of the same plan to load the plugin (`LoadMode.primed`). Such a launch is
/// the policy check, one `hello` and the plugin's `dlopen`: the view, the ids, the limits, the
/// system-call filter and Landlock are in place already. No plugin code runs before that launch,
/// which checks the policy like any other; a launch of another plan, or a change of the host's
/// mounts, ends the primed worker.
package enum PrimedWorkers {
    struct Primed: Sendable {
        /// What the worker was confined for (in mode `serve`, as a launch asks).
        let load: LoadConfiguration
        let sealedFiles: [SealedSource]
        let worker: PreforkedLauncher.StartedWorker
        let launcher: PreforkedLauncher
        let ends: WorkerHostEnds
        /// Copies of the sealed files, for the worker primed after this one is launched.
        let sealed: [FileDescriptor]

        /// Ends the worker before it loaded anything, and closes what this side holds of it.
        func end() {
            closeHostSide()
            launcher.discard(worker)
        }

        fileprivate func closeHostSide() {
            ends.close()
            for descriptor in sealed { descriptor.close() }
        }
    }

    private static let slot = Locked<Primed?>(nil)

    /// Whether a launch of `plan` may be primed: a worker from a spare, with every layer on, and
    /// no control group of its own (which the worker would join at its launch).
    static func isEligible(_ plan: LaunchPlan) -> Bool {
        plan.primesWorkers && plan.launchStrategy.forks != nil && plan.load.mode == .serve
            && plan.load.confinement.permitsSpare
            && !plan.load.confinement.allowsProcesses
    }

    /// The worker primed for `plan` (started from `executable`), taken out of the slot; one
    /// primed for anything else ends.
    static func take(for plan: LaunchPlan, executable: String) -> Primed? {
        guard let primed = slot.withLock({ $0.take() }) else { return nil }
        if primed.load == plan.load && primed.sealedFiles == plan.sealedFiles && primed.launcher.executable == executable
            && primed.launcher.forks == plan.launchStrategy.forks
        {
            return primed
        }
        primed.end()
        return nil
    }

    /// Ends the primed worker, if any: the host's mounts changed since it built its view.
    static func discardAll() {
        slot.withLock { $0.take() }?.end()
    }

    /// The primed worker's pid, if there is one.
    package static var processIdentifier: Int32? {
        slot.withLock { $0?.worker.process.processIdentifier }
    }

    /// Ends the primed worker, if any, and waits until it is reaped: for tests that count this
    /// process's descriptors and children, and benchmarks of a first launch.
    package static func discardAllAndWait() {
        guard let primed = slot.withLock({ $0.take() }) else { return }
        primed.closeHostSide()
        primed.worker.hostTree?.close()
        primed.worker.process.processDescriptor.killAndReap()
    }

    /// Primes a worker for `plan` on a ready spare. On the loop's thread, after a launch of
    /// `plan`; takes `sealed`, copies of its sealed files.
    static func prime(_ plan: LaunchPlan, sealed: [FileDescriptor], launcher: PreforkedLauncher) {
        var load = plan.load
        load.mode = .primed
        guard isEligible(plan), let resources = try? WorkerResources(load: load) else {
            for descriptor in sealed { descriptor.close() }
            return
        }
        // The whole hello must be in the pipe: nobody is there to write the rest.
        guard resources.pending.isEmpty, let worker = launcher.startOnReadySpare(descriptors: resources.childDescriptors + sealed) else {
            resources.closeAll()
            for descriptor in sealed { descriptor.close() }
            return
        }
        resources.closeChildEnds()
        let primed = Primed(
            load: plan.load, sealedFiles: plan.sealedFiles, worker: worker, launcher: launcher, ends: resources.hostEnds, sealed: sealed)
        slot.withLock { slot in slot.replace(with: primed) }?.end()
    }
}

extension Optional {
    fileprivate mutating func replace(with value: Wrapped) -> Wrapped? {
        defer { self = value }
        return self
    }
}
