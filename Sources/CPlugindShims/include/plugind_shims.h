/*
 * plugind_shims.h — the C that Swift cannot or must not do: spawning a worker with no Swift
 * between fork and exec, pidfd syscalls glibc does not wrap, wait status with resource usage,
 * and the async-signal-safe fatal-signal report a worker sends before it dies.
 *
 * Convention: functions return 0 or an errno value; results go out through out-parameters.
 */
#ifndef PLUGIND_SHIMS_H
#define PLUGIND_SHIMS_H

#ifndef __linux__
#error "plugind supports Linux only"
#endif

#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Start the child in a new session (setsid), so terminal signals for the host's process group
/// do not reach it.
#define PLUGIND_SHIM_SPAWN_NEW_SESSION (1 << 0)
/// Kill the child with SIGKILL when the spawning thread exits (PR_SET_PDEATHSIG).
#define PLUGIND_SHIM_SPAWN_DIE_WITH_PARENT (1 << 1)
/// Make the child pid 1 of a new pid namespace: everything it starts dies with it.
#define PLUGIND_SHIM_SPAWN_NEW_PID_NAMESPACE (1 << 2)
/// Also create a user namespace mapping `uid` and `gid` to the same ids outside: for an
/// unprivileged caller its own ids, which the child maps itself; for root an unprivileged id and
/// root itself, which the caller maps before the child goes on (the child, root of the namespace,
/// clears its supplementary groups, builds its view and then takes `uid` and `gid`). The child
/// keeps the namespace's capabilities until it drops them. Forks only (not `plugind_shim_spawn`).
#define PLUGIND_SHIM_SPAWN_NEW_USER_NAMESPACE (1 << 3)

/// Make the new process a child of the caller's parent (CLONE_PARENT), not of the caller: the
/// pre-forked launcher uses it so that the host is the worker's parent and reaps it.
#define PLUGIND_SHIM_SPAWN_SIBLING (1 << 4)

/// A new mount namespace (with the user namespace): the worker builds its view in it.
#define PLUGIND_SHIM_SPAWN_NEW_MOUNT_NAMESPACE (1 << 5)
/// A new IPC namespace: no System V IPC or POSIX message queue of the host is reachable.
#define PLUGIND_SHIM_SPAWN_NEW_IPC_NAMESPACE (1 << 6)
/// Not a spawn option: tells the pre-forked launcher that the worker must restrict nothing
/// before it knows its plugin (the host turned its confinement, or a layer of it, off).
#define PLUGIND_SHIM_SPAWN_NO_ADVANCE_RESTRICTIONS (1 << 7)
/// clone() with CLONE_NEWNET: a network namespace of the child's own (only a loopback interface,
/// down), where no abstract unix name, socket table or interface of the host exists.
#define PLUGIND_SHIM_SPAWN_NEW_NET_NAMESPACE (1 << 8)

/// Spawns only: the child raises its OOM score adjustment to `oom_score_adj` (when lower) before
/// it execs, while it is still dumpable: an exec'd image that is not dumpable finds its
/// `/proc/self/oom_score_adj` owned by root and cannot raise it itself, unless the caller is root.
/// Best effort: a failure does not fail the spawn.
#define PLUGIND_SHIM_SPAWN_RAISE_OOM_SCORE (1 << 9)
/// The child stays in the caller's working directory instead of "/": for a program of the user's
/// (a callback's handler), which names files relative to where the user is.
#define PLUGIND_SHIM_SPAWN_KEEP_DIRECTORY (1 << 10)
/// The most descriptors a spawn request, or a message on a unix socket, may carry: the worker's
/// five and up to 64 sealed files.
#define PLUGIND_SHIM_SPAWN_MAX_DESCRIPTORS 80

