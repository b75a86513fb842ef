// A thread's stack as return addresses and the loaded objects they lie in, taken inside a signal
// handler: for the fatal-signal report (the faulting thread) and for the host's question "where
// is request N" (the thread serving it, reached with `PLUGIND_SHIM_STACK_SIGNAL`). Names are not
// looked up here: the host symbolizes the addresses from its own copies of the objects.
//
// Async-signal-safe: the unwinder is libgcc's, warmed up before any plugin code runs (its first
// call loads libgcc_s and allocates), and it finds each object's unwind tables through glibc's
// `_dl_find_object`, which takes no lock. A stack the plugin corrupted can make the unwinder read
// unmapped memory: that fault is caught on this thread and the frames found so far are reported.
#include "plugind_shims.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

enum {
    max_frames = PLUGIND_SHIM_STACK_MAX_FRAMES,
    max_modules = PLUGIND_SHIM_STACK_MAX_MODULES,
    max_path = PLUGIND_SHIM_STACK_MAX_PATH,
    thread_slots = 160,
};

// MARK: Unwinding one thread

struct unwind_walk {
    uintptr_t addresses[max_frames + 8];
    size_t count;
};

static _Thread_local sigjmp_buf *unwind_escape;

static _Unwind_Reason_Code record_frame(struct _Unwind_Context *context, void *argument) {
    struct unwind_walk *walk = argument;
    if (walk->count >= sizeof walk->addresses / sizeof walk->addresses[0]) return _URC_END_OF_STACK;
    uintptr_t address = (uintptr_t)_Unwind_GetIP(context);
    if (address == 0) return _URC_END_OF_STACK;
    walk->addresses[walk->count++] = address;
    return _URC_NO_REASON;
}

// A fault while unwinding, on the unwinding thread: back to `unwind_stack` with what was found.
// On another thread it is that thread's own crash, reported as such.
static void unwinding_fault(int signal_number, siginfo_t *info, void *context) {
    if (unwind_escape != NULL) siglongjmp(*unwind_escape, 1);
    // As the report's own handler would leave it: the fault, re-executed, kills the process.
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigaction(signal_number, &fallback, NULL);
    plugind_shim_report_fatal_signal(signal_number, info, context);
}

static void unwind_stack(struct unwind_walk *walk) {
    struct sigaction guard, previous_segv, previous_bus;
    memset(&guard, 0, sizeof guard);
    guard.sa_sigaction = unwinding_fault;
    guard.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&guard.sa_mask);
    sigaction(SIGSEGV, &guard, &previous_segv);
    sigaction(SIGBUS, &guard, &previous_bus);
    sigjmp_buf escape;
    walk->count = 0;
    if (sigsetjmp(escape, 1) == 0) {
        unwind_escape = &escape;
        _Unwind_Backtrace(record_frame, walk);
    }
    unwind_escape = NULL;
    sigaction(SIGSEGV, &previous_segv, NULL);
    sigaction(SIGBUS, &previous_bus, NULL);
}

// MARK: Encoding

static void put_le(uint8_t *destination, uint64_t value, size_t width) {
    for (size_t index = 0; index < width; index++) destination[index] = (uint8_t)(value >> (8 * index));
}

static void put(uint8_t **cursor, uint64_t value, size_t width) {
    put_le(*cursor, value, width);
    *cursor += width;
}

// The length of the well-formed UTF-8 sequence at `text` (Unicode's table 3-7: no overlong
// forms, no surrogates, nothing past U+10FFFF) within `available` bytes, or 0.
static size_t utf8_sequence(const uint8_t *text, size_t available) {
    uint8_t lead = text[0];
    size_t length;
    uint8_t low = 0x80, high = 0xBF;
    if (lead < 0x80) return 1;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) low = 0xA0;
        if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) low = 0x90;
        if (lead == 0xF4) high = 0x8F;
    } else {
        return 0;
    }
    if (available < length) return 0;
    if (text[1] < low || text[1] > high) return 0;
    for (size_t index = 2; index < length; index++) {
        if (text[index] < 0x80 || text[index] > 0xBF) return 0;
    }
    return length;
}

