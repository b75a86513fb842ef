/*
 * plugind_plugin.hpp — the C++ plugin kit (C++17 or later, header-only) over plugind_plugin.h.
 *
 * A plugin is a class deriving from plugind::Plugin; one line exports it:
 *
 *     #include <plugind_plugin.hpp>
 *
 *     class Upper : public plugind::Plugin {
 *     public:
 *         explicit Upper(plugind::Host &host) : host_(host) {}
 *         plugind::Answer handle(plugind::Request &request) override {
 *             std::string text(request.text());
 *             for (char &c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
 *             return text;
 *         }
 *     private:
 *         plugind::Host &host_;
 *     };
 *
 *     PLUGIND_CPP_PLUGIN(Upper, "Upper", "1.0.0");
 *
 * What the kit guarantees:
 *  - No exception crosses into the worker. One thrown by a constructor, `handle`, `accept` or
 *    `close` becomes a plugin error: a plugind::Error keeps its code and message, any other
 *    std::exception is code 1 with its what(), anything else code 1, "unknown exception".
 *  - Answers are values. One larger than the worker's message limit is a plugin error naming
 *    both sizes, never a partial answer.
 *  - Asks return a plugind::AskResult: an answer, or the reason there is none (a connection the
 *    host closed is ECONNRESET), never an exception and never a crash.
 *  - Per-connection state is an object of yours (plugind::ConnectionState), created by `accept`
 *    and destroyed after `close`.
 */
#ifndef PLUGIND_PLUGIN_HPP
#define PLUGIND_PLUGIN_HPP

#include <plugind_plugin.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#if __cplusplus >= 202002L && __has_include(<span>)
#include <span>
#endif

#if __cplusplus < 201703L
#error "plugind_plugin.hpp needs C++17 or later (-std=c++17)"
#endif

namespace plugind {

#if defined(__cpp_lib_span)
/// The bytes of a request or an answer: std::span in C++20.
using ByteView = std::span<const std::byte>;
#else
/// The bytes of a request or an answer (std::span<const std::byte> in C++20).
class ByteView {
public:
    constexpr ByteView() noexcept = default;
    constexpr ByteView(const std::byte *data, std::size_t size) noexcept : data_(data), size_(size) {}
    constexpr const std::byte *data() const noexcept { return data_; }
    constexpr std::size_t size() const noexcept { return size_; }
    constexpr bool empty() const noexcept { return size_ == 0; }
    constexpr const std::byte *begin() const noexcept { return data_; }
    constexpr const std::byte *end() const noexcept { return data_ + size_; }
    constexpr std::byte operator[](std::size_t index) const noexcept { return data_[index]; }

private:
    const std::byte *data_ = nullptr;
    std::size_t size_ = 0;
};
#endif

/// An error a plugin reports: its code (positive) reaches the host with its message.
class Error : public std::exception {
public:
    explicit Error(std::string message, std::int32_t code = 1) : message_(std::move(message)), code_(code > 0 ? code : 1) {}
    const char *what() const noexcept override { return message_.c_str(); }
    std::int32_t code() const noexcept { return code_; }

private:
    std::string message_;
    std::int32_t code_;
};

/// Thrown from `accept` to refuse a connection: the host's makeConnection fails with
/// connectionRefused and this reason.
class Refusal : public Error {
public:
    explicit Refusal(std::string reason) : Error(std::move(reason), 1) {}
};

/// What `handle` returns: bytes, built from text or bytes.
class Answer {
public:
    Answer() = default;
    Answer(std::string text) : bytes_(std::move(text)) {}
    Answer(std::string_view text) : bytes_(text) {}
    Answer(const char *text) : bytes_(text == nullptr ? "" : text) {}
    Answer(const std::vector<std::byte> &bytes) : bytes_(reinterpret_cast<const char *>(bytes.data()), bytes.size()) {}
    Answer(const std::vector<std::uint8_t> &bytes) : bytes_(reinterpret_cast<const char *>(bytes.data()), bytes.size()) {}
    Answer(ByteView bytes) : bytes_(reinterpret_cast<const char *>(bytes.data()), bytes.size()) {}

    std::string_view text() const noexcept { return bytes_; }
    std::size_t size() const noexcept { return bytes_.size(); }

private:
    std::string bytes_;
};

/// The host's answer to an ask, or why there is none.
class AskResult {
public:
    /// Whether the host answered.
    explicit operator bool() const noexcept { return status_ == 0; }
    /// 0, or the errno value of the failure: ENOTSUP (no handler), EREMOTEIO (the host's handler
    /// failed: `code()` and `message()`), ETIMEDOUT, ECONNRESET (the connection is closed),
    /// EBUSY, EMSGSIZE, ELOOP, EINVAL; see plugind_plugin.h.
    std::int32_t status() const noexcept { return status_; }
    std::string_view text() const noexcept { return bytes_; }
    ByteView bytes() const noexcept { return ByteView(reinterpret_cast<const std::byte *>(bytes_.data()), bytes_.size()); }
    /// The code and message the host's handler failed with (EREMOTEIO), or a description of
    /// the status.
    std::int32_t code() const noexcept { return code_; }
    const std::string &message() const noexcept { return message_; }