typedef struct plugind_shim_spawn_request {
    /// Absolute path of the executable.
    const char *_Nonnull path;
    /// NULL-terminated argument and environment vectors, built by the caller.
    char *_Nullable const *_Nonnull argv;
    char *_Nullable const *_Nonnull envp;
    /// `descriptors[i]` becomes descriptor `i` in the child; everything above is closed.
    const int *_Nonnull descriptors;
    int descriptor_count;
    /// PLUGIND_SHIM_SPAWN_* flags.
    int flags;
    /// The ids the child holds in its user namespace (mapped to the same ids outside); see
    /// PLUGIND_SHIM_SPAWN_NEW_USER_NAMESPACE.
    uid_t uid;
    gid_t gid;
    /// How many ids from `uid` and `gid` on are mapped (1 but for a privileged caller, which maps
    /// a range for the child to pick from).
    unsigned int id_count;
    /// A descriptor above the mapped range that stays open in the child, or -1.
    int keep_descriptor;
    /// Forks only: files (a control group's cgroup.procs) the parent writes the child's pid to
    /// before the child goes on, so that it runs no code of its own outside the group.
    const char *_Nullable const *_Nullable cgroup_files;
    int cgroup_file_count;
    /// Spawns only: a close-on-exec descriptor of the executable to run instead of `path`
    /// (execveat with AT_EMPTY_PATH), or -1. It must also be `keep_descriptor`, so numbered at or
    /// above `descriptor_count`.
    int executable_descriptor;
    /// Forks only: where the kernel stores the child's pid as it creates it (clone's
    /// CLONE_PARENT_SETTID), or NULL. The launcher points it into a page it shares with the host,
    /// so that a child is known to the host, its parent, even when the launcher is killed between
    /// the fork and its answer.
    int32_t *_Nullable record_child_pid;
    /// See PLUGIND_SHIM_SPAWN_RAISE_OOM_SCORE (-1000 to 1000).
    int oom_score_adj;
} plugind_shim_spawn_request;

/// Spawns a process with clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD): the child runs only
/// async-signal-safe code (signal reset, setsid, prctl, dup2, close_range, execve) and the
/// caller is suspended until it has exec'd. Returns 0 with the pid and a close-on-exec pidfd, or
/// the errno of the step that failed (the failed child is reaped before returning).
/// Thread-safe. PR_SET_PDEATHSIG follows the calling thread: call it from a thread that lives as
/// long as the child should.
int plugind_shim_spawn(const plugind_shim_spawn_request *_Nonnull request, pid_t *_Nonnull pid,
                       int *_Nonnull pidfd);

/// Forks the calling process (which must be single-threaded: the pre-forked launcher) into a
/// worker: the child gets the descriptors, session, namespaces and parent-death signal of
/// `request` (whose path, argv and envp are ignored) and returns with `*is_child` set to 1; the
/// parent returns at once with the child's pid, or the errno of a failed clone. A child whose
/// set-up fails writes the errno to its output descriptor (`descriptors[1]`) and exits with 127.
int plugind_shim_fork_worker(const plugind_shim_spawn_request *_Nonnull request, pid_t *_Nonnull pid,
                             int *_Nonnull is_child);

/// Forks the calling (single-threaded) process into a *spare* worker: a process with the session,
/// namespaces and parent-death signal of `request` that keeps only descriptors 0 to 2 and
/// `request->keep_descriptor`, and waits there for its real descriptors
/// (`plugind_shim_install_descriptors`). Returns like `plugind_shim_fork_worker`.
int plugind_shim_fork_spare(const plugind_shim_spawn_request *_Nonnull request, pid_t *_Nonnull pid,
                            int *_Nonnull is_child);

/// Makes `request->descriptors[i]` descriptor `i` of the calling process and closes every other
/// descriptor (but `request->keep_descriptor`). For a spare worker taking up its work.
int plugind_shim_install_descriptors(const plugind_shim_spawn_request *_Nonnull request);

/// Sends `length` bytes and `count` descriptors (SCM_RIGHTS) in one datagram on a unix socket.
int plugind_shim_send_descriptors(int socket, const void *_Nonnull bytes, size_t length,
                                  const int *_Nullable descriptors, int count);

/// Receives one datagram and up to `capacity` descriptors (close-on-exec). `*length` 0 with
/// `*count` 0 means the peer closed the socket.
int plugind_shim_receive_descriptors(int socket, void *_Nonnull bytes, size_t byte_capacity,
                                     size_t *_Nonnull length, int *_Nonnull descriptors, int capacity,
                                     int *_Nonnull count);

/// Creates a connected pair of SOCK_SEQPACKET unix sockets, close-on-exec.
int plugind_shim_socket_pair(int *_Nonnull first, int *_Nonnull second);

