// A hostile plugin: each request names one way out of the sandbox and its arguments, and the
// plugin tries it. It answers "refused <errno name>" when the system said no, "done <detail>"
// when the attempt went through. The security tests check both the answer and, from outside,
// that nothing happened.
#include <dlfcn.h>
#include <errno.h>
#include <faulty_plugin.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/rseq.h>
#include <sys/ptrace.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static char answer[8192];

static int32_t outcome(plugind_plugin_response *response, long result, const char *detail) {
    if (result < 0) {
        snprintf(answer, sizeof answer, "refused %s", strerrorname_np(errno) ? strerrorname_np(errno) : "?");
    } else {
        snprintf(answer, sizeof answer, "done %s", detail);
    }
    return faulty_reply(response, answer);
}

static int unix_address(const char *path, int abstract, struct sockaddr_un *address, socklen_t *length) {
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    size_t size = strlen(path);
    if (size + 2 > sizeof address->sun_path) return -1;
    memcpy(address->sun_path + (abstract ? 1 : 0), path, size);
    *length = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + size + (abstract ? 1 : 0));
    return 0;
}

static void *idle_thread(void *argument) {
    pause();
    return argument;
}

/// What a well-behaved plugin's thread does: random bytes, a futex-backed mutex, a private mapping.
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static long shared_counter;

static void *well_behaved_thread(void *argument) {
    unsigned char random_bytes[16];
    if (getrandom(random_bytes, sizeof random_bytes, 0) != (ssize_t)sizeof random_bytes) return (void *)"getrandom";
    for (int round = 0; round < 1000; round++) {
        pthread_mutex_lock(&shared_lock);
        shared_counter++;
        pthread_mutex_unlock(&shared_lock);
    }
    void *page = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return (void *)"mmap";
    memset(page, 1, 1 << 20);
    munmap(page, 1 << 20);
    return argument;
}

