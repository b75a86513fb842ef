/*
 * hostile_ladspa: a LADSPA library whose plugins do what a confined plugin
 * must not be able to do, so tests can show that plugind's sandbox stops them
 * (and, run in-process through ladspa_reference, that they really do it).
 *
 * Build: cc -shared -fPIC -O1 -o hostile_ladspa.so hostile_ladspa.c
 *        [-DHOSTILE_TARGET='"/path"'] [-DHOSTILE_PORT=1234]
 *
 * Every plugin has port 0 "Input" (audio in) and port 1 "Output" (audio out),
 * no activate/deactivate/run_adding, and no properties: they are not realtime
 * safe on purpose.
 *   0xFF0001 read_file     output[0] = 1.0 if open(HOSTILE_TARGET, O_RDONLY)
 *                          succeeded, else -errno; other samples copy the input.
 *   0xFF0002 open_socket   output[0] = 1.0 if socket(AF_INET, SOCK_STREAM, 0)
 *                          succeeded, else -errno; output[1] = 1.0 if connect
 *                          to 127.0.0.1:HOSTILE_PORT succeeded, else -errno,
 *                          or 0.0 when no socket was made; other samples copy
 *                          the input.
 *   0xFF0003 crash_in_run  stores through a NULL pointer: SIGSEGV.
 *   0xFF0004 hang_in_run   never returns.
 *   0xFF0005 scribble      writes past the end of its output until it faults.
 * The probes run on every run() call and report in that block's first samples.
 */
#include <ladspa.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef HOSTILE_TARGET
#define HOSTILE_TARGET "/etc/hostname"
#endif
#ifndef HOSTILE_PORT
#define HOSTILE_PORT 9 /* discard: normally nothing listens, so connect is refused */
#endif

struct instance {
    LADSPA_Data *input;
    LADSPA_Data *output;
};

static LADSPA_Handle instantiate(const LADSPA_Descriptor *descriptor, unsigned long rate)
{
    (void)descriptor;
    (void)rate;
    return calloc(1, sizeof(struct instance));
}

static void connect_port(LADSPA_Handle handle, unsigned long port, LADSPA_Data *data)
{
    struct instance *self = handle;
    if (port == 0)
        self->input = data;
    else if (port == 1)
        self->output = data;
}

static void cleanup(LADSPA_Handle handle)
{
    free(handle);
}

/* 1.0 for success, else minus the errno saved right after the call. */
static LADSPA_Data outcome(int ok, int saved_errno)
{
    return ok ? 1.0f : -(LADSPA_Data)saved_errno;
}

static void copy_from(struct instance *self, unsigned long first, unsigned long count)
{
    for (unsigned long i = first; i < count; i++)
        self->output[i] = self->input[i];
}

static void run_read_file(LADSPA_Handle handle, unsigned long count)
{
    struct instance *self = handle;
    if (count == 0)
        return;
    int fd = open(HOSTILE_TARGET, O_RDONLY);
    self->output[0] = outcome(fd >= 0, errno);
    if (fd >= 0)
        close(fd);
    copy_from(self, 1, count);
}

static void run_open_socket(LADSPA_Handle handle, unsigned long count)
{
    struct instance *self = handle;
    if (count == 0)
        return;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    LADSPA_Data made = outcome(fd >= 0, errno);
    LADSPA_Data connected = 0.0f; /* not attempted */
    if (fd >= 0) {
        struct sockaddr_in address = {0};
        address.sin_family = AF_INET;
        address.sin_port = htons(HOSTILE_PORT);
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int rc = connect(fd, (const struct sockaddr *)&address, sizeof address);
        connected = outcome(rc == 0, errno);
        close(fd);
    }
    self->output[0] = made;
    if (count > 1)
        self->output[1] = connected;
    copy_from(self, 2, count);
}

static void run_crash(LADSPA_Handle handle, unsigned long count)
{
    (void)handle;
    (void)count;
    /* Both the pointer and the store are volatile: the compiler can neither
       prove the pointer NULL (a known NULL store may become a trap instruction,
       SIGILL instead of SIGSEGV) nor drop the store (GCC 12 -O1 removes a plain
       store through a volatile-qualified pointer variable). */
    volatile int *volatile target = NULL;
    *target = 1;
}

/* Writes far past the end of its output port, as a plugin with a length bug would: through the
   other ports and off the end of the memory the buffers live in. */
static void run_scribble(LADSPA_Handle handle, unsigned long count)
{
    struct instance *self = handle;
    volatile LADSPA_Data *target = self->output;
    for (unsigned long i = 0; i < count + (64ul << 20); i++)
        target[i] = 1e30f;
}

static void run_hang(LADSPA_Handle handle, unsigned long count)
{
    (void)handle;
    (void)count;
    /* Volatile accesses are side effects, so the loop cannot be removed. */
    volatile unsigned long spins = 0;
    for (;;)
        spins++;
}

static const LADSPA_PortDescriptor port_descriptors[2] = {
    LADSPA_PORT_INPUT | LADSPA_PORT_AUDIO,
    LADSPA_PORT_OUTPUT | LADSPA_PORT_AUDIO,
};
static const char *const port_names[2] = {"Input", "Output"};
static const LADSPA_PortRangeHint port_hints[2] = {{0, 0, 0}, {0, 0, 0}};

#define HOSTILE_DESCRIPTOR(id, label, name, run_function)                          \
    {                                                                          \
        .UniqueID = (id),                                                      \
        .Label = (label),                                                      \
        .Properties = 0,                                                       \
        .Name = (name),                                                        \
        .Maker = "plugind tests",                                              \
        .Copyright = "None",                                                   \
        .PortCount = 2,                                                        \
        .PortDescriptors = port_descriptors,                                   \
        .PortNames = port_names,                                               \
        .PortRangeHints = port_hints,                                          \
        .ImplementationData = NULL,                                            \
        .instantiate = instantiate,                                            \
        .connect_port = connect_port,                                          \
        .activate = NULL,                                                      \
        .run = (run_function),                                                 \
        .run_adding = NULL,                                                    \
        .set_run_adding_gain = NULL,                                           \
        .deactivate = NULL,                                                    \
        .cleanup = cleanup,                                                    \
    }

static const LADSPA_Descriptor descriptors[] = {
    HOSTILE_DESCRIPTOR(0xFF0001, "read_file", "Hostile: open a file in run", run_read_file),
    HOSTILE_DESCRIPTOR(0xFF0002, "open_socket", "Hostile: open a socket in run", run_open_socket),
    HOSTILE_DESCRIPTOR(0xFF0003, "crash_in_run", "Hostile: NULL store in run", run_crash),
    HOSTILE_DESCRIPTOR(0xFF0004, "hang_in_run", "Hostile: endless loop in run", run_hang),
    HOSTILE_DESCRIPTOR(0xFF0005, "scribble", "Hostile: writes past its output in run", run_scribble),
};

const LADSPA_Descriptor *ladspa_descriptor(unsigned long index)
{
    return index < sizeof descriptors / sizeof descriptors[0] ? &descriptors[index] : NULL;
}