size_t plugind_shim_stack_object_path(const char *name, uint8_t *output, size_t capacity) {
    const uint8_t *text = (const uint8_t *)name;
    size_t length = strnlen(name, capacity);
    // strnlen stopped short of the NUL: the byte at `length` is still the string's.
    int cut = length == capacity && name[length] != '\0';
    size_t written = 0;
    while (written < length) {
        size_t sequence = utf8_sequence(text + written, length - written);
        if (sequence == 0) {
            // A character the cut splits is left out; any other byte that begins no character
            // stands as '?', since the host refuses a path that is not UTF-8.
            if (cut && text[written] >= 0xC2 && written + 4 > length) break;
            output[written++] = '?';
            continue;
        }
        memcpy(output + written, text + written, sequence);
        written += sequence;
    }
    return written;
}

static uintptr_t interrupted_address(const void *context) {
#if defined(__x86_64__)
    return (uintptr_t)((const ucontext_t *)context)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)((const ucontext_t *)context)->uc_mcontext.pc;
#else
    (void)context;
    return 0;
#endif
}

size_t plugind_shim_encode_stack(uint8_t reason, const void *context, uint8_t *output, size_t capacity) {
    struct unwind_walk walk;
    unwind_stack(&walk);

    // The walk starts in this handler: the interrupted frame is the one at the interrupted
    // address (the signal frame's own CFI leads there); without it, only that address is known.
    uintptr_t interrupted = context != NULL ? interrupted_address(context) : 0;
    size_t first = walk.count;
    for (size_t index = 0; index < walk.count; index++) {
        if (walk.addresses[index] == interrupted) {
            first = index;
            break;
        }
    }
    uintptr_t frames[max_frames];
    size_t frame_count = 0;
    uint8_t truncated = 0;
    if (first == walk.count) {
        if (interrupted != 0) frames[frame_count++] = interrupted;
    } else {
        for (size_t index = first; index < walk.count; index++) {
            if (frame_count == max_frames) {
                truncated = 1;
                break;
            }
            frames[frame_count++] = walk.addresses[index];
        }
    }

    // The object of each frame; a return address is looked up one byte back, in its call.
    struct link_map *maps[max_modules];
    uintptr_t starts[max_modules];
    size_t module_count = 0;
    uint8_t frame_module[max_frames];
    for (size_t index = 0; index < frame_count; index++) {
        frame_module[index] = 0xFF;
        struct dl_find_object found;
        void *lookup = (void *)(frames[index] - (index > 0 ? 1 : 0));
        if (_dl_find_object(lookup, &found) != 0 || found.dlfo_link_map == NULL) continue;
        size_t module = 0;
        while (module < module_count && maps[module] != found.dlfo_link_map) module++;
        if (module == module_count) {
            if (module_count == max_modules) {
                truncated = 1;
                continue;
            }
            maps[module_count] = found.dlfo_link_map;
            starts[module_count] = (uintptr_t)found.dlfo_map_start;
            module_count++;
        }
        frame_module[index] = (uint8_t)module;
    }

    // reason u8, flags u8 (1: truncated), module count u8, frame count u8; per module: load bias
    // u64, start u64, path length u16, path; per frame: address u64, module index u8 (0xFF: none).
    uint8_t *cursor = output;
    uint8_t *end = output + capacity;
    if (capacity < 4) return 0;
    put(&cursor, reason, 1);
    uint8_t *flags = cursor;
    put(&cursor, truncated, 1);
    uint8_t *module_count_field = cursor;
    put(&cursor, 0, 1);
    uint8_t *frame_count_field = cursor;
    put(&cursor, 0, 1);
    size_t written_modules = 0;
    for (size_t module = 0; module < module_count; module++) {
        const char *name = maps[module]->l_name != NULL ? maps[module]->l_name : "";
        if ((size_t)(end - cursor) < 18 + strnlen(name, max_path) + (size_t)frame_count * 9) break;
        put(&cursor, (uint64_t)maps[module]->l_addr, 8);
        put(&cursor, (uint64_t)starts[module], 8);
        size_t length = plugind_shim_stack_object_path(name, cursor + 2, max_path);
        put(&cursor, length, 2);
        cursor += length;
        written_modules++;
    }
    size_t written_frames = 0;
    for (size_t index = 0; index < frame_count && (size_t)(end - cursor) >= 9; index++) {
        put(&cursor, (uint64_t)frames[index], 8);
        uint8_t module = frame_module[index];
        put(&cursor, module < written_modules ? module : 0xFF, 1);
        written_frames++;
    }
    if (written_modules < module_count || written_frames < frame_count) *flags = 1;
    *module_count_field = (uint8_t)written_modules;
    *frame_count_field = (uint8_t)written_frames;
    return (size_t)(cursor - output);
}

