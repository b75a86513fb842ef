import PlugindSystem

/// The languages the user reads, in order, as gettext decides them from the environment: the
/// locale of messages is the first set of `LC_ALL`, `LC_MESSAGES`, `LANG`; when it is not `C` or
/// `POSIX`, the colon-separated `LANGUAGE` list comes before it. Each entry is tried as written
/// (without its `.codeset` and `@modifier`) and then as its bare language: `de_AT.UTF-8` is
/// `de_AT`, then `de`.
package struct LanguagePreference: Sendable, Equatable {
    /// Normalised tags, most preferred first: lowercase language, `_`, uppercase region.
    package let tags: [String]

    package init(tags: [String]) {
        self.tags = tags
    }

    package init(environment: [String: String]) {
        let locale = ["LC_ALL", "LC_MESSAGES", "LANG"].lazy.compactMap { environment[$0] }.first { !$0.isEmpty } ?? ""
        let bare = Self.strip(locale)
        guard !bare.isEmpty, bare != "C", bare != "POSIX" else {
            tags = []
            return
        }
        var entries = (environment["LANGUAGE"] ?? "").split(separator: ":").map(String.init)
        entries.append(locale)
        var tags: [String] = []
        for entry in entries {
            guard let tag = Self.normalized(Self.strip(entry)) else { continue }
            for candidate in [tag, String(tag.prefix { $0 != "_" })] where !tags.contains(candidate) { tags.append(candidate) }
        }
        self.tags = tags
    }

    /// The languages of this process's environment.
    package static var current: LanguagePreference {
        var environment: [String: String] = [:]
        for name in ["LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"] { environment[name] = ProcessEnvironment.value(name) }
        return LanguagePreference(environment: environment)
    }

    /// The text of `translations` for the most preferred language that has one.
    package func pick(_ translations: [String: String]) -> String? {
        guard !translations.isEmpty, !tags.isEmpty else { return nil }
        var byTag: [String: String] = [:]
        for (tag, text) in translations {
            if let normalized = Self.normalized(tag) { byTag[normalized] = text }
        }
        return tags.lazy.compactMap { byTag[$0] }.first
    }

    /// "de", "pt_BR", "pt-BR", "zh_Hant_TW": a language of two or three letters, then subtags of
    /// two to eight letters or digits.
    package static func isLanguageTag(_ text: String) -> Bool {
        normalized(text) != nil
    }

    private static func strip(_ locale: String) -> String {
        String(locale.prefix { $0 != "." && $0 != "@" })
    }

    private static func normalized(_ tag: String) -> String? {
        let parts = tag.split(separator: "_", omittingEmptySubsequences: false).flatMap {
            $0.split(separator: "-", omittingEmptySubsequences: false)
        }
        guard let language = parts.first, (2...3).contains(language.count), language.allSatisfy({ $0.isASCII && $0.isLetter }) else {
            return nil
        }
        let subtags = parts.dropFirst()
        guard subtags.allSatisfy({ (2...8).contains($0.count) && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } }) else {
            return nil
        }
        return ([language.lowercased()] + subtags.map { $0.count == 2 ? $0.uppercased() : String($0) }).joined(separator: "_")
    }
}

extension Manifest {
    /// `name` in the most preferred language the manifest has a translation for.
    package func localizedName(for languages: LanguagePreference) -> String {
        languages.pick(localizedNames) ?? name
    }

    /// `description` likewise; nil when the manifest has none in any language.
    package func localizedDescription(for languages: LanguagePreference) -> String? {
        languages.pick(localizedDescriptions) ?? description
    }
}
