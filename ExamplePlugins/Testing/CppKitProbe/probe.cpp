// The C++ kit's probe for KitProbeTests (the Rust and Go kits' probes answer the same requests):
//   (empty)         an empty answer: the benchmarks' round trip
//   count           requests on this connection so far, this one included (per-connection state)
//   host            the identifier of the host that opened the connection
//   ask:<text>      asks the host <text>, answers "answer:<its answer>"
//   throw           throws std::runtime_error("asked to throw")
//   error           fails with plugind::Error code 7, "asked to fail"
//   oversized       answers 2 MiB (over the 1 MiB limit its manifest sets)
//   remember        remembers this connection's identifier
//   ask-remembered  asks on the remembered connection: "answered:<answer>" or "ask failed:<errno>"
// Connections from hosts whose identifier ends in ".untrusted" are refused.
#include <plugind_plugin.hpp>

#include <atomic>
#include <stdexcept>
#include <string>

struct Counter : plugind::ConnectionState {
    std::atomic<int> requests{0};
};

class KitProbe : public plugind::Plugin {
public:
    explicit KitProbe(plugind::Host &host) : host_(host) {}

    std::unique_ptr<plugind::ConnectionState> accept(const plugind::Connection &connection) override {
        const std::string &host = connection.host_identifier();
        const std::string suffix = ".untrusted";
        if (host.size() >= suffix.size() && host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0) {
            throw plugind::Refusal("KitProbe does not serve " + host);
        }
        return std::make_unique<Counter>();
    }

    plugind::Answer handle(plugind::Request &request) override {
        std::string_view text = request.text();
        plugind::Connection *connection = request.connection();
        if (text.empty()) return plugind::Answer();
        if (text == "count") {
            auto *counter = connection == nullptr ? nullptr : connection->state<Counter>();
            if (counter == nullptr) throw plugind::Error("no connection state");
            return std::to_string(++counter->requests);
        }
        if (text == "host") return connection == nullptr ? std::string() : connection->host_identifier();
        if (text.substr(0, 4) == "ask:") {
            plugind::AskResult answer = request.ask(text.substr(4));
            if (!answer) throw plugind::Error("the ask failed: " + answer.message(), 5);
            return "answer:" + std::string(answer.text());
        }
        if (text == "throw") throw std::runtime_error("asked to throw");
        if (text == "error") throw plugind::Error("asked to fail", 7);
        if (text == "oversized") return std::string(2 << 20, 'x');
        if (text == "remember") {
            remembered_ = connection == nullptr ? 0 : connection->identifier();
            return "remembered";
        }
        if (text == "ask-remembered") {
            plugind::AskResult answer = host_.ask(remembered_, "still there?");
            return answer ? "answered:" + std::string(answer.text()) : "ask failed:" + std::to_string(answer.status());
        }
        throw plugind::Error("unknown request '" + std::string(text) + "'");
    }

private:
    plugind::Host &host_;
    std::atomic<std::uint32_t> remembered_{0};
};

PLUGIND_CPP_PLUGIN_CONCURRENT(KitProbe, "KitProbe (C++)", "1.0.0", 4);