static void burn_cpu(double seconds) {
    struct timespec start;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
    for (volatile unsigned long spin = 0;; spin++) {
        if (spin % 1000000 != 0) continue;
        struct timespec now;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
        if ((double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9 >= seconds) return;
    }
}

/// One of the "ask-storm" threads: asks on its connection until the host closes it (or a bound).
static void *keep_asking(void *argument) {
    uint32_t connection = (uint32_t)(uintptr_t)argument;
    for (int index = 0; index < 100000; index++) {
        plugind_plugin_answer answer;
        int32_t status = faulty_host->ask(faulty_host->context, connection, (const uint8_t *)"storm", 5, 0, &answer);
        if (status == 0 || status == EREMOTEIO) faulty_host->release_answer(faulty_host->context, &answer);
        if (status != 0 && status != EBUSY && status != EREMOTEIO) break;
    }
    return NULL;
}

static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
    (void)state;
    char text[4096];
    faulty_request_text(request, text, sizeof text);
    char *argument = strchr(text, ' ');
    if (argument != NULL) *argument++ = '\0';
    const char *vector = text;
    const char *path = argument != NULL ? argument : "";

    if (strcmp(vector, "connect-stream") == 0 || strcmp(vector, "connect-abstract") == 0) {
        struct sockaddr_un address;
        socklen_t length;
        unix_address(path, strcmp(vector, "connect-abstract") == 0, &address, &length);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return outcome(response, -1, "");
        long result = connect(fd, (struct sockaddr *)&address, length);
        if (result == 0) result = write(fd, "from the plugin", 15);
        close(fd);
        return outcome(response, result, "connected and wrote");
    }
    if (strcmp(vector, "send-datagram") == 0) {
        struct sockaddr_un address;
        socklen_t length;
        unix_address(path, 0, &address, &length);
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return outcome(response, -1, "");
        long result = sendto(fd, "from the plugin", 15, 0, (struct sockaddr *)&address, length);
        close(fd);
        return outcome(response, result, "sent");
    }
    if (strcmp(vector, "descriptors") == 0) {
        // Every descriptor the plugin holds, used as a starting point for `path` (relative to the
        // host's root) and for the same path a few levels up: none may lead to the host's files.
        char above[4096];
        snprintf(above, sizeof above, "../../../../../../%s", path);
        int open_count = 0;
        for (int fd = 0; fd < 4096; fd++) {
            if (fcntl(fd, F_GETFD) < 0) continue;
            open_count++;
            struct stat status;
            if (fstatat(fd, path, &status, 0) == 0 || fstatat(fd, above, &status, 0) == 0) {
                snprintf(answer, sizeof answer, "done descriptor %d reaches %s", fd, path);
                return faulty_reply(response, answer);
            }
        }
        snprintf(answer, sizeof answer, "none of %d descriptors reaches it", open_count);
        return faulty_reply(response, answer);
    }
    if (strcmp(vector, "stat") == 0) {
        struct stat status;
        return outcome(response, stat(path, &status), "exists");
    }
    if (strcmp(vector, "read") == 0) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return outcome(response, -1, "");
        char content[1024] = {0};
        ssize_t count = read(fd, content, sizeof content - 1);
        close(fd);
        return outcome(response, count, content);
    }
    if (strcmp(vector, "write") == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        long result = fd < 0 ? -1 : write(fd, "written by the plugin", 21);
        if (fd >= 0) close(fd);
        return outcome(response, result, "written");
    }
    if (strcmp(vector, "chmod") == 0) return outcome(response, chmod(path, 0777), "mode changed");
    if (strcmp(vector, "chmod-setuid") == 0) return outcome(response, chmod(path, 04755), "setuid set");
    if (strcmp(vector, "create-setuid") == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 04755);
        if (fd >= 0) close(fd);
        return outcome(response, fd, "setuid file created");
    }
    if (strcmp(vector, "chown") == 0) return outcome(response, chown(path, 0, 0), "owner changed");
    if (strcmp(vector, "setxattr") == 0) return outcome(response, setxattr(path, "user.plugind", "x", 1, 0), "attribute set");
    if (strcmp(vector, "utimes") == 0) {
        struct timespec times[2] = {{.tv_sec = 1, .tv_nsec = 0}, {.tv_sec = 1, .tv_nsec = 0}};
        return outcome(response, utimensat(AT_FDCWD, path, times, 0), "times changed");
    }
    if (strcmp(vector, "inotify") == 0) {
        int fd = inotify_init1(IN_CLOEXEC);
        if (fd < 0) return outcome(response, -1, "");
        long result = inotify_add_watch(fd, path, IN_ALL_EVENTS);
        close(fd);
        return outcome(response, result, "watching");
    }
    if (strcmp(vector, "fanotify") == 0) return outcome(response, syscall(SYS_fanotify_init, 0, 0), "fanotify");
    if (strcmp(vector, "capabilities") == 0) {
        int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        if (fd < 0) return outcome(response, -1, "");
        char status[4096] = {0};
        ssize_t count = read(fd, status, sizeof status - 1);
        close(fd);
        char *line = strstr(status, "CapEff:");
        char effective[64] = "";
        if (line != NULL) sscanf(line, "CapEff:\t%63s", effective);
        return outcome(response, count, effective);
    }
    if (strcmp(vector, "keyring") == 0) {
        // The key the test added to the owner's keyrings, by description.
        long key = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, "user", path, 0);
        if (key < 0) key = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, "user", path, 0);
        if (key < 0) return outcome(response, -1, "");
        char secret[256] = {0};
        long count = syscall(SYS_keyctl, KEYCTL_READ, key, secret, sizeof secret - 1);
        return outcome(response, count, secret);
    }
    if (strcmp(vector, "fork") == 0) {
        pid_t child = fork();
        if (child == 0) _exit(0);
        if (child > 0) waitpid(child, NULL, 0);
        return outcome(response, child, "forked");
    }
    if (strcmp(vector, "vfork-spawn") == 0) {
        long child = syscall(SYS_clone, CLONE_VM | CLONE_VFORK | SIGCHLD, 0, 0, 0, 0);
        if (child == 0) _exit(0);
        if (child > 0) waitpid((pid_t)child, NULL, 0);
        return outcome(response, child, "spawned");
    }
    if (strcmp(vector, "clone3") == 0) return outcome(response, syscall(435, NULL, 0), "clone3");
    if (strcmp(vector, "memfd") == 0) {
        // Writes `path` MiB into a memfd, touching every page.
        long megabytes = atol(path);
        int fd = memfd_create("probe", MFD_CLOEXEC);
        if (fd < 0) return outcome(response, -1, "");
        static char chunk[1 << 20];
        memset(chunk, 7, sizeof chunk);
        long written = 0;
        for (long index = 0; index < megabytes; index++) {
            if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) break;
            written++;
        }
        snprintf(text, sizeof text, "%ld MiB", written);
        return outcome(response, written == megabytes ? 0 : -1, text);
    }
    if (strcmp(vector, "shmget") == 0) return outcome(response, shmget(IPC_PRIVATE, 1 << 20, IPC_CREAT | 0600), "segment");
    if (strcmp(vector, "threads") == 0) {
        long wanted = atol(path), made = 0;
        for (long index = 0; index < wanted; index++) {
            pthread_t thread;
            if (pthread_create(&thread, NULL, idle_thread, NULL) != 0) break;
            made++;
        }
        snprintf(text, sizeof text, "%ld", made);
        return outcome(response, 0, text);
    }
    if (strcmp(vector, "children-cpu") == 0) {
        // Four children that each burn `path` seconds of CPU time; the parent waits for them.
        double seconds = atof(path);
        pid_t children[4];
        int made = 0;
        for (int index = 0; index < 4; index++) {
            children[made] = fork();
            if (children[made] == 0) {
                burn_cpu(seconds);
                _exit(0);
            }
            if (children[made] > 0) made++;
        }
        for (int index = 0; index < made; index++) waitpid(children[index], NULL, 0);
        snprintf(text, sizeof text, "%d children finished", made);
        return outcome(response, made > 0 ? 0 : -1, text);
    }
    if (strcmp(vector, "children-memory") == 0) {
        // Ten children that each try to hold `path` MiB, touched. Each reports its index once
        // it holds the memory, or its index with the high bit set when it could not even map
        // it (the per-process address-space limit, which the worker's own mappings, inherited,
        // may already nearly fill). Answers how many held it, died (killed at a memory limit
        // that covers them), could not allocate, and still hold it at the end.
        long megabytes = atol(path);
        pid_t children[10];
        int made = 0, held = 0, died = 0, unallocated = 0;
        int holding[10] = {0}, dead[10] = {0};
        int signals[2];
        if (pipe(signals) != 0) return outcome(response, -1, "");
        for (int index = 0; index < 10; index++) {
            children[made] = fork();
            if (children[made] == 0) {
                char *memory = malloc((size_t)megabytes << 20);
                if (memory != NULL) memset(memory, 1, (size_t)megabytes << 20);
                unsigned char report = (unsigned char)(made | (memory == NULL ? 0x80 : 0));
                ssize_t ignored = write(signals[1], &report, 1);
                (void)ignored;
                pause();
                _exit(0);
            }
            if (children[made] > 0) made++;
        }
        close(signals[1]);
        fcntl(signals[0], F_SETFL, O_NONBLOCK);
        for (int round = 0; round < 100 && held + unallocated + died < made; round++) {
            unsigned char report;
            while (read(signals[0], &report, 1) == 1) {
                int index = report & 0x7f;
                if (index >= made) continue;
                if (report & 0x80) {
                    unallocated++;
                } else {
                    held++;
                    holding[index] = 1;
                }
            }
            int status;
            pid_t gone;
            while ((gone = waitpid(-1, &status, WNOHANG)) > 0) {
                died++;
                for (int index = 0; index < made; index++) {
                    if (children[index] == gone) dead[index] = 1;
                }
            }
            usleep(50000);
        }
        int still = 0;
        for (int index = 0; index < made; index++) still += holding[index] && !dead[index];
        for (int index = 0; index < made; index++) kill(children[index], SIGKILL);
        while (waitpid(-1, NULL, 0) > 0) {
        }
        close(signals[0]);
        snprintf(text, sizeof text, "held=%d died=%d unallocated=%d holding=%d", held, died, unallocated, still);
        return outcome(response, made > 0 ? 0 : -1, text);
    }
    if (strcmp(vector, "log") == 0) {
        // A log line of the plugin's choosing, escape sequences and all.
        faulty_host->log(faulty_host->context, PLUGIND_PLUGIN_LOG_INFO, path);
        return outcome(response, 0, "logged");
    }
    if (strcmp(vector, "log-flood") == 0) {
        // `path` is "COUNT [SIZE]": COUNT log lines as fast as the host takes them, each
        // numbered and padded to SIZE bytes.
        long count = 0, size = 0;
        sscanf(path, "%ld %ld", &count, &size);
        size_t length = size > 64 ? (size_t)size : 64;
        char *line = calloc(1, length + 1);
        if (line == NULL) return outcome(response, -1, "");
        for (long index = 0; index < count; index++) {
            int written = snprintf(line, length + 1, "flood line %ld ", index);
            if (written > 0 && (size_t)written < length && size > 64) memset(line + written, 'x', length - (size_t)written);
            faulty_host->log(faulty_host->context, PLUGIND_PLUGIN_LOG_WARNING, line);
        }
        free(line);
        return outcome(response, 0, "flooded the log");
    }
    if (strcmp(vector, "ask-storm") == 0) {
        // 16 threads asking the host on this request's connection, as fast as it answers, until
        // the connection closes: the answer comes back at once, while they ask on.
        for (int index = 0; index < 16; index++) {
            pthread_t thread;
            if (pthread_create(&thread, NULL, keep_asking, (void *)(uintptr_t)request->connection) == 0) pthread_detach(thread);
        }
        return outcome(response, 0, "storming");
    }
    if (strcmp(vector, "post-events") == 0) {
        // `count` events of `size` bytes each, as fast as the host takes them.
        long count = 0, size = 0;
        sscanf(path, "%ld %ld", &count, &size);
        uint8_t *bytes = calloc(1, (size_t)size);
        long posted = 0;
        for (long index = 0; bytes != NULL && index < count; index++) {
            if (faulty_host->post_message(faulty_host->context, request->identifier, bytes, (size_t)size) == 0) posted++;
        }
        free(bytes);
        snprintf(text, sizeof text, "%ld", posted);
        return outcome(response, 0, text);
    }
    if (strcmp(vector, "map-wx") == 0) {
        // Writable and executable at once: what a JIT or libffi's closures ask for.
        void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (page != MAP_FAILED) munmap(page, 4096);
        return outcome(response, page == MAP_FAILED ? -1 : 0, "mapped writable and executable");
    }
    if (strcmp(vector, "protect-wx") == 0) {
        // A writable page made executable as well; executable alone stays allowed (the loader's way).
        void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED) return outcome(response, -1, "");
        int result = mprotect(page, 4096, PROT_READ | PROT_WRITE | PROT_EXEC);
        int saved = errno;
        int alone = result == 0 ? 0 : mprotect(page, 4096, PROT_READ | PROT_EXEC);
        munmap(page, 4096);
        if (result != 0 && alone != 0) return outcome(response, 0, "read-and-execute refused too");
        errno = saved;
        return outcome(response, result, "protected writable and executable");
    }
    if (strcmp(vector, "bpf") == 0) return outcome(response, syscall(SYS_bpf, 0, NULL, 0), "bpf");
    if (strcmp(vector, "perf") == 0) return outcome(response, syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), "perf");
    if (strcmp(vector, "userfaultfd") == 0) return outcome(response, syscall(SYS_userfaultfd, 0), "userfaultfd");
    if (strcmp(vector, "clock") == 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        return outcome(response, clock_settime(CLOCK_REALTIME, &now), "clock set");
    }
    if (strcmp(vector, "syslog") == 0) {
        char buffer[64];
        return outcome(response, syscall(SYS_syslog, 3, buffer, sizeof buffer), "kernel log read");
    }
    if (strcmp(vector, "mount") == 0) return outcome(response, mount("none", "/tmp", "tmpfs", 0, NULL), "mounted");
    if (strcmp(vector, "unshare") == 0) return outcome(response, unshare(CLONE_NEWUSER), "new user namespace");
    if (strcmp(vector, "setns") == 0) {
        int fd = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
        long result = fd < 0 ? -1 : setns(fd, 0);
        if (fd >= 0) close(fd);
        return outcome(response, result, "joined");
    }
    if (strcmp(vector, "ptrace") == 0) return outcome(response, ptrace(PTRACE_TRACEME, 0, NULL, NULL), "traced");
    if (strcmp(vector, "process-vm") == 0) {
        char buffer[8];
        struct iovec local = {.iov_base = buffer, .iov_len = sizeof buffer};
        struct iovec remote = {.iov_base = buffer, .iov_len = sizeof buffer};
        return outcome(response, syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0), "read");
    }
    if (strcmp(vector, "io_uring") == 0) return outcome(response, syscall(425, 8, NULL), "ring");
    if (strcmp(vector, "bind-abstract") == 0 || strcmp(vector, "bind-abstract-pair") == 0) {
        // Binds (and keeps) an abstract name, from socket() or from one end of a socketpair; the
        // test then tries to reach it from the host.
        struct sockaddr_un address;
        socklen_t length;
        unix_address(path, 1, &address, &length);
        int pair[2] = {-1, -1};
        int fd = -1;
        if (strcmp(vector, "bind-abstract") == 0) {
            fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        } else if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair) == 0) {
            fd = pair[0];
        }
        if (fd < 0) return outcome(response, -1, "");
        long result = bind(fd, (struct sockaddr *)&address, length);
        if (result == 0 && pair[0] < 0) result = listen(fd, 4);
        if (result != 0) {
            int saved = errno;
            close(fd);
            if (pair[1] >= 0) close(pair[1]);
            errno = saved;
        }
        return outcome(response, result, "bound");
    }
    if (strcmp(vector, "socket-table") == 0) {
        // Whether the kernel's table of unix sockets, as this process sees it, names `path`.
        int fd = open("/proc/self/net/unix", O_RDONLY | O_CLOEXEC);
        if (fd < 0) return outcome(response, -1, "");
        static char table[1 << 20];
        size_t used = 0;
        ssize_t count;
        while (used < sizeof table - 1 && (count = read(fd, table + used, sizeof table - 1 - used)) > 0) used += (size_t)count;
        close(fd);
        table[used] = '\0';
        return outcome(response, 0, strstr(table, path) != NULL ? "listed" : "not listed");
    }
    if (strcmp(vector, "tamper-descriptor") == 0) {
        // The sealed copy of its own library (descriptor `path`): make it unreadable to others
        // and mark it, as a plugin would to break or signal the next launch of the same bytes.
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%s", path);
        (void)chmod(link, 0777);
        long marked = setxattr(link, "user.plugind", "x", 1, 0);
        if (marked == 0) marked = chmod(link, 0);
        return outcome(response, marked, "marked and made unreadable");
    }
    if (strcmp(vector, "well-behaved") == 0) {
        // The positive control: what ordinary plugins do must work under every layer.
        pthread_t threads[4];
        for (int index = 0; index < 4; index++) {
            if (pthread_create(&threads[index], NULL, well_behaved_thread, NULL) != 0) return outcome(response, -1, "");
        }
        for (int index = 0; index < 4; index++) {
            void *failed = NULL;
            pthread_join(threads[index], &failed);
            if (failed != NULL) return faulty_reply(response, (const char *)failed);
        }
        if (shared_counter < 4000) return faulty_reply(response, "futex");
        if (__rseq_size == 0) return faulty_reply(response, "rseq");
        int pair[2];
        char byte = 0;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return outcome(response, -1, "");
        long moved = write(pair[0], "x", 1) == 1 && read(pair[1], &byte, 1) == 1 && byte == 'x' ? 0 : -1;
        close(pair[0]);
        close(pair[1]);
        return outcome(response, moved, "threads, futexes, getrandom, mmap, rseq and a socketpair work");
    }
    if (strcmp(vector, "symlink") == 0) return outcome(response, symlink("/etc/shadow", path), "symlink made");
    if (strcmp(vector, "flood-asks") == 0) {
        // Stops the worker reading what the host sends (its pipe moved aside, an empty one in its
        // place), then writes `path` raw ask frames naming a connection that does not exist: each
        // makes the host queue an answer the worker will never read.
        long count = atol(path);
        int empty[2];
        if (dup(3) < 0 || pipe(empty) != 0 || dup2(empty[0], 3) < 0) return outcome(response, -1, "");
        unsigned char frame[24] = {0x50, 0x4C, 0x47, 0x44, 2, 0x8F};
        for (long index = 0; index < count; index++) {
            uint64_t id = (uint64_t)index + 1000000;
            memcpy(frame + 8, &id, sizeof id);
            uint32_t connection = 999;
            memcpy(frame + 20, &connection, sizeof connection);
            if (write(4, frame, sizeof frame) != (ssize_t)sizeof frame) return outcome(response, -1, "");
        }
        return outcome(response, 0, "flooded");
    }
    if (strcmp(vector, "mknod-setuid") == 0) return outcome(response, mknod(path, S_IFREG | 06755, 0), "setuid file made");
    if (strcmp(vector, "grow-buffer") == 0) {
        // A socket buffer of 8 MiB, which the kernel would hold outside the memory limit.
        int pair[2];
        if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair) != 0) return outcome(response, -1, "");
        int size = 8 << 20;
        long result = setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
        int saved = errno;
        close(pair[0]);
        close(pair[1]);
        errno = saved;
        return outcome(response, result, "buffer grown");
    }
    if (strcmp(vector, "socket-unix") == 0) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) close(fd);
        return outcome(response, fd, "socket");
    }
    if (strcmp(vector, "socket-inet") == 0) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) close(fd);
        return outcome(response, fd, "socket");
    }
    if (strcmp(vector, "layout") == 0) {
        // Where this worker's code, stack and heap are, its stack canary (glibc keeps it at
        // %fs:0x28 on x86-64) and the Swift runtime's hash seed: what a plugin would learn of
        // every other worker if they shared them.
        unsigned long canary = 0;
#if defined(__x86_64__)
        __asm__ volatile("mov %%fs:0x28, %0" : "=r"(canary));
#endif
        const unsigned long long *seed = dlsym(RTLD_DEFAULT, "_swift_stdlib_Hashing_parameters");
        void *heap = malloc(16);
        int local = 0;
        snprintf(answer, sizeof answer, "done code=%p stack=%p heap=%p canary=%lx seed=%llx%llx", (void *)&getpid, (void *)&local,
                 heap, canary, seed ? seed[0] : 0ULL, seed ? seed[1] : 0ULL);
        free(heap);
        return faulty_reply(response, answer);
    }
    return faulty_fail(response, "unknown vector");
}

FAULTY_PLUGIN("Hostile probe", handle)