// MARK: Where a request is

// Each request thread's slot: its thread id and the request it serves now (0: none). Read by the
// handler of whichever thread the host's signal reaches, written by the slot's own thread.
static struct {
    _Atomic pid_t thread;
    _Atomic uint64_t request;
} slots[thread_slots];
static _Atomic size_t slots_used;
static _Thread_local int own_slot = -1;

uint64_t plugind_shim_stack_serve_request(uint64_t request) {
    if (own_slot < 0) {
        size_t slot = atomic_fetch_add(&slots_used, 1);
        if (slot >= thread_slots) return 0;
        own_slot = (int)slot;
        atomic_store(&slots[slot].thread, (pid_t)syscall(SYS_gettid));
    }
    return atomic_exchange(&slots[own_slot].request, request);
}

static int report_fd = -1;
static uint8_t header_template[64];
static size_t header_length;

void plugind_shim_write_stack_frame(uint8_t reason, uint64_t request, const void *context) {
    if (report_fd < 0) return;
    uint8_t frame[sizeof header_template + PLUGIND_SHIM_STACK_REPORT_CAPACITY];
    memcpy(frame, header_template, header_length);
    size_t length = 4;
    if (reason != 2) {
        length = plugind_shim_encode_stack(reason, context, frame + header_length, PLUGIND_SHIM_STACK_REPORT_CAPACITY);
    } else {
        // Nobody serves the request: an empty report, so that the host need not wait.
        memset(frame + header_length, 0, 4);
        frame[header_length] = 1;
    }
    if (length == 0) return;
    put_le(frame + PLUGIND_SHIM_FRAME_REQUEST_OFFSET, request, 8);
    put_le(frame + PLUGIND_SHIM_FRAME_LENGTH_OFFSET, (uint32_t)length, 4);
    // At most PIPE_BUF bytes: one write the kernel does not interleave with another writer's.
    ssize_t ignored = write(report_fd, frame, header_length + length);
    (void)ignored;
}

// The host's question, as a queued signal whose value is the request. On the thread serving it
// the answer is written here; another thread passes the question on to that one.
static void answer_stack_signal(int signal_number, siginfo_t *info, void *context) {
    int saved_errno = errno;
    uint64_t request = (uint64_t)(uintptr_t)info->si_value.sival_ptr;
    if (info->si_code == SI_QUEUE && request != 0) {
        if (own_slot >= 0 && atomic_load(&slots[own_slot].request) == request) {
            plugind_shim_write_stack_frame(1, request, context);
        } else {
            pid_t target = 0;
            size_t used = atomic_load(&slots_used);
            for (size_t slot = 0; slot < used && slot < thread_slots; slot++) {
                if (atomic_load(&slots[slot].request) == request) target = atomic_load(&slots[slot].thread);
            }
            if (target == 0 || syscall(SYS_rt_tgsigqueueinfo, getpid(), target, signal_number, info) != 0) {
                plugind_shim_write_stack_frame(2, request, NULL);
            }
        }
    }
    errno = saved_errno;
}

int plugind_shim_stack_capture_prepare(int fd, const uint8_t *frame_header, size_t length) {
    if (length > sizeof header_template || length < PLUGIND_SHIM_FRAME_LENGTH_OFFSET + 4) return EINVAL;
    // The first walk loads libgcc_s and allocates its caches: here, not in a signal handler.
    struct unwind_walk walk;
    walk.count = 0;
    _Unwind_Backtrace(record_frame, &walk);
    memcpy(header_template, frame_header, length);
    header_length = length;
    report_fd = fd;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = answer_stack_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&action.sa_mask);
    return sigaction(PLUGIND_SHIM_STACK_SIGNAL, &action, NULL) == 0 ? 0 : errno;
}
