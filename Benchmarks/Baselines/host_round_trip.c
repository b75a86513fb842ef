/*
 * The 64 B round trip from a C host through libplugind: one connection to the first plugin of
 * POINT, ITERATIONS sends (a tenth more first, to warm up), each timed; prints the microseconds
 * of each, one per line, for plugind-bench (foreign-round-trip).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <plugind/plugind.h>

static double now_us(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1e6 + now.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: host_round_trip POINT ITERATIONS\n");
        return 2;
    }
    int iterations = atoi(argv[2]);
    plugind_error *error = NULL;
    plugind_monitor *monitor = plugind_monitor_create(argv[1], PLUGIND_SCOPE_NONE, &error);
    plugind_identity *identity = monitor != NULL ? plugind_monitor_identity_at(monitor, 0, &error) : NULL;
    plugind_process *process = identity != NULL ? plugind_process_create(identity, NULL, NULL, &error) : NULL;
    plugind_connection *connection = process != NULL ? plugind_connection_open(process, NULL, NULL, &error) : NULL;
    if (connection == NULL) {
        fprintf(stderr, "host_round_trip: error %s\n", plugind_error_message(error));
        return 1;
    }
    uint8_t payload[64];
    for (size_t index = 0; index < sizeof payload; index++) payload[index] = 'a';
    for (int index = 0; index < iterations + iterations / 10; index++) {
        uint8_t *reply = NULL;
        size_t length = 0;
        double start = now_us();
        if (plugind_connection_send(connection, payload, sizeof payload, 0, &reply, &length, &error) != 0) {
            fprintf(stderr, "host_round_trip: error %s\n", plugind_error_message(error));
            return 1;
        }
        double elapsed = now_us() - start;
        plugind_bytes_free(reply);
        if (index >= iterations / 10) printf("%.3f\n", elapsed);
    }
    plugind_connection_close(connection);
    plugind_process_release(process);
    plugind_identity_release(identity);
    plugind_monitor_release(monitor);
    return 0;
}
