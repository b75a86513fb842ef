// Raw baselines for plugind's benchmark: round trips between two processes over pipes or a
// socketpair, with no framing and no runtime. Prints the median round trip in microseconds.
//   pingpong pipe|socketpair SIZE ITERATIONS PARENT_CPU CHILD_CPU [PIPE_BUFFER]
// A CPU of -1 leaves the process unpinned.
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

static void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) { perror("sched_setaffinity"); exit(1); }
}

static void full_write(int fd, const char *buffer, size_t size) {
    for (size_t done = 0; done < size;) {
        ssize_t n = write(fd, buffer + done, size - done);
        if (n <= 0) { perror("write"); exit(1); }
        done += (size_t)n;
    }
}

static void full_read(int fd, char *buffer, size_t size) {
    for (size_t done = 0; done < size;) {
        ssize_t n = read(fd, buffer + done, size - done);
        if (n <= 0) { perror("read"); exit(1); }
        done += (size_t)n;
    }
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage: pingpong pipe|socketpair SIZE ITERATIONS PARENT_CPU CHILD_CPU [PIPE_BUFFER [IDLE_MS]]\n"); return 64; }
    int use_socket = strcmp(argv[1], "socketpair") == 0;
    size_t size = strtoul(argv[2], NULL, 10);
    int iterations = atoi(argv[3]);
    int parent_cpu = atoi(argv[4]), child_cpu = atoi(argv[5]);
    int pipe_buffer = argc > 6 ? atoi(argv[6]) : 0;
    int idle_milliseconds = argc > 7 ? atoi(argv[7]) : 0;
    // Warming up matters less after a pause than the time it takes.
    int warm_up = idle_milliseconds > 0 ? 5 : 100;
    int to_child[2], to_parent[2];
    if (use_socket) {
        int pair[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) { perror("socketpair"); return 1; }
        to_child[0] = pair[1]; to_child[1] = pair[0];
        to_parent[0] = pair[0]; to_parent[1] = pair[1];
    } else {
        if (pipe(to_child) != 0 || pipe(to_parent) != 0) { perror("pipe"); return 1; }
        if (pipe_buffer > 0) {
            fcntl(to_child[1], F_SETPIPE_SZ, pipe_buffer);
            fcntl(to_parent[1], F_SETPIPE_SZ, pipe_buffer);
        }
    }
    char *buffer = malloc(size);
    memset(buffer, 'x', size);
    pid_t child = fork();
    if (child == 0) {
        pin(child_cpu);
        for (int i = 0; i < iterations + warm_up; i++) {
            full_read(to_child[0], buffer, size);
            full_write(to_parent[1], buffer, size);
        }
        _exit(0);
    }
    pin(parent_cpu);
    double *samples = malloc(sizeof(double) * (size_t)iterations);
    for (int i = 0; i < iterations + warm_up; i++) {
        struct timespec start, end;
        if (idle_milliseconds > 0) {
            struct timespec idle = {idle_milliseconds / 1000, (long)(idle_milliseconds % 1000) * 1000000L};
            nanosleep(&idle, NULL);
        }
        clock_gettime(CLOCK_MONOTONIC, &start);
        full_write(to_child[1], buffer, size);
        full_read(to_parent[0], buffer, size);
        clock_gettime(CLOCK_MONOTONIC, &end);
        if (i >= warm_up) samples[i - warm_up] = (double)(end.tv_sec - start.tv_sec) * 1e6 + (double)(end.tv_nsec - start.tv_nsec) / 1e3;
    }
    waitpid(child, NULL, 0);
    qsort(samples, (size_t)iterations, sizeof(double), compare);
    printf("%.3f\n", samples[iterations / 2]);
    return 0;
}
