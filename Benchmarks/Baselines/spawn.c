// Raw baseline: posix_spawn of a trivial C program until its first byte arrives on a pipe, the
// least a plugin launch can cost. Prints the median in microseconds.
//   spawn PROGRAM ITERATIONS [CPU [ARGUMENT...]]
// CPU -1 leaves it unpinned; with ARGUMENTs the child is PROGRAM ARGUMENT... (the peer
// benchmark starts bubblewrap so, with the trivial program inside its sandbox).
#define _GNU_SOURCE
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: spawn PROGRAM ITERATIONS [CPU [ARGUMENT...]]\n"); return 64; }
    int iterations = atoi(argv[2]);
    if (argc > 3 && atoi(argv[3]) >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(atoi(argv[3]), &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    // The child's argv: PROGRAM alone, or PROGRAM ARGUMENT... in place of the CPU (read above).
    char *plain_argv[] = {argv[1], NULL};
    char **child_argv = plain_argv;
    if (argc > 4) {
        child_argv = &argv[3];
        child_argv[0] = argv[1];
    }
    double *samples = malloc(sizeof(double) * (size_t)iterations);
    for (int i = 0; i < iterations + 10; i++) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) { perror("pipe"); return 1; }
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
        struct timespec start, end;
        clock_gettime(CLOCK_MONOTONIC, &start);
        pid_t pid;
        if (posix_spawn(&pid, argv[1], &actions, NULL, child_argv, environ) != 0) { perror("posix_spawn"); return 1; }
        close(fds[1]);
        char byte;
        if (read(fds[0], &byte, 1) != 1) { perror("read"); return 1; }
        clock_gettime(CLOCK_MONOTONIC, &end);
        close(fds[0]);
        waitpid(pid, NULL, 0);
        posix_spawn_file_actions_destroy(&actions);
        if (i >= 10) samples[i - 10] = (double)(end.tv_sec - start.tv_sec) * 1e6 + (double)(end.tv_nsec - start.tv_nsec) / 1e3;
    }
    qsort(samples, (size_t)iterations, sizeof(double), compare);
    printf("%.3f\n", samples[iterations / 2]);
    return 0;
}
