import PlugindEngine
import PlugindTypes
import TestSupport
import Testing

@Suite("Foreign plugin identities and directories", .tags(.unit))
struct ForeignPluginIdentityTests {
    @Test("ladspa.<library>.<label> and frei0r.<library>, every character outside [A-Za-z0-9-] replaced by '-'")
    func identities() {
        let cmt = ForeignPluginLibrary(abi: .ladspa, path: "/usr/lib/ladspa/cmt.so")
        #expect(ForeignPluginIdentity.of(cmt, label: "delay_0.01s") == "ladspa.cmt.delay-0-01s")
        #expect(
            ForeignPluginIdentity.of(ForeignPluginLibrary(abi: .ladspa, path: "/usr/lib/ladspa/amp.so"), label: "amp_mono")
                == "ladspa.amp.amp-mono")
        #expect(
            ForeignPluginIdentity.of(ForeignPluginLibrary(abi: .frei0r, path: "/usr/lib/frei0r-1/invert0r.so"), label: nil)
                == "frei0r.invert0r")
        // Nothing a library names can add a component or escape the identity's alphabet.
        #expect(ForeignPluginIdentity.of(cmt, label: "../é x") == "ladspa.cmt.-----x")
        #expect(ForeignPluginIdentity.of(cmt, label: "") == "ladspa.cmt.-")
        #expect(ForeignPluginIdentity.extensionPoint(.frei0r) == "org.plugind.frei0r")
    }

    @Test("the directories: the variables when set (absolute entries only), else the user's, then /usr/local/lib and /usr/lib")
    func directories() {
        let set = ForeignPluginDirectory.defaults(environment: ["LADSPA_PATH": "/opt/l:relative:/opt/m", "HOME": "/home/u"])
        #expect(set.filter { $0.abi == .ladspa }.map(\.path) == ["/opt/l", "/opt/m", "/usr/local/lib/ladspa", "/usr/lib/ladspa"])
        #expect(set.filter { $0.abi == .frei0r }.map(\.path) == ["/home/u/.frei0r-1/lib", "/usr/local/lib/frei0r-1", "/usr/lib/frei0r-1"])
        let none = ForeignPluginDirectory.defaults(environment: [:])
        #expect(none.map(\.path) == ["/usr/local/lib/ladspa", "/usr/lib/ladspa", "/usr/local/lib/frei0r-1", "/usr/lib/frei0r-1"])
    }
}
