// Raw baseline for a chain of confined LADSPA effects: LENGTH processes that each wait on a word
// in shared memory and answer in another, rung one after another by the parent, which polls for
// each answer for 50 us (yielding the processor) and then sleeps on it, as plugind's host does
// with a doorbell. No plugin, no runtime, no confinement: what handing a block through LENGTH
// processes costs on this machine, and how often the machine alone makes a paced block late.
//   process_chain LENGTH BLOCKS PACED_SECONDS BLOCK_FRAMES SAMPLE_RATE
// Prints: back-to-back median and p99 per block (us), then paced blocks late, blocks, and the
// p99 from each block's due time to its end (us).
#define _GNU_SOURCE
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    _Atomic uint32_t ring;
    char pad1[60];
    _Atomic uint32_t answer;
    char pad2[60];
} doorbell;

static void sleep_on(_Atomic uint32_t *word, uint32_t value) {
    syscall(SYS_futex, word, FUTEX_WAIT, value, NULL, NULL, 0);
}

static void wake(_Atomic uint32_t *word) {
    syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static double now_us(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (double)time.tv_sec * 1e6 + (double)time.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void stage(doorbell *bell) {
    uint32_t handled = 0;
    for (;;) {
        uint32_t rung = atomic_load(&bell->ring);
        if (rung == handled) {
            sleep_on(&bell->ring, handled);
            continue;
        }
        if (rung == UINT32_MAX) _exit(0);
        handled = rung;
        atomic_store(&bell->answer, rung);
        wake(&bell->answer);
    }
}

static void ring_and_wait(doorbell *bell, uint32_t sequence) {
    atomic_store(&bell->ring, sequence);
    wake(&bell->ring);
    double poll_until = now_us() + 50;
    uint32_t seen;
    while ((seen = atomic_load(&bell->answer)) != sequence) {
        if (now_us() < poll_until) {
            sched_yield();
        } else {
            sleep_on(&bell->answer, seen);
        }
    }
}

static void block(doorbell *bells, int length, uint32_t sequence) {
    for (int index = 0; index < length; index++) ring_and_wait(&bells[index], sequence);
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: process_chain LENGTH BLOCKS PACED_SECONDS BLOCK_FRAMES SAMPLE_RATE\n");
        return 64;
    }
    int length = atoi(argv[1]), blocks = atoi(argv[2]), paced_seconds = atoi(argv[3]);
    int frames = atoi(argv[4]), rate = atoi(argv[5]);
    if (length < 1 || length > 64 || blocks < 1 || paced_seconds < 0 || frames < 1 || rate < 1) return 64;
    doorbell *bells = mmap(NULL, sizeof(doorbell) * (size_t)length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (bells == MAP_FAILED) { perror("mmap"); return 1; }
    for (int index = 0; index < length; index++) {
        pid_t child = fork();
        if (child < 0) { perror("fork"); return 1; }
        if (child == 0) stage(&bells[index]);
    }
    uint32_t sequence = 0;
    int warm_up = blocks / 10;
    double *times = malloc(sizeof(double) * (size_t)(blocks + warm_up));
    for (int index = 0; index < blocks + warm_up; index++) {
        double start = now_us();
        block(bells, length, ++sequence);
        times[index] = now_us() - start;
    }
    qsort(times + warm_up, (size_t)blocks, sizeof(double), compare);
    printf("%.3f %.3f", times[warm_up + blocks / 2], times[warm_up + blocks * 99 / 100]);

    // Paced: each block starts at its time in the stream and is due by the next one's.
    long count = (long)paced_seconds * rate / frames;
    double period = (double)frames * 1e6 / rate;
    double *late = count > 0 ? malloc(sizeof(double) * (size_t)count) : NULL;
    long missed = 0;
    struct timespec origin;
    clock_gettime(CLOCK_MONOTONIC, &origin);
    double origin_us = (double)origin.tv_sec * 1e6 + (double)origin.tv_nsec / 1e3 + 10000;
    for (long index = 0; index < count; index++) {
        double due = origin_us + period * (double)index;
        struct timespec at = {.tv_sec = (time_t)(due / 1e6), .tv_nsec = (long)((due - (double)(time_t)(due / 1e6) * 1e6) * 1e3)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) != 0) {}
        block(bells, length, ++sequence);
        double finished = now_us();
        if (finished > due + period) missed++;
        late[index] = finished - due;
    }
    if (count > 0) {
        qsort(late, (size_t)count, sizeof(double), compare);
        printf(" %ld %ld %.3f\n", missed, count, late[count * 99 / 100]);
    } else {
        printf(" 0 0 0\n");
    }
    for (int index = 0; index < length; index++) {
        atomic_store(&bells[index].ring, UINT32_MAX);
        wake(&bells[index].ring);
    }
    while (wait(NULL) > 0) {}
    return 0;
}
