// The terminal side of `plugind browse`. Restoring the terminal must work on every way out: a
// normal end (endwin), SIGINT/SIGTERM/SIGHUP (the loop wakes through a pipe and ends normally),
// and a crash of the view, where only async-signal-safe calls may run: the terminal modes saved
// before curses started are put back with tcsetattr, and the strings that leave the alternate
// screen and show the cursor, looked up ahead, are written with write(2).
#include "plugind_terminal.h"

#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#define NCURSES_WIDECHAR 1
#include <ncursesw/curses.h>
#include <ncursesw/term.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <wchar.h>

static struct termios saved_modes;
static int have_saved_modes;
static int active;
static SCREEN *screen;
static char restore_sequence[256];
static size_t restore_length;
static volatile sig_atomic_t exit_signal;
static int exit_wake_fd = -1;
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
#define FATAL_SIGNAL_COUNT (sizeof fatal_signals / sizeof fatal_signals[0])
static struct sigaction previous_fatal[FATAL_SIGNAL_COUNT];
static struct sigaction previous_resize;

static void append_capability(const char *name) {
    char *value = tigetstr((char *)name);
    if (value == NULL || value == (char *)-1) return;
    size_t length = strlen(value);
    if (restore_length + length >= sizeof restore_sequence) return;
    memcpy(restore_sequence + restore_length, value, length);
    restore_length += length;
}

static void restore_after_crash(int signal_number) {
    if (have_saved_modes) tcsetattr(STDIN_FILENO, TCSANOW, &saved_modes);
    if (restore_length > 0) {
        ssize_t ignored = write(STDOUT_FILENO, restore_sequence, restore_length);
        (void)ignored;
    }
    // Hand the signal to whoever handled it before (the Swift runtime's backtracer, or the
    // default action), so the crash is reported and ends the process as it would have.
    for (size_t index = 0; index < FATAL_SIGNAL_COUNT; index++) {
        if (fatal_signals[index] == signal_number) sigaction(signal_number, &previous_fatal[index], NULL);
    }
    raise(signal_number);
}

static void wake(void) {
    if (exit_wake_fd >= 0) {
        char byte = 1;
        ssize_t ignored = write(exit_wake_fd, &byte, 1);
        (void)ignored;
    }
}

static void note_exit_signal(int signal_number) {
    int saved_errno = errno;
    exit_signal = signal_number;
    wake();
    errno = saved_errno;
}

// The signal may arrive on any thread, where it would not interrupt the loop's poll: curses
// notes the new size, and the pipe wakes the loop to ask for it.
static void note_resize(int signal_number) {
    int saved_errno = errno;
    if (previous_resize.sa_handler != SIG_DFL && previous_resize.sa_handler != SIG_IGN) {
        if (previous_resize.sa_flags & SA_SIGINFO) {
            previous_resize.sa_sigaction(signal_number, NULL, NULL);
        } else {
            previous_resize.sa_handler(signal_number);
        }
    }
    wake();
    errno = saved_errno;
}

int plugind_terminal_begin(int no_color) {
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) return -1;
    setlocale(LC_ALL, "");
    // Under the C locale (no LANG at all, as under many service managers and in containers)
    // curses would draw every non-ASCII character as a run of '?': characters are UTF-8 here.
    if (strcmp(nl_langinfo(CODESET), "UTF-8") != 0) setlocale(LC_CTYPE, "C.UTF-8");
    have_saved_modes = tcgetattr(STDIN_FILENO, &saved_modes) == 0;
    // newterm, unlike initscr, returns NULL for an unknown $TERM instead of exiting.
    screen = newterm(NULL, stdout, stdin);
    if (screen == NULL) return -1;
    set_term(screen);
    active = 1;
    // Leave the alternate screen, show the cursor, reset attributes: what endwin would send.
    append_capability("rmcup");
    append_capability("cnorm");
    append_capability("sgr0");
    // Raw, not cbreak: Ctrl-C is a key (quit) rather than a SIGINT to the whole process group,
    // which would also end a host that presented the browser.
    raw();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    set_escdelay(25);
    curs_set(0);
    if (!no_color && has_colors()) {
        start_color();
        use_default_colors();
        init_pair(1, COLOR_GREEN, -1);
        init_pair(2, COLOR_YELLOW, -1);
        init_pair(3, COLOR_RED, -1);
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = restore_after_crash;
    action.sa_flags = SA_NODEFER;
    sigemptyset(&action.sa_mask);
    for (size_t index = 0; index < FATAL_SIGNAL_COUNT; index++) sigaction(fatal_signals[index], &action, &previous_fatal[index]);
    // After newterm, which installed curses' own SIGWINCH handler: it is chained, not replaced.
    action.sa_handler = note_resize;
    action.sa_flags = 0;
    sigaction(SIGWINCH, &action, &previous_resize);
    return 0;
}