/// Wraps `pidfd_open(2)`.
int plugind_shim_pidfd_open(pid_t pid, int *_Nonnull pidfd);

/// Wraps `pidfd_send_signal(2)`.
int plugind_shim_pidfd_send_signal(int pidfd, int signal);

/// How a process ended, with the resources it used.
typedef struct plugind_shim_exit_info {
    /// 0: still running (only with `no_hang`); 1: exited; 2: killed by a signal; 3: killed by a
    /// signal and dumped core.
    int state;
    /// Exit status (state 1) or signal number (states 2 and 3).
    int value;
    /// CPU time consumed, in microseconds.
    uint64_t user_microseconds;
    uint64_t system_microseconds;
    /// Peak resident set size in KiB.
    uint64_t max_resident_kilobytes;
} plugind_shim_exit_info;

/// Reaps the child behind `pidfd` with waitid(P_PIDFD), collecting its resource usage.
/// With `no_hang`, returns 0 and state 0 when the child is still running. Retries EINTR.
int plugind_shim_pidfd_wait(int pidfd, int no_hang, plugind_shim_exit_info *_Nonnull info);

/// The abbreviated name of a signal ("SEGV"), or NULL when unknown. Static storage.
const char *_Nullable plugind_shim_signal_abbreviation(int signal);

/// Wraps `close_range(2)` with flags 0.
int plugind_shim_close_range(unsigned int first, unsigned int last);

/// Wraps `pipe2(2)` with O_CLOEXEC.
int plugind_shim_pipe(int *_Nonnull read_end, int *_Nonnull write_end);

/// Sets the close-on-exec flag on `fd`.
int plugind_shim_set_cloexec(int fd);

/// Sets O_NONBLOCK on `fd`.
int plugind_shim_set_nonblocking(int fd);

/// Wraps fcntl(F_SETPIPE_SZ) / fcntl(F_GETPIPE_SZ).
int plugind_shim_set_pipe_size(int fd, int size, int *_Nonnull actual);

/// Names the calling thread (at most 15 bytes show) as ps, top and /proc/PID/task/TID/comm see it.
int plugind_shim_set_thread_name(const char *_Nonnull name);

/// Creates a file from `template_path` (ending in XXXXXX, which is replaced), exclusively and
/// close-on-exec (`mkostemp`); its descriptor in `fd`.
int plugind_shim_make_temporary_file(char *_Nonnull template_path, int *_Nonnull fd);

/// Swaps what two paths name, atomically (`renameat2` with RENAME_EXCHANGE): both must exist.
/// Returns 0 or an errno.
int plugind_shim_exchange_paths(const char *_Nonnull first, const char *_Nonnull second);

/// Returns the free pages of every malloc arena to the kernel (`malloc_trim(0)`), so memory a
/// worker used only while it set itself up stops counting as its own.
void plugind_shim_release_free_memory(void);

/// Returns to the kernel the pages of the calling thread's stack below its current frame, which
/// setting up touched (the loader, the filters' compilation, the plugin's load and init) and the
/// calling thread, from now on waiting or serving from a shallower frame, may touch again only
/// as deep as it then goes. `room`: the pages kept below this frame for the calls that follow
/// (madvise's own frame, and what the thread calls next: 1 to 64). Returns how many pages were
/// given back.
int plugind_shim_release_unused_stack(unsigned room);

/// Keeps every thread started from now on in the allocator's existing arenas (`M_ARENA_MAX`):
/// each new arena is more of a worker's own memory, and a worker serving one request at a
/// time has no contention for them to relieve.
void plugind_shim_share_allocator_arenas(void);

/// How many processors this process may run on (its affinity mask, `sched_getaffinity`); 0 when
/// it cannot be read.
int plugind_shim_allowed_processor_count(void);

/// Ignores SIGPIPE for the whole process, so a write to a dead worker yields EPIPE.
int plugind_shim_ignore_sigpipe(void);

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit in `limit`.
int plugind_shim_raise_open_file_limit(uint64_t *_Nonnull limit);

/// Layout of the payload the fatal-signal reporter writes (all little-endian):
///   int32 signal, int32 si_code, uint64 fault address, uint64 address-space bytes in use,
///   uint64 open descriptors.
#define PLUGIND_SHIM_FATAL_REPORT_PAYLOAD_SIZE 32

