// The report a dying worker sends to its host: which signal, where, and how close the process was
// to its memory and descriptor limits, so the host can say "memory limit 256 MiB" rather than
// only "SIGSEGV"; then, in a second frame, the faulting thread's stack (`stack_capture.c`), so
// that a stack the unwinder cannot walk costs the backtrace and never the report. Runs inside a
// signal handler: async-signal-safe system calls only.
#include "plugind_shims.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { max_header = 64, alternate_stack_size = 64 * 1024 };

static int report_fd = -1;
static int statm_fd = -1;
static int descriptor_directory_fd = -1;
static uint8_t header_template[max_header];
static size_t header_template_length;

static int reported;

// SIGXCPU is the kernel's notice at the soft CPU limit; reporting it lets the host name the limit.
static const int reported_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP, SIGXCPU};

static void put_le(uint8_t *destination, uint64_t value, size_t width) {
    for (size_t index = 0; index < width; index++) destination[index] = (uint8_t)(value >> (8 * index));
}

static uint64_t address_space_bytes(void) {
    // First field of /proc/self/statm: total program size in pages.
    char text[64];
    if (statm_fd < 0) return 0;
    ssize_t length = pread(statm_fd, text, sizeof text - 1, 0);
    if (length <= 0) return 0;
    uint64_t pages = 0;
    for (ssize_t index = 0; index < length && text[index] >= '0' && text[index] <= '9'; index++) {
        pages = pages * 10 + (uint64_t)(text[index] - '0');
    }
    return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t open_descriptor_count(void) {
    if (descriptor_directory_fd < 0) return 0;
    if (lseek(descriptor_directory_fd, 0, SEEK_SET) < 0) return 0;
    char buffer[4096];
    uint64_t count = 0;
    for (;;) {
        long length = syscall(SYS_getdents64, descriptor_directory_fd, buffer, sizeof buffer);
        if (length <= 0) break;
        for (long offset = 0; offset < length;) {
            struct dirent64 *entry = (struct dirent64 *)(buffer + offset);
            if (entry->d_name[0] != '.') count++;
            offset += entry->d_reclen;
        }
    }
    // Leave out the directory descriptor itself.
    return count > 0 ? count - 1 : 0;
}

void plugind_shim_report_fatal_signal(int signal_number, siginfo_t *info, void *context) {
    int saved_errno = errno;
    // The first thread to crash reports; another one crashing meanwhile dies with it.
    if (!__atomic_exchange_n(&reported, 1, __ATOMIC_SEQ_CST)) {
        uint8_t frame[max_header + PLUGIND_SHIM_FATAL_REPORT_PAYLOAD_SIZE];
        memcpy(frame, header_template, header_template_length);
        uint8_t *payload = frame + header_template_length;
        put_le(payload, (uint32_t)signal_number, 4);
        put_le(payload + 4, (uint32_t)info->si_code, 4);
        put_le(payload + 8, (uint64_t)(uintptr_t)info->si_addr, 8);
        put_le(payload + 16, address_space_bytes(), 8);
        put_le(payload + 24, open_descriptor_count(), 8);
        ssize_t ignored = write(report_fd, frame, header_template_length + PLUGIND_SHIM_FATAL_REPORT_PAYLOAD_SIZE);
        (void)ignored;
        if (signal_number != SIGXCPU) plugind_shim_write_stack_frame(0, 0, context);
    }
    // SA_RESETHAND restored the default action. A fault re-executes the faulting instruction and
    // dies of it. A signal someone raised, and SIGXCPU, which would otherwise only come back a
    // second later, are raised again; as pid 1 of its namespace the worker ignores raised signals
    // with default action, so it exits instead (the report names the signal).
    if (info->si_code <= 0 || signal_number == SIGXCPU) {
        raise(signal_number);
        if (getpid() == 1) _exit(128 + signal_number);
    }
    errno = saved_errno;
}

int plugind_shim_install_alternate_signal_stack(void) {
    // Kept when the thread has one: the thread that loads the plugin installs its own before it
    // takes its turns serving.
    stack_t current;
    if (sigaltstack(NULL, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return 0;
    // Mapped, not allocated: its pages cost nothing until a signal lands on it (a malloc'd one
    // made the heap pages of its chunk's headers this worker's own, a page each end, in every
    // serving thread), and the page below it stays inaccessible, so a handler that overflows it
    // faults instead of writing over whatever lies below.
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *mapping = mmap(NULL, page + alternate_stack_size, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (mapping == MAP_FAILED) return errno;
    if (mprotect(mapping, page, PROT_NONE) != 0) {
        int failure = errno;
        munmap(mapping, page + alternate_stack_size);
        return failure;
    }
    stack_t alternate;
    memset(&alternate, 0, sizeof alternate);
    alternate.ss_sp = mapping + page;
    alternate.ss_size = alternate_stack_size;
    if (sigaltstack(&alternate, NULL) != 0) {
        int failure = errno;
        munmap(mapping, page + alternate_stack_size);
        return failure;
    }
    return 0;
}

int plugind_shim_install_fatal_signal_report(int fd, const uint8_t *frame_header, size_t header_length) {
    if (header_length > max_header) return EINVAL;
    memcpy(header_template, frame_header, header_length);
    header_template_length = header_length;
    report_fd = fd;
    statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    descriptor_directory_fd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    int result = plugind_shim_install_alternate_signal_stack();
    if (result != 0) return result;

    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = plugind_shim_report_fatal_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    for (size_t index = 0; index < sizeof reported_signals / sizeof reported_signals[0]; index++) {
        if (sigaction(reported_signals[index], &action, NULL) != 0) return errno;
    }
    return 0;
}