    static AskResult answered(std::string bytes) {
        AskResult result;
        result.bytes_ = std::move(bytes);
        return result;
    }
    static AskResult failed(std::int32_t status, std::int32_t code, std::string message) {
        AskResult result;
        result.status_ = status;
        result.code_ = code;
        result.message_ = std::move(message);
        return result;
    }

private:
    std::int32_t status_ = 0;
    std::int32_t code_ = 0;
    std::string bytes_;
    std::string message_;
};

/// What a plugin keeps for one connection: derive from it, return it from `accept`.
class ConnectionState {
public:
    virtual ~ConnectionState() = default;
};

enum class LogLevel : int { debug = PLUGIND_PLUGIN_LOG_DEBUG, info = PLUGIND_PLUGIN_LOG_INFO, warning = PLUGIND_PLUGIN_LOG_WARNING, error = PLUGIND_PLUGIN_LOG_ERROR };

/// The worker's services, valid for the plugin's lifetime; safe from any thread.
class Host {
public:
    explicit Host(const plugind_host *host) noexcept : host_(host) {}

    void log(LogLevel level, const std::string &message) const noexcept {
        host_->log(host_->context, static_cast<plugind_plugin_log_level>(level), message.c_str());
    }

    /// Asks the host on `connection` and waits for the answer (timeout 0: the request timeout).
    AskResult ask(std::uint32_t connection, std::string_view question, std::uint32_t timeout_milliseconds = 0) const {
        if (host_->abi_version < 2 || host_->ask == nullptr || host_->release_answer == nullptr) {
            return AskResult::failed(ENOTSUP, 0, "this worker cannot ask its host (plugin ABI 1)");
        }
        plugind_plugin_answer answer{};
        std::int32_t status = host_->ask(host_->context, connection, reinterpret_cast<const std::uint8_t *>(question.data()), question.size(),
                                         timeout_milliseconds, &answer);
        AskResult result = status == 0
            ? AskResult::answered(std::string(reinterpret_cast<const char *>(answer.bytes), answer.length))
            : AskResult::failed(status, answer.code, status == EREMOTEIO && answer.message != nullptr ? answer.message : std::strerror(status));
        if (status == 0 || status == EREMOTEIO) host_->release_answer(host_->context, &answer);
        return result;
    }

    const plugind_host *raw() const noexcept { return host_; }

private:
    const plugind_host *host_;
};

/// A connection a host opened: its identifier, the host's identifier, and the plugin's state for it.
class Connection {
public:
    Connection(const Host &host, std::uint32_t identifier, std::string host_identifier)
        : host_(host), identifier_(identifier), host_identifier_(std::move(host_identifier)) {}

    std::uint32_t identifier() const noexcept { return identifier_; }
    /// The identifier of the host application that opened it.
    const std::string &host_identifier() const noexcept { return host_identifier_; }
    /// The state `accept` returned, as T (nullptr when there is none or it is another type).
    template <class T> T *state() const noexcept { return dynamic_cast<T *>(state_.get()); }
    /// Asks the host on this connection; safe from any thread, also after the request returned
    /// (a closed connection answers ECONNRESET).
    AskResult ask(std::string_view question, std::uint32_t timeout_milliseconds = 0) const {
        return host_.ask(identifier_, question, timeout_milliseconds);
    }

private:
    template <class> friend struct Adapter;
    const Host &host_;
    std::uint32_t identifier_;
    std::string host_identifier_;
    std::unique_ptr<ConnectionState> state_;
};

/// One request, valid while `handle` runs.
class Request {
public:
    Request(const Host &host, const plugind_plugin_request &request, Connection *connection) noexcept
        : host_(host), request_(request), connection_(connection) {}