/// Installs handlers (on an alternate stack) for SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT,
/// SIGSYS and SIGTRAP that write `frame_header` followed by the report payload to `fd` in one
/// write, then the faulting thread's stack (when `plugind_shim_stack_capture_prepare` ran), then
/// let the signal take its default action. `frame_header` is copied. The handler is
/// async-signal-safe. Call once, from the worker, before loading plugin code.
int plugind_shim_install_fatal_signal_report(int fd, const uint8_t *_Nonnull frame_header,
                                             size_t header_length);

/// The fatal-signal handler itself, for another handler that catches a fault first.
void plugind_shim_report_fatal_signal(int signal_number, siginfo_t *_Nonnull info, void *_Nullable context);

/// Where a frame header keeps its request identifier (little-endian uint64) and its payload
/// length (little-endian uint32).
#define PLUGIND_SHIM_FRAME_REQUEST_OFFSET 8
#define PLUGIND_SHIM_FRAME_LENGTH_OFFSET 16
/// The most payload bytes of a stack report: with its 24-byte header, one pipe write of
/// PIPE_BUF bytes, which the kernel never interleaves with another writer's.
#define PLUGIND_SHIM_STACK_REPORT_CAPACITY (4096 - 24)
#define PLUGIND_SHIM_STACK_MAX_FRAMES 64
#define PLUGIND_SHIM_STACK_MAX_MODULES 16
#define PLUGIND_SHIM_STACK_MAX_PATH 160
/// The signal by which the host asks where a request is (queued, its value the request's
/// identifier): reserved by the worker; a plugin that takes it over only loses the reports.
#define PLUGIND_SHIM_STACK_SIGNAL (SIGRTMAX - 3)

/// Copies into `output` at most `capacity` bytes of the loaded object's path `name` as UTF-8, as
/// a stack report carries it: a byte that begins no well-formed character becomes '?', and a
/// character that the cut at `capacity` splits is left out. Returns the bytes written. The
/// host refuses a report whose paths are not UTF-8, and a repaired path would stand for other
/// bytes. Async-signal-safe.
size_t plugind_shim_stack_object_path(const char *_Nonnull name, uint8_t *_Nonnull output, size_t capacity);

/// Encodes the calling thread's stack, interrupted at `context` (a signal handler's ucontext;
/// NULL: from the caller), into `output`: reason u8, flags u8 (1: truncated), module count u8,
/// frame count u8; per module its load bias u64, start address u64, path length u16 and path
/// (as `plugind_shim_stack_object_path` gives it); per frame its address u64 and module index u8
/// (0xFF: in no loaded object). Frame 0 is the
/// interrupted address, the others return addresses. Returns the bytes written.
/// Async-signal-safe once `plugind_shim_stack_capture_prepare` ran.
size_t plugind_shim_encode_stack(uint8_t reason, const void *_Nullable context, uint8_t *_Nonnull output,
                                 size_t capacity);

/// Writes the calling thread's stack as one frame behind the prepared header, with `request`
/// (0 for a crash) in it: reason 0 (a crash), 1 (the host asked), or 2 (the host asked about a
/// request no thread serves: an empty report). Async-signal-safe; nothing before `prepare`.
void plugind_shim_write_stack_frame(uint8_t reason, uint64_t request, const void *_Nullable context);

/// Warms up the unwinder (its first use loads libgcc_s), keeps `fd` and the frame header the
/// stack reports go out with (its request and length are filled in), and installs the handler
/// of `PLUGIND_SHIM_STACK_SIGNAL`. Call once, before plugin code runs.
int plugind_shim_stack_capture_prepare(int fd, const uint8_t *_Nonnull frame_header, size_t length);

/// The calling thread now serves `request` (0: none); returns the one it served before, to be
/// restored when a nested request ends.
uint64_t plugind_shim_stack_serve_request(uint64_t request);

/// Asks the worker behind `pidfd` where `request` is: `PLUGIND_SHIM_STACK_SIGNAL`, queued with
/// the request as its value (pidfd_send_signal). The host's side.
int plugind_shim_request_stack(int pidfd, uint64_t request);

/// `plugind debug`: makes the worker dumpable and, where Yama restricts ptrace, traceable by any
/// process of its user (the owner's debugger is not its ancestor).
int plugind_shim_debug_allow_tracer(void);

