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
}
