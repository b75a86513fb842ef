import Foundation
import PlugindBundle
import TestSupport
import Testing

@Suite("Localized names and descriptions", .tags(.unit))
struct LocalizedManifestTests {
    func manifest(_ extra: [String: Any]) throws(ManifestError) -> Manifest {
        var object = ManifestParserTests.valid
        for (key, value) in extra { object[key] = value }
        let data = (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
        return try ManifestParser.parse(data, file: "/b/manifest.json").manifest
    }

    @Test("the user's languages, as gettext orders them")
    func preference() {
        #expect(LanguagePreference(environment: ["LANG": "de_AT.UTF-8"]).tags == ["de_AT", "de"])
        // LC_ALL wins over LC_MESSAGES and LANG; LANGUAGE comes first when the locale is not C.
        #expect(
            LanguagePreference(environment: ["LC_ALL": "fr_FR.UTF-8", "LC_MESSAGES": "de_DE", "LANG": "it_IT"]).tags == ["fr_FR", "fr"])
        #expect(LanguagePreference(environment: ["LC_MESSAGES": "de_DE@euro", "LANG": "it_IT"]).tags == ["de_DE", "de"])
        #expect(
            LanguagePreference(environment: ["LANGUAGE": "pt-br:es", "LANG": "en_US.UTF-8"]).tags == ["pt_BR", "pt", "es", "en_US", "en"])
        // The C locale turns translations off, LANGUAGE included, as gettext does.
        #expect(LanguagePreference(environment: ["LANGUAGE": "de", "LANG": "C.UTF-8"]).tags == [])
        #expect(LanguagePreference(environment: ["LANGUAGE": "de"]).tags == [])
        #expect(LanguagePreference(environment: ["LANG": "POSIX"]).tags == [])
        // An entry that is not a language is skipped, not fatal.
        #expect(LanguagePreference(environment: ["LANGUAGE": "::x:de", "LANG": "en"]).tags == ["de", "en"])
    }

    @Test("localizedName picks the most preferred translation, by region then language, else the name")
    func lookup() throws {
        let parsed = try manifest([
            "localizedNames": ["de": "Großbuchstaben", "pt-BR": "Maiúsculas", "pt_PT": "Maiúsculas (PT)"],
            "description": "Upper-cases text", "localizedDescriptions": ["de": "Schreibt Text groß"],
        ])
        #expect(parsed.localizedName(for: LanguagePreference(tags: ["de_AT", "de"])) == "Großbuchstaben")
        #expect(parsed.localizedName(for: LanguagePreference(tags: ["pt_BR", "pt"])) == "Maiúsculas")
        #expect(parsed.localizedName(for: LanguagePreference(tags: ["pt_PT", "pt"])) == "Maiúsculas (PT)")
        #expect(parsed.localizedName(for: LanguagePreference(tags: ["fr_FR", "fr", "de"])) == "Großbuchstaben")
        #expect(parsed.localizedName(for: LanguagePreference(tags: ["fr"])) == "Filter")
        #expect(parsed.localizedName(for: LanguagePreference(tags: [])) == "Filter")
        #expect(parsed.localizedDescription(for: LanguagePreference(tags: ["de"])) == "Schreibt Text groß")
        #expect(parsed.localizedDescription(for: LanguagePreference(tags: ["fr"])) == "Upper-cases text")
    }

    @Test("translations that are not an object, a tag that is not a language, empty text: errors naming the key")
    func refused() {
        func failure(_ extra: [String: Any]) -> String? {
            do {
                _ = try manifest(extra)
                return nil
            } catch {
                return error.description
            }
        }
        #expect(failure(["localizedNames": "Großbuchstaben"])?.contains("key 'localizedNames' must be an object") == true)
        #expect(failure(["localizedNames": ["german": "x"]])?.contains("'german', which is not a language tag") == true)
        #expect(failure(["localizedNames": ["de\u{1B}[2J": "x"]])?.contains("\u{1B}") == false)
        #expect(failure(["localizedDescriptions": ["de": 3]])?.contains("key 'localizedDescriptions.de' must be a string") == true)
        #expect(failure(["localizedNames": ["de": " "]])?.contains("key 'localizedNames.de' must not be empty") == true)
        #expect(failure(["localizedNames": ["de": String(repeating: "x", count: 5000)]])?.contains("at most") == true)
    }
}
