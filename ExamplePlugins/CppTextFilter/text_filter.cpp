// A text filter in C++ on the plugind C++ kit (plugind_plugin.hpp): title-cases every word of
// its input ("hello big world" → "Hello Big World"). Empty input is an error the host sees with
// its message.
#include <plugind_plugin.hpp>

#include <cctype>
#include <string>

class TitleCaseFilter : public plugind::Plugin {
public:
    explicit TitleCaseFilter(plugind::Host &host) { host.log(plugind::LogLevel::debug, "title-case filter ready"); }

    plugind::Answer handle(plugind::Request &request) override {
        if (request.text().empty()) throw plugind::Error("nothing to title-case: the input is empty", 2);
        std::string text(request.text());
        bool startOfWord = true;
        for (char &c : text) {
            auto byte = static_cast<unsigned char>(c);
            c = static_cast<char>(startOfWord ? std::toupper(byte) : std::tolower(byte));
            startOfWord = std::isspace(byte) != 0;
        }
        return text;
    }
};

PLUGIND_CPP_PLUGIN(TitleCaseFilter, "Title-case text filter (C++)", "1.0.0");
PLUGIND_CPP_BINDING("org.plugind.examples.text-filters");
