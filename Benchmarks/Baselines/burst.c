// Baseline for a burst of launches: COUNT children started at once, each timed from the
// burst's start to its first byte on its own pipe (so the last one started also waits for
// the ones before it, as a plugin host asked for COUNT plugins at once would). ROUNDS bursts;
// prints every child's time in microseconds, one per line.
//   burst COUNT ROUNDS PROGRAM [ARGUMENT...]
// The peer benchmark runs bubblewrap so, with the trivial first_byte program inside it.
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double since(const struct timespec *start) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) * 1e6 + (double)(now.tv_nsec - start->tv_nsec) / 1e3;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: burst COUNT ROUNDS PROGRAM [ARGUMENT...]\n"); return 64; }
    int count = atoi(argv[1]), rounds = atoi(argv[2]);
    if (count < 1 || count > 1024 || rounds < 1) { fprintf(stderr, "burst: COUNT 1-1024, ROUNDS ≥ 1\n"); return 64; }
    char **child_argv = &argv[3];
    struct pollfd *ends = calloc((size_t)count, sizeof *ends);
    pid_t *children = calloc((size_t)count, sizeof *children);
    if (!ends || !children) { perror("calloc"); return 1; }
    for (int round = 0; round < rounds; round++) {
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (int i = 0; i < count; i++) {
            int fds[2];
            if (pipe2(fds, O_CLOEXEC) != 0) { perror("pipe2"); return 1; }
            posix_spawn_file_actions_t actions;
            posix_spawn_file_actions_init(&actions);
            posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
            if (posix_spawn(&children[i], argv[3], &actions, NULL, child_argv, environ) != 0) { perror("posix_spawn"); return 1; }
            posix_spawn_file_actions_destroy(&actions);
            close(fds[1]);
            ends[i] = (struct pollfd){.fd = fds[0], .events = POLLIN};
        }
        for (int waiting = count; waiting > 0;) {
            if (poll(ends, (nfds_t)count, 10000) <= 0) { fprintf(stderr, "burst: no first byte within 10 s\n"); return 1; }
            for (int i = 0; i < count; i++) {
                if (ends[i].fd < 0 || !ends[i].revents) continue;
                char byte;
                if (read(ends[i].fd, &byte, 1) != 1) { fprintf(stderr, "burst: child %d ended without a byte\n", i); return 1; }
                printf("%.3f\n", since(&start));
                close(ends[i].fd);
                ends[i].fd = -1;
                waiting--;
            }
        }
        for (int i = 0; i < count; i++) waitpid(children[i], NULL, 0);
    }
    return 0;
}
