import Testing

/// The Python package (Bindings/Python) installed the way a user would: pip, into a directory of
/// the test's (no compiler, no network: the build backend is Debian's setuptools), from a copy,
/// since pip builds in the source tree and the tests' user may not write there.
package enum PythonPackage {
    /// Installs the package under `directory` and returns the directory to put on PYTHONPATH.
    package static func installed(in directory: String) async throws -> String {
        let site = directory + "/site"
        let source = directory + "/python-package"
        // cp, not FileManager's copy: that one keeps the owner, which an ordinary user cannot.
        let copied = try await CommandRunner.run(
            "/bin/cp", ["-R", BuiltProducts.packageRoot + "/Bindings/Python", source], environment: ["PATH": "/usr/bin:/bin"])
        #expect(copied.status == 0, "cp: \(copied.stderr)")
        let installed = try await CommandRunner.run(
            "/usr/bin/python3",
            ["-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-index", "--target", site, source],
            environment: ["PATH": "/usr/bin:/bin", "HOME": directory, "PIP_DISABLE_PIP_VERSION_CHECK": "1"],
            currentDirectory: directory)
        #expect(installed.status == 0, "pip install Bindings/Python: \(installed.stderr)")
        return site
    }

    /// Runs `tests` (a file or directory under Bindings/Python/tests) with pytest against the
    /// built libplugind and worker and the package installed in `test`'s directory, with
    /// `variables` (the points the tests use) added to the environment.
    package static func pytest(_ tests: String, in test: TestHost, variables: [String: String]) async throws -> CommandRunner.Output {
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        environment["PLUGIND_LIBRARY"] = BuiltProducts.directory + "/libPlugindHost.so"
        environment["PYTHONDONTWRITEBYTECODE"] = "1"
        environment["PYTHONPATH"] = try await installed(in: test.directory.path)
        environment.merge(variables) { _, new in new }
        return try await CommandRunner.run(
            "/usr/bin/python3",
            [
                "-X", "faulthandler", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                BuiltProducts.packageRoot + "/Bindings/Python/tests/" + tests,
            ],
            environment: environment, currentDirectory: test.directory.path)
    }
}