    ByteView bytes() const noexcept { return ByteView(reinterpret_cast<const std::byte *>(request_.bytes), request_.length); }
    std::string_view text() const noexcept { return std::string_view(reinterpret_cast<const char *>(request_.bytes), request_.length); }
    std::uint64_t identifier() const noexcept { return request_.identifier; }
    /// The connection it came on; nullptr for a request on none.
    Connection *connection() const noexcept { return connection_; }
    /// Asks the host on the request's connection (ENOTSUP without one).
    AskResult ask(std::string_view question, std::uint32_t timeout_milliseconds = 0) const {
        if (connection_ == nullptr) return AskResult::failed(ENOTSUP, 0, "the request came on no connection");
        return connection_->ask(question, timeout_milliseconds);
    }
    /// True once the host cancelled the request or gave up on it: return early.
    bool cancelled() const noexcept { return host_.raw()->is_cancelled(host_.raw()->context, request_.identifier); }
    void report_progress(std::uint64_t completed, std::uint64_t total) const noexcept {
        host_.raw()->report_progress(host_.raw()->context, request_.identifier, completed, total);
    }
    /// Sends an event tied to this request.
    void post(std::string_view bytes) const noexcept {
        host_.raw()->post_message(host_.raw()->context, request_.identifier, reinterpret_cast<const std::uint8_t *>(bytes.data()), bytes.size());
    }

private:
    const Host &host_;
    const plugind_plugin_request &request_;
    Connection *connection_;
};

/// Progress of a request, as RAII: `advance` reports each step; the destructor reports the work
/// done, so a request that returns early (cancelled, or by an exception) still ends its bar.
class Progress {
public:
    Progress(const Request &request, std::uint64_t total) noexcept : request_(request), total_(total) { request_.report_progress(0, total_); }
    Progress(const Progress &) = delete;
    Progress &operator=(const Progress &) = delete;
    ~Progress() { request_.report_progress(total_ == 0 ? completed_ : total_, total_); }

    void advance(std::uint64_t steps = 1) noexcept {
        completed_ += steps;
        request_.report_progress(completed_, total_);
    }
    std::uint64_t completed() const noexcept { return completed_; }

private:
    const Request &request_;
    std::uint64_t total_;
    std::uint64_t completed_ = 0;
};

/// Thrown by `throw_if_cancelled`: ends a cancelled request (the host discards its answer).
class Cancelled : public Error {
public:
    Cancelled() : Error("cancelled", 1) {}
};

inline void throw_if_cancelled(const Request &request) {
    if (request.cancelled()) throw Cancelled();
}

/// The class a plugin derives from. Made once, with the worker's Host, when the library loads.
class Plugin {
public:
    virtual ~Plugin() = default;
    /// Answers one request. Throw to fail it.
    virtual Answer handle(Request &request) = 0;
    /// A host opened `connection`: return its state (or nullptr), or throw plugind::Refusal.
    virtual std::unique_ptr<ConnectionState> accept(const Connection &connection) {
        (void)connection;
        return nullptr;
    }
    /// The host closed `connection`; its state is destroyed after this returns.
    virtual void close(const Connection &connection) { (void)connection; }
};

/// The glue between plugind_plugin and a Plugin class `P` (constructible from Host&).
template <class P> struct Adapter {
    struct Instance {
        Host host;
        std::unique_ptr<P> plugin;
    };

    static void fail(const plugind_host *host, plugind_plugin_response *response, const char *message) noexcept {
        host->set_error(response, message);
    }

    /// Runs `body`, turning what it throws into an error on `response`; returns its status.
    template <class Body> static std::int32_t guarded(const plugind_host *host, plugind_plugin_response *response, Body &&body) noexcept {
        try {
            return body();
        } catch (const Error &error) {
            fail(host, response, error.what());
            return error.code();
        } catch (const std::bad_alloc &) {
            fail(host, response, "out of memory");
            return ENOMEM;
        } catch (const std::exception &error) {
            std::string message = std::string("C++ exception: ") + error.what();
            fail(host, response, message.c_str());
            return 1;
        } catch (...) {
            fail(host, response, "C++ exception of an unknown type");
            return 1;
        }
    }

    static std::int32_t init(const plugind_host *host, void **state, plugind_plugin_response *error) noexcept {
        return guarded(host, error, [&]() -> std::int32_t {
            auto instance = std::make_unique<Instance>(Instance{Host(host), nullptr});
            instance->plugin = std::make_unique<P>(instance->host);
            *state = instance.release();
            return PLUGIND_PLUGIN_OK;
        });
    }

    static std::int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) noexcept {
        auto *instance = static_cast<Instance *>(state);
        const plugind_host *host = instance->host.raw();
        return guarded(host, response, [&]() -> std::int32_t {
            Request wrapped(instance->host, *request, static_cast<Connection *>(request->connection_state));
            Answer answer = instance->plugin->handle(wrapped);
            std::int32_t status = host->append(response, reinterpret_cast<const std::uint8_t *>(answer.text().data()), answer.size());
            if (status == EMSGSIZE || status == ENOMEM) {
                std::string message = "the answer of " + std::to_string(answer.size()) + " bytes is over the worker's message limit";
                fail(host, response, message.c_str());
                return EMSGSIZE;
            }
            return status;
        });
    }

