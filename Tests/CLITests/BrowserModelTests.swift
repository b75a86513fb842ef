import CTerminal
import TestSupport
import Testing

@testable import plugind

/// The browser's keys and drawing, without a terminal: the model is fed entries and keys and
/// returns what the command must do and the lines to draw.
@Suite("plugind browse: the model behind the screen", .tags(.unit))
struct BrowserModelTests {
    static func entry(_ identifier: String, state: String = "unapproved", reason: String? = nil, isPlugin: Bool = true) -> BrowserEntry {
        BrowserEntry(
            identifier: identifier, name: identifier.split(separator: ".").last.map(String.init) ?? identifier, version: "1.0.0",
            extensionPoint: "org.example.point", state: state, reason: reason, publisher: isPlugin ? "unsigned" : "", isPlugin: isPlugin)
    }

    static func key(_ character: Character) -> Int32 { Int32(character.asciiValue ?? 0) }

    static func model(_ identifiers: [String]) -> BrowserModel {
        var model = BrowserModel(title: "plugind browse")
        model.update(identifiers.map { entry($0) })
        return model
    }

    @Test("the selection stays on the same plugin when the list changes around it")
    func selectionFollowsPlugin() {
        var model = Self.model(["a.one", "a.three"])
        _ = model.handle(key: Self.key("j"))
        #expect(model.selectedEntry?.identifier == "a.three")
        model.update([Self.entry("a.one"), Self.entry("a.two"), Self.entry("a.three")])
        #expect(model.selectedEntry?.identifier == "a.three")
        model.update([Self.entry("a.one")])
        #expect(model.selectedEntry?.identifier == "a.one")
        model.update([])
        #expect(model.selectedEntry == nil)
        #expect(model.handle(key: PLUGIND_TERMINAL_KEY_ENTER) == .none)
    }

    @Test("/ filters by text as it is typed; Escape clears the filter")
    func filtering() {
        var model = Self.model(["org.alpha", "org.beta", "org.alphabet"])
        _ = model.handle(key: Self.key("/"))
        #expect(model.mode == .filtering)
        for character in "alpha" { _ = model.handle(key: Self.key(character)) }
        #expect(model.visible.map(\.identifier) == ["org.alpha", "org.alphabet"])
        _ = model.handle(key: PLUGIND_TERMINAL_KEY_BACKSPACE)
        #expect(model.filter == "alph")
        _ = model.handle(key: PLUGIND_TERMINAL_KEY_ENTER)
        #expect(model.mode == .list)
        #expect(model.visible.count == 2)
        _ = model.handle(key: Self.key("/"))
        _ = model.handle(key: PLUGIND_TERMINAL_KEY_ESCAPE)
        #expect(model.visible.count == 3)
    }

    @Test("a approves only after the review, and only with y; scrolling the review is not an answer")
    func approveThroughReview() {
        var model = Self.model(["org.one"])
        #expect(model.handle(key: Self.key("a")) == .loadReview("org.one"))
        #expect(model.mode == .review("org.one"))
        model.show(text: (1...40).map { "line \($0)" })
        #expect(model.handle(key: PLUGIND_TERMINAL_KEY_DOWN) == .none)
        #expect(model.mode == .review("org.one"))
        #expect(model.scroll == 1)
        #expect(model.handle(key: Self.key("y")) == .perform(.approve, "org.one"))
        #expect(model.mode == .list)

        #expect(model.handle(key: Self.key("a")) == .loadReview("org.one"))
        #expect(model.handle(key: Self.key("x")) == .none)
        #expect(model.mode == .list)
        #expect(model.status?.contains("Not approved") == true)
    }

    @Test("y before the review has been read, or on a review that failed, approves nothing")
    func approveBeforeReviewIsRead() {
        var model = Self.model(["org.one"])
        #expect(model.handle(key: Self.key("a")) == .loadReview("org.one"))
        #expect(model.render(height: 24, width: 80).contains { $0.text.hasPrefix("Review of org.one") })
        #expect(model.handle(key: Self.key("y")) == .none)
        #expect(model.status?.contains("not complete") == true)

        #expect(model.handle(key: Self.key("a")) == .loadReview("org.one"))
        model.show(text: ["Cannot review org.one: gone"], complete: false)
        #expect(model.handle(key: Self.key("y")) == .none)
        #expect(model.mode == .list)

        #expect(model.handle(key: Self.key("a")) == .loadReview("org.one"))
        model.show(text: ["what is granted"])
        #expect(model.render(height: 24, width: 80).contains { $0.text.hasPrefix("Approve org.one?") })
        #expect(model.handle(key: Self.key("y")) == .perform(.approve, "org.one"))
    }