/// The signal by which `plugind debug` tells its worker that the debugger has attached.
#define PLUGIND_SHIM_DEBUG_RELEASE_SIGNAL (SIGRTMAX - 4)

/// Blocks the release signal in the calling thread and the threads it starts from now on: the
/// worker's first thread calls it before it starts any other, so that the signal, sent to the
/// process, waits for `plugind_shim_debug_wait_for_release` instead of killing it.
int plugind_shim_debug_hold_release(void);

/// Waits, at most `seconds`, for the release signal (ETIMEDOUT when none came), blocked in every
/// thread (`plugind_shim_debug_hold_release`) and taken here with sigtimedwait.
int plugind_shim_debug_wait_for_release(unsigned int seconds);

/// Sends the release signal to the worker `pid` (the owner's command's side).
int plugind_shim_debug_release(pid_t pid);

/// Stops in the debugger: SIGTRAP, queued to the calling thread with `init` as its value
/// (`$_siginfo._sifields._rt.si_sigval.sival_ptr` in gdb), which the debugger does not pass on.
void plugind_shim_debug_stop_before_init(const void *_Nullable init);

/// The layer that refused a call, in a refusal report.
#define PLUGIND_SHIM_LAYER_SECCOMP 1
#define PLUGIND_SHIM_LAYER_LANDLOCK 2
#define PLUGIND_SHIM_LAYER_VIEW 3

/// Receives a refusal: the call, what it named (an address family, a path), the layer, the errno
/// the plugin got, and how many reports the rate limit dropped before this one.
typedef void (*plugind_shim_refusal_sink)(const char *_Nonnull call, const char *_Nonnull detail, int layer, int error,
                                          uint32_t dropped);

/// Routes the calls of socket, connect, bind, ptrace and the open family made by the library
/// `handle` (from dlopen) through wrappers that report refusals to `sink` (at most 8 a second;
/// the rest are counted). Call once, after dlopen, before the library's init.
int plugind_shim_refusals_install(void *_Nonnull handle, plugind_shim_refusal_sink _Nonnull sink);

/// Gives the calling thread an alternate signal stack of its own (the stack is per thread), so
/// that the report also runs for a stack overflow on a thread the worker started; nothing when
/// the thread has one. Mapped with an inaccessible page below it; its pages cost nothing until a
/// signal is handled on it.
int plugind_shim_install_alternate_signal_stack(void);

/// Creates an anonymous shared-memory file (memfd) of `size` bytes for the messages between
/// host and worker, sealed so that neither side can shrink or grow it: a peer that truncated it
/// would make the other side's reads fault (SIGBUS). Close-on-exec. Returns 0 or an errno.
int plugind_shim_shared_memory_create(size_t size, int *_Nonnull fd);

/// Maps all of `fd` shared, readable and writable, and returns its size in `size`. A file that
/// is not a memfd sealed against shrinking is refused with EPERM. Returns 0 or an errno.
int plugind_shim_shared_memory_map(int fd, void *_Nullable *_Nonnull address, size_t *_Nonnull size);

/// Creates an empty memfd for a sealed copy of a file (close-on-exec, sealable, executable so
/// that a library can be mapped from it). Returns 0 or an errno.
int plugind_shim_sealed_file_create(const char *_Nonnull name, int *_Nonnull fd);

/// Seals a memfd against writes, shrinking, growing and further seals, and checks the seals
/// hold: its bytes can never change again. Returns 0 or an errno.
int plugind_shim_sealed_file_seal(int fd);

/// Replaces descriptor `fd`, a sealed copy, with a sealed copy of its bytes that this process
/// alone holds: the same number and close-on-exec flag, another inode. Reads with an explicit
/// offset, so the file position other holders of `fd`'s file description see is untouched.
/// Returns 0 or an errno.
int plugind_shim_sealed_file_make_private(int fd);

/// Makes a sealed copy of an executable execute-only (mode 0111): a process executing it is not
/// dumpable from its first instruction (the kernel keeps a process whose image it may not read
/// from being traced or dumped), for any caller without CAP_DAC_OVERRIDE. Returns 0 or an errno.
int plugind_shim_sealed_file_restrict_to_execution(int fd);

