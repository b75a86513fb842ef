// The trivial program the spawn baseline starts: writes one byte to stdout and exits.
#include <unistd.h>

int main(void) {
    return write(1, "!", 1) == 1 ? 0 : 1;
}
