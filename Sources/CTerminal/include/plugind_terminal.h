/*
 * The full-screen terminal of `plugind browse`, through ncursesw. Swift sees only these calls,
 * never a curses type. Single-threaded: call everything from the thread that called begin.
 */
#ifndef PLUGIND_TERMINAL_H
#define PLUGIND_TERMINAL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// How a run of text is drawn. The words on screen carry the meaning; colour only helps.
typedef enum plugind_terminal_style {
    PLUGIND_TERMINAL_PLAIN = 0,
    PLUGIND_TERMINAL_SELECTED = 1,
    PLUGIND_TERMINAL_HEADING = 2,
    PLUGIND_TERMINAL_GOOD = 3,
    PLUGIND_TERMINAL_WARNING = 4,
    PLUGIND_TERMINAL_BAD = 5,
    PLUGIND_TERMINAL_DIM = 6,
} plugind_terminal_style;

/// Keys beyond plain characters, as `plugind_terminal_key` returns them.
#define PLUGIND_TERMINAL_KEY_NONE (-1)
#define PLUGIND_TERMINAL_KEY_INTERRUPT 3
#define PLUGIND_TERMINAL_KEY_UP 0x10001
#define PLUGIND_TERMINAL_KEY_DOWN 0x10002
#define PLUGIND_TERMINAL_KEY_PAGE_UP 0x10003
#define PLUGIND_TERMINAL_KEY_PAGE_DOWN 0x10004
#define PLUGIND_TERMINAL_KEY_HOME 0x10005
#define PLUGIND_TERMINAL_KEY_END 0x10006
#define PLUGIND_TERMINAL_KEY_ENTER 0x10007
#define PLUGIND_TERMINAL_KEY_BACKSPACE 0x10008
#define PLUGIND_TERMINAL_KEY_ESCAPE 0x10009
#define PLUGIND_TERMINAL_KEY_RESIZE 0x1000A

/// Takes over the terminal (alternate screen, raw keys, no echo, keypad, hidden cursor), with colour unless
/// `no_color`. Saves what restoring needs, and installs handlers that restore the terminal before
/// a crash takes the process (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP). Returns 0, or -1
/// when there is no usable terminal.
int plugind_terminal_begin(int no_color);

/// Gives the terminal back as it was. Idempotent.
void plugind_terminal_end(void);

/// SIGINT, SIGTERM and SIGHUP set the value `plugind_terminal_exit_signal` returns and write a
/// byte to `wake_fd`, so that a loop waiting in poll wakes and ends cleanly. Call it before
/// `plugind_terminal_begin` (curses then leaves these signals alone); from `begin` on, SIGWINCH,
/// on whichever thread it arrives, is passed to curses and wakes the loop too.
int plugind_terminal_watch_exit_signals(int wake_fd);
int plugind_terminal_exit_signal(void);

/// After the terminal was given back: ends the process with `signal_number`, as the signal
/// would have had the terminal not been in use (so a shell sees "killed by SIGTERM").
void plugind_terminal_exit_by_signal(int signal_number);

/// The screen's size now.
void plugind_terminal_size(int *_Nonnull height, int *_Nonnull width);

/// Clears the screen for the next frame; draws `text` (UTF-8, at most `columns` cells) at a row
/// and column; `fill` pads the rest of the row with the style (for a selected line).
void plugind_terminal_clear(void);
void plugind_terminal_draw(int row, int column, const char *_Nonnull text, plugind_terminal_style style, int fill);
void plugind_terminal_show(void);

/// The next key pressed, without waiting: a character, a PLUGIND_TERMINAL_KEY_* value, or
/// PLUGIND_TERMINAL_KEY_NONE.
int plugind_terminal_key(void);

#ifdef __cplusplus
}
#endif

#endif