void plugind_terminal_end(void) {
    if (!active) return;
    active = 0;
    curs_set(1);
    endwin();
    delscreen(screen);
    screen = NULL;
    sigaction(SIGWINCH, &previous_resize, NULL);
    for (size_t index = 0; index < FATAL_SIGNAL_COUNT; index++) sigaction(fatal_signals[index], &previous_fatal[index], NULL);
}

void plugind_terminal_exit_by_signal(int signal_number) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    sigaction(signal_number, &action, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signal_number);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(signal_number);
}

int plugind_terminal_watch_exit_signals(int wake_fd) {
    exit_wake_fd = wake_fd;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = note_exit_signal;
    sigemptyset(&action.sa_mask);
    const int signals[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t index = 0; index < sizeof signals / sizeof signals[0]; index++) {
        if (sigaction(signals[index], &action, NULL) != 0) return errno;
    }
    return 0;
}

int plugind_terminal_exit_signal(void) {
    return exit_signal;
}

void plugind_terminal_size(int *height, int *width) {
    getmaxyx(stdscr, *height, *width);
}

void plugind_terminal_clear(void) {
    erase();
}

static attr_t attributes(plugind_terminal_style style) {
    switch (style) {
    case PLUGIND_TERMINAL_SELECTED: return A_REVERSE;
    case PLUGIND_TERMINAL_HEADING: return A_BOLD;
    case PLUGIND_TERMINAL_GOOD: return has_colors() ? COLOR_PAIR(1) : A_NORMAL;
    case PLUGIND_TERMINAL_WARNING: return has_colors() ? COLOR_PAIR(2) : A_BOLD;
    case PLUGIND_TERMINAL_BAD: return has_colors() ? (COLOR_PAIR(3) | A_BOLD) : A_BOLD;
    case PLUGIND_TERMINAL_DIM: return A_DIM;
    case PLUGIND_TERMINAL_PLAIN: break;
    }
    return A_NORMAL;
}

void plugind_terminal_draw(int row, int column, const char *text, plugind_terminal_style style, int fill) {
    int height, width;
    getmaxyx(stdscr, height, width);
    if (row < 0 || row >= height || column >= width) return;
    attr_t attribute = attributes(style);
    attron(attribute);
    move(row, column);
    // Character by character, counting cells, so that wide characters never run past the edge
    // into the next row.
    int x = column;
    mbstate_t state;
    memset(&state, 0, sizeof state);
    const char *cursor = text;
    size_t remaining = strlen(text);
    while (remaining > 0) {
        wchar_t character;
        size_t length = mbrtowc(&character, cursor, remaining, &state);
        if (length == (size_t)-1 || length == (size_t)-2) {
            character = L'?';
            length = 1;
            memset(&state, 0, sizeof state);
        }
        if (length == 0) break;
        int cells = wcwidth(character);
        if (cells < 0) {
            character = L'?';
            cells = 1;
        }
        if (x + cells > width) break;
        addnwstr(&character, 1);
        x += cells;
        cursor += length;
        remaining -= length;
    }
    if (fill) {
        for (; x < width; x++) addch(' ');
    }
    attroff(attribute);
}

void plugind_terminal_show(void) {
    refresh();
}

int plugind_terminal_key(void) {
    int key = getch();
    switch (key) {
    case ERR: return PLUGIND_TERMINAL_KEY_NONE;
    case KEY_UP: return PLUGIND_TERMINAL_KEY_UP;
    case KEY_DOWN: return PLUGIND_TERMINAL_KEY_DOWN;
    case KEY_PPAGE: return PLUGIND_TERMINAL_KEY_PAGE_UP;
    case KEY_NPAGE: return PLUGIND_TERMINAL_KEY_PAGE_DOWN;
    case KEY_HOME: return PLUGIND_TERMINAL_KEY_HOME;
    case KEY_END: return PLUGIND_TERMINAL_KEY_END;
    case KEY_ENTER: case '\n': case '\r': return PLUGIND_TERMINAL_KEY_ENTER;
    case KEY_BACKSPACE: case 127: case 8: return PLUGIND_TERMINAL_KEY_BACKSPACE;
    case 27: return PLUGIND_TERMINAL_KEY_ESCAPE;
    case KEY_RESIZE: return PLUGIND_TERMINAL_KEY_RESIZE;
    default: return key;
    }
}