/// Opens `path` (relative) beneath the open directory `directory` without following any symlink
/// and without leaving the directory (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
/// RESOLVE_NO_MAGICLINKS), close-on-exec. A component swapped for a symlink fails with ELOOP.
int plugind_shim_open_beneath(int directory, const char *_Nonnull path, int flags, int *_Nonnull fd);
/// The same by a walk of the path, one component at a time with O_NOFOLLOW, for where openat2
/// returns ENOSYS; plugind_shim_open_beneath falls back to it. Exposed for the tests.
int plugind_shim_open_beneath_by_walk(int directory, const char *_Nonnull path, int flags, int *_Nonnull fd);

/// Unmaps what `plugind_shim_shared_memory_map` or `_create` mapped.
void plugind_shim_shared_memory_unmap(void *_Nonnull address, size_t size);

/// Maps `size` bytes of the memfd `fd` shared and for the rest of the process's life, kept out
/// of every child it forks (MADV_DONTFORK), and closes `fd`. For the launcher's fork record:
/// nothing ever unmaps it, so no code running in a forked child can touch the address.
/// Returns 0 or an errno.
int plugind_shim_fork_record_map(int fd, size_t size, void *_Nullable *_Nonnull address);

/// Counters shared between the processes (acquire / release ordering).
static inline uint64_t plugind_shim_shared_counter_load(const void *_Nonnull address) {
    return __atomic_load_n((const uint64_t *)address, __ATOMIC_ACQUIRE);
}

static inline void plugind_shim_shared_counter_store(void *_Nonnull address, uint64_t value) {
    __atomic_store_n((uint64_t *)address, value, __ATOMIC_RELEASE);
}

/// The small-message rings' words (`SharedRing`). A side that publishes its position or a flag
/// and then reads the other side's needs a full fence between the two (as in Dekker's
/// algorithm), or a wake-up can be lost.
static inline void plugind_shim_shared_fence(void) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static inline uint32_t plugind_shim_shared_word_load(const void *_Nonnull address) {
    return __atomic_load_n((const uint32_t *)address, __ATOMIC_ACQUIRE);
}

static inline void plugind_shim_shared_word_store(void *_Nonnull address, uint32_t value) {
    __atomic_store_n((uint32_t *)address, value, __ATOMIC_SEQ_CST);
}

static inline uint32_t plugind_shim_shared_word_exchange(void *_Nonnull address, uint32_t value) {
    return __atomic_exchange_n((uint32_t *)address, value, __ATOMIC_SEQ_CST);
}

/// Sleeps while the shared 32-bit word at `address` holds `expected`, at most
/// `timeoutMicroseconds`: a futex on a mapping both processes share (not process-private).
/// Returns 0 when woken, or ETIMEDOUT, EAGAIN (the word had changed) or EINTR.
int plugind_shim_shared_word_wait(void *_Nonnull address, uint32_t expected, uint32_t timeoutMicroseconds);

/// Wakes every thread of any process sleeping in `plugind_shim_shared_word_wait` on `address`.
void plugind_shim_shared_word_wake(void *_Nonnull address);


/// A datagram socket for entries to the system journal (close-on-exec, non-blocking).
/// Returns the descriptor or minus an errno.
int plugind_shim_journal_socket(void);

/// Sends one entry in the journal's native protocol to the socket at `path` without waiting: a
/// full socket buffer is EAGAIN, for the caller to count as a lost entry. Returns 0 or an errno.
int plugind_shim_journal_send(int fd, const char *_Nonnull path, const void *_Nonnull bytes, size_t length);

/// Creates `name` in `directory` (exclusively, 0600, never through a symlink), `size` bytes with
/// `header` at its start, and maps it shared and writable in `address`. Returns 0 or an errno;
/// on failure nothing is left behind.
int plugind_shim_statistics_page_create(int directory, const char *_Nonnull name, const void *_Nonnull header, size_t length,
                                        size_t size, void *_Nullable *_Nonnull address);

/// Adds to a counter other processes read (relaxed: each counter is read on its own).
static inline void plugind_shim_shared_counter_add(void *_Nonnull address, uint64_t value) {
    __atomic_fetch_add((uint64_t *)address, value, __ATOMIC_RELAXED);
}

#ifdef __cplusplus
}
#endif

#endif /* PLUGIND_SHIMS_H */
