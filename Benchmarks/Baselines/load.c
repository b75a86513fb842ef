// Raw baseline for plugind's load benchmark: TASKS client threads send 64-byte requests over
// pipes to WORKERS server processes (client t talks to server t % WORKERS), each server echoing
// every client it serves from one poll loop — the shape of host tasks sharing workers, with no
// framing and no runtime. Prints: requests per second, median and 99th-percentile latency in µs.
//   load TASKS WORKERS REQUESTS
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { message_size = 64 };

struct client {
    int to_server[2];
    int to_client[2];
    int requests;
    double *latencies;
};

static double now(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return time.tv_sec * 1e6 + time.tv_nsec / 1e3;
}

static int full(ssize_t (*io)(int, void *, size_t), int fd, char *buffer, size_t size) {
    for (size_t done = 0; done < size;) {
        ssize_t count = io(fd, buffer + done, size - done);
        if (count <= 0) return -1;
        done += (size_t)count;
    }
    return 0;
}

static ssize_t write_adapter(int fd, void *buffer, size_t size) { return write(fd, buffer, size); }

static void serve(struct client *clients, int count, int worker, int workers) {
    // Only the clients' own ends keep the pipes open: a server sees end of file when they close.
    for (int index = 0; index < count; index++) close(clients[index].to_server[1]);
    struct pollfd descriptors[256];
    int owners[256];
    int served = 0;
    for (int index = worker; index < count; index += workers) {
        descriptors[served] = (struct pollfd){.fd = clients[index].to_server[0], .events = POLLIN};
        owners[served++] = index;
    }
    int open = served;
    char buffer[message_size];
    while (open > 0) {
        if (poll(descriptors, served, -1) < 0) exit(1);
        for (int slot = 0; slot < served; slot++) {
            if (descriptors[slot].fd < 0 || !(descriptors[slot].revents & (POLLIN | POLLHUP))) continue;
            if (full(read, descriptors[slot].fd, buffer, sizeof buffer) != 0) {
                descriptors[slot].fd = -1;
                open--;
                continue;
            }
            if (full(write_adapter, clients[owners[slot]].to_client[1], buffer, sizeof buffer) != 0) exit(1);
        }
    }
    _exit(0);
}

static void *run_client(void *argument) {
    struct client *client = argument;
    char buffer[message_size];
    memset(buffer, 'a', sizeof buffer);
    for (int index = 0; index < client->requests; index++) {
        double start = now();
        if (full(write_adapter, client->to_server[1], buffer, sizeof buffer) != 0) exit(1);
        if (full(read, client->to_client[0], buffer, sizeof buffer) != 0) exit(1);
        client->latencies[index] = now() - start;
    }
    return NULL;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: load TASKS WORKERS REQUESTS\n");
        return 64;
    }
    int tasks = atoi(argv[1]), workers = atoi(argv[2]), requests = atoi(argv[3]);
    if (tasks < 1 || tasks > 256 || workers < 1 || requests < tasks) return 64;
    struct client *clients = calloc((size_t)tasks, sizeof *clients);
    double *latencies = calloc((size_t)requests, sizeof *latencies);
    for (int index = 0; index < tasks; index++) {
        if (pipe(clients[index].to_server) != 0 || pipe(clients[index].to_client) != 0) return 1;
        clients[index].requests = requests / tasks;
        clients[index].latencies = latencies + index * (requests / tasks);
    }
    pid_t servers[256];
    for (int worker = 0; worker < workers; worker++) {
        servers[worker] = fork();
        if (servers[worker] == 0) serve(clients, tasks, worker, workers);
    }
    pthread_t threads[256];
    double start = now();
    for (int index = 0; index < tasks; index++) pthread_create(&threads[index], NULL, run_client, &clients[index]);
    for (int index = 0; index < tasks; index++) pthread_join(threads[index], NULL);
    double elapsed = now() - start;
    for (int index = 0; index < tasks; index++) close(clients[index].to_server[1]);
    for (int worker = 0; worker < workers; worker++) waitpid(servers[worker], NULL, 0);
    int done = (requests / tasks) * tasks;
    qsort(latencies, (size_t)done, sizeof *latencies, compare);
    printf("%.1f %.2f %.2f\n", done / (elapsed / 1e6), latencies[done / 2], latencies[done * 99 / 100]);
    return 0;
}
