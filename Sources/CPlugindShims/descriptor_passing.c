// Passing descriptors over unix sockets (SCM_RIGHTS): the CMSG_* macros are C only.
#include "plugind_shims.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

enum { max_descriptors = PLUGIND_SHIM_SPAWN_MAX_DESCRIPTORS };

int plugind_shim_send_descriptors(int socket, const void *bytes, size_t length, const int *descriptors, int count) {
    if (count < 0 || count > max_descriptors) return EINVAL;
    struct iovec vector = {.iov_base = (void *)bytes, .iov_len = length};
    union {
        char buffer[CMSG_SPACE(sizeof(int) * max_descriptors)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr message = {.msg_iov = &vector, .msg_iovlen = 1};
    if (count > 0) {
        message.msg_control = control.buffer;
        message.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)count);
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)count);
        memcpy(CMSG_DATA(header), descriptors, sizeof(int) * (size_t)count);
    }
    ssize_t sent;
    while ((sent = sendmsg(socket, &message, MSG_NOSIGNAL)) < 0) {
        if (errno != EINTR) return errno;
    }
    return sent == (ssize_t)length ? 0 : EMSGSIZE;
}

int plugind_shim_receive_descriptors(int socket, void *bytes, size_t byte_capacity, size_t *length, int *descriptors,
                                     int capacity, int *count) {
    struct iovec vector = {.iov_base = bytes, .iov_len = byte_capacity};
    union {
        char buffer[CMSG_SPACE(sizeof(int) * max_descriptors)];
        struct cmsghdr align;
    } control;
    struct msghdr message = {.msg_iov = &vector, .msg_iovlen = 1, .msg_control = control.buffer,
                             .msg_controllen = sizeof control.buffer};
    ssize_t received;
    while ((received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC)) < 0) {
        if (errno != EINTR) return errno;
    }
    *length = (size_t)received;
    *count = 0;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        int available = (int)((header->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int *received_descriptors = (int *)CMSG_DATA(header);
        for (int index = 0; index < available; index++) {
            if (*count < capacity) {
                descriptors[(*count)++] = received_descriptors[index];
            } else {
                close(received_descriptors[index]);
            }
        }
    }
    if (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) return EMSGSIZE;
    return 0;
}

int plugind_shim_socket_pair(int *first, int *second) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return errno;
    *first = pair[0];
    *second = pair[1];
    return 0;
}