    static void deinit(void *state) noexcept {
        try {
            delete static_cast<Instance *>(state);
        } catch (...) {
            // A destructor that throws ends nothing but itself: the worker is exiting.
        }
    }

    static std::int32_t accept(void *state, const plugind_plugin_connection *connection, void **connection_state,
                               plugind_plugin_response *refusal) noexcept {
        auto *instance = static_cast<Instance *>(state);
        return guarded(instance->host.raw(), refusal, [&]() -> std::int32_t {
            auto record = std::make_unique<Connection>(instance->host, connection->identifier, connection->host_identifier);
            record->state_ = instance->plugin->accept(*record);
            *connection_state = record.release();
            return PLUGIND_PLUGIN_OK;
        });
    }

    static void close(void *state, const plugind_plugin_connection *connection, void *connection_state) noexcept {
        (void)connection;
        auto *instance = static_cast<Instance *>(state);
        std::unique_ptr<Connection> record(static_cast<Connection *>(connection_state));
        if (!record) return;
        try {
            instance->plugin->close(*record);
        } catch (const std::exception &error) {
            instance->host.log(LogLevel::error, std::string("close threw: ") + error.what());
        } catch (...) {
            instance->host.log(LogLevel::error, "close threw an exception of an unknown type");
        }
    }

    static constexpr plugind_plugin descriptor(const char *name, const char *version, std::uint32_t concurrency) noexcept {
        plugind_plugin plugin{};
        plugin.abi_version = PLUGIND_PLUGIN_ABI_VERSION;
        plugin.size = sizeof(plugind_plugin);
        plugin.name = name;
        plugin.version = version;
        plugin.init = &Adapter::init;
        plugin.handle = &Adapter::handle;
        plugin.deinit = &Adapter::deinit;
        plugin.concurrency = concurrency;
        plugin.accept = &Adapter::accept;
        plugin.close = &Adapter::close;
        return plugin;
    }
};

namespace detail {
/// The binding note (see PLUGIND_PLUGIN_BINDING in plugind_plugin.h, which is C only: C++ does
/// not let a string literal fill an array without room for its NUL).
template <std::size_t Size> struct BindingNote {
    std::uint32_t name_size;
    std::uint32_t description_size;
    std::uint32_t type;
    char name[8];
    char description[Size];
};

inline constexpr char binding_prefix[] = "extensionPoint=";

template <std::size_t PointSize> constexpr BindingNote<sizeof(binding_prefix) - 1 + PointSize - 1> binding_note(const char (&point)[PointSize]) {
    BindingNote<sizeof(binding_prefix) - 1 + PointSize - 1> note{};
    note.name_size = 8;
    note.description_size = static_cast<std::uint32_t>(sizeof(binding_prefix) - 1 + PointSize - 1);
    note.type = PLUGIND_PLUGIN_NOTE_TYPE_BINDING;
    const char name[] = "plugind";
    for (std::size_t index = 0; index < sizeof(name); index++) note.name[index] = name[index];
    for (std::size_t index = 0; index + 1 < sizeof(binding_prefix); index++) note.description[index] = binding_prefix[index];
    for (std::size_t index = 0; index + 1 < PointSize; index++) note.description[sizeof(binding_prefix) - 1 + index] = point[index];
    return note;
}
} // namespace detail

} // namespace plugind

/// Records the extension point the code serves in the library, where `plugind verify` compares
/// it with the manifest without running code (the C++ spelling of PLUGIND_PLUGIN_BINDING).
#define PLUGIND_CPP_BINDING(extension_point)                                                                     \
    __attribute__((used, section(".note.plugind"), aligned(4))) static constexpr auto plugind_cpp_binding_record = \
        plugind::detail::binding_note(extension_point)

/// Exports `Type` (a plugind::Plugin constructible from plugind::Host&) as the plugin, named
/// `name` at `version`; PLUGIND_CPP_PLUGIN_CONCURRENT also lets `concurrency` requests run at once.
#define PLUGIND_CPP_PLUGIN_CONCURRENT(Type, name, version, concurrency)                                         \
    static const plugind_plugin plugind_cpp_descriptor = plugind::Adapter<Type>::descriptor(name, version, concurrency); \
    extern "C" PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &plugind_cpp_descriptor; } \
    static_assert(true, "")

#define PLUGIND_CPP_PLUGIN(Type, name, version) PLUGIND_CPP_PLUGIN_CONCURRENT(Type, name, version, 1)

#endif /* PLUGIND_PLUGIN_HPP */