    @Test("r asks before revoking; d, e and c act at once; a rejected bundle cannot be approved")
    func actions() {
        var model = Self.model(["org.one"])
        #expect(model.handle(key: Self.key("r")) == .none)
        #expect(model.mode == .confirm(.revoke, "org.one"))
        #expect(model.handle(key: Self.key("n")) == .none)
        #expect(model.handle(key: Self.key("r")) == .none)
        #expect(model.handle(key: Self.key("y")) == .perform(.revoke, "org.one"))
        #expect(model.handle(key: Self.key("d")) == .perform(.disable, "org.one"))
        #expect(model.handle(key: Self.key("e")) == .perform(.enable, "org.one"))
        #expect(model.handle(key: Self.key("c")) == .none)
        #expect(model.status?.contains("not quarantined") == true)
        model.update([Self.entry("org.one", state: "quarantined", reason: "crashed 3 times")])
        #expect(model.handle(key: Self.key("c")) == .perform(.clearQuarantine, "org.one"))

        model.update([Self.entry("/plugins/broken", state: "rejected", reason: "manifest.json is not JSON", isPlugin: false)])
        #expect(model.handle(key: Self.key("a")) == .none)
        #expect(model.status?.contains("not a plugin that can be approved") == true)
        #expect(model.handle(key: PLUGIND_TERMINAL_KEY_ENTER) == .loadDetails("/plugins/broken"))
    }

    @Test("q quits from the list, Ctrl-C from anywhere")
    func quitting() {
        var model = Self.model(["org.one"])
        _ = model.handle(key: Self.key("a"))
        #expect(model.handle(key: PLUGIND_TERMINAL_KEY_INTERRUPT) == .quit)
        var list = Self.model(["org.one"])
        #expect(list.handle(key: Self.key("q")) == .quit)
    }

    @Test("at 80×24 the screen is 24 rows of at most 80 columns, states written as words, keys in the footer")
    func renderAt80By24() {
        var model = BrowserModel(title: "plugind browse")
        model.update(
            (1...40).map { Self.entry("org.example.plugin-with-a-long-identifier-\($0)", state: $0 == 3 ? "disabled" : "unapproved") })
        let lines = model.render(height: 24, width: 80)
        #expect(lines.count == 24)
        #expect(lines.allSatisfy { $0.text.count <= 80 })
        #expect(lines[0].text.contains("40 plugin(s)"))
        #expect(lines[0].text.contains("39 unapproved, 1 disabled"))
        #expect(lines.contains { $0.text.hasPrefix("disabled ") })
        #expect(lines.last?.text.contains("q quit") == true)
        #expect(lines.filter { $0.style == PLUGIND_TERMINAL_SELECTED && $0.fill }.count == 2)  // the selected row and the footer
    }

    @Test("wide terminals list each plugin's publisher in a column; narrow ones in the panel")
    func publisherColumn() {
        var model = BrowserModel(title: "plugind browse")
        var signed = Self.entry("org.one")
        signed.publisher = "ed25519:0123456789abcdef0123456789abcdef (signature valid)"
        var broken = Self.entry("org.two")
        broken.publisher = "ed25519:fedcba9876543210fedcba9876543210 (signature INVALID: the bundle changed after it was signed)"
        model.update([signed, broken, Self.entry("org.three")])
        let wide = model.render(height: 24, width: 140).map(\.text)
        #expect(wide[1].contains("PUBLISHER"))
        #expect(wide.contains { $0.contains("ed25519:0123456789ab ") && $0.contains("org.one") })
        #expect(wide.contains { $0.contains("ed25519:fedcba987654 INVALID") && $0.contains("org.two") })
        #expect(wide.contains { $0.contains("unsigned") && $0.contains("org.three") })
        let narrow = model.render(height: 24, width: 80).map(\.text)
        #expect(!narrow[1].contains("PUBLISHER"))
        #expect(narrow.contains { $0.hasPrefix("publisher: ed25519:0123456789abcdef0123456789abcdef (signature valid)") })
    }

    @Test("narrower terminals keep help and quit in the footer", arguments: [20, 40, 60, 79, 100])
    func footerAtWidth(_ width: Int) {
        var model = BrowserModel(title: "plugind browse")
        model.update([Self.entry("org.one", state: "unapproved")])
        let footer = model.render(height: 12, width: width).last?.text ?? ""
        #expect(footer.count <= width)
        #expect(footer.contains("? help") && footer.contains("q quit") && !footer.contains("…"), "\(footer)")
    }

    @Test("text from manifests is drawn inert")
    func inertText() {
        var model = BrowserModel(title: "plugind browse")
        var hostile = Self.entry("org.evil")
        hostile.name = "evil\u{1B}[2J\u{1B}]0;owned\u{07}name"
        hostile.reason = "reason\u{1B}[31m"
        model.update([hostile])
        let text = model.render(height: 24, width: 120).map(\.text).joined()
        #expect(!text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
    }

    @Test("long lines wrap within the width, and no character is lost")
    func wrapping() {
        let digest = String(repeating: "0123456789abcdef", count: 4)
        let line = "  bundle digest:   \(digest) and some words after it"
        let rows = BrowserModel.wrap(line, width: 40)
        #expect(rows.count > 1)
        #expect(rows.allSatisfy { $0.count <= 40 })
        #expect(rows.first! + rows.dropFirst().map { String($0.dropFirst(6)) }.joined() == line)
    }
}
