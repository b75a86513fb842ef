// Unit tests of the C++ kit (plugind_plugin.hpp) without a worker: answers, ask results, the
// binding note's bytes, and the adapter turning exceptions and oversized answers into errors
// through a fake host table. Run by KitUnitTests; prints "cpp kit ok" and exits 0, or names the
// first failed check and exits 1.
#include <plugind_plugin.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

static int failures = 0;
#define CHECK(condition)                                                                 \
    do {                                                                                 \
        if (!(condition)) {                                                              \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

// A fake response and host: what the adapter appends and the error it sets.
struct plugind_plugin_response {
    std::string bytes;
    std::string error;
    size_t limit = 1024;
};

static void fake_log(void *, plugind_plugin_log_level, const char *) {}
static int32_t fake_post(void *, uint64_t, const uint8_t *, size_t) { return 0; }
static int32_t fake_progress(void *, uint64_t, uint64_t, uint64_t) { return 0; }
static bool fake_cancelled(void *, uint64_t) { return false; }
static int32_t fake_append(plugind_plugin_response *response, const uint8_t *bytes, size_t length) {
    if (response->bytes.size() + length > response->limit) return EMSGSIZE;
    response->bytes.append(reinterpret_cast<const char *>(bytes), length);
    return 0;
}
static uint8_t *fake_reserve(plugind_plugin_response *, size_t) { return nullptr; }
static void fake_set_error(plugind_plugin_response *response, const char *message) { response->error = message; }
static int32_t fake_ask(void *, uint32_t connection, const uint8_t *, size_t, uint32_t, plugind_plugin_answer *answer) {
    if (connection == 9) return ECONNRESET;
    static const char reply[] = "Ada";
    answer->bytes = reinterpret_cast<const uint8_t *>(reply);
    answer->length = 3;
    return 0;
}
static void fake_release(void *, plugind_plugin_answer *) {}

static const plugind_host fake_host = {
    PLUGIND_PLUGIN_ABI_VERSION, sizeof(plugind_host), nullptr, fake_log, fake_post, fake_progress, fake_cancelled,
    fake_append, fake_reserve, fake_set_error, fake_ask, fake_release,
};

class Subject : public plugind::Plugin {
public:
    explicit Subject(plugind::Host &) {}
    plugind::Answer handle(plugind::Request &request) override {
        std::string_view text = request.text();
        if (text == "std") throw std::runtime_error("boom");
        if (text == "plugind") throw plugind::Error("refused", 9);
        if (text == "int") throw 42;
        if (text == "big") return std::string(4096, 'x');
        return "ok:" + std::string(text);
    }
};

static int32_t run(const std::string &input, plugind_plugin_response &response) {
    static const plugind_plugin descriptor = plugind::Adapter<Subject>::descriptor("Subject", "1", 1);
    void *state = nullptr;
    plugind_plugin_response init_error;
    if (descriptor.init(&fake_host, &state, &init_error) != 0) return -1;
    plugind_plugin_request request{};
    request.bytes = reinterpret_cast<const uint8_t *>(input.data());
    request.length = input.size();
    int32_t status = descriptor.handle(state, &request, &response);
    descriptor.deinit(state);
    return status;
}

int main() {
    plugind::Answer fromText(std::string("text"));
    CHECK(fromText.text() == "text");
    std::vector<std::uint8_t> bytes = {1, 2, 3};
    CHECK(plugind::Answer(bytes).size() == 3);

    plugind::Host host(&fake_host);
    plugind::AskResult answered = host.ask(1, "name?");
    CHECK(static_cast<bool>(answered) && answered.text() == "Ada");
    plugind::AskResult closed = host.ask(9, "name?");
    CHECK(!closed && closed.status() == ECONNRESET);

    constexpr auto note = plugind::detail::binding_note("com.example.point");
    CHECK(note.type == PLUGIND_PLUGIN_NOTE_TYPE_BINDING && note.name_size == 8);
    CHECK(std::memcmp(note.description, "extensionPoint=com.example.point", sizeof note.description) == 0);
    static_assert(sizeof note.description == sizeof("extensionPoint=com.example.point") - 1, "the note has no NUL");

    plugind_plugin_response ok;
    CHECK(run("hi", ok) == 0 && ok.bytes == "ok:hi");
    plugind_plugin_response thrown;
    CHECK(run("std", thrown) == 1 && thrown.error == "C++ exception: boom");
    plugind_plugin_response coded;
    CHECK(run("plugind", coded) == 9 && coded.error == "refused");
    plugind_plugin_response unknown;
    CHECK(run("int", unknown) == 1 && unknown.error == "C++ exception of an unknown type");
    plugind_plugin_response big;
    CHECK(run("big", big) == EMSGSIZE && big.error == "the answer of 4096 bytes is over the worker's message limit");

    if (failures != 0) return 1;
    std::printf("cpp kit ok\n");
    return 0;
}
