/* The stack symbolizer: names the frames of a plugin's stack report from the host's files, in a
 * process of its own (`plugind-worker --symbolize`) confined before it parses a byte of them. */
#ifndef PLUGIND_SYMBOLIZER_H
#define PLUGIND_SYMBOLIZER_H

/// Reads the request from `input` (lines "object INDEX BIAS-HEX l|n PATH" — l: with source
/// lines, n: function names only — and "frame INDEX
/// ADDRESS-HEX OBJECT-INDEX|-"), opens the objects' files (regular files only, without blocking),
/// confines itself (seccomp: no more files, sockets, processes or signals; RLIMIT_CPU,
/// RLIMIT_AS), then writes one line per frame it could name to `output`: "INDEX\tFUNCTION\t
/// OFFSET-HEX\tFILE\tLINE" (empty fields when unknown; tabs and control characters in names
/// replaced). Returns the exit status: 0; 2 for a request it could not read; 3 when it could not
/// confine itself; 4 when libdw could not start; 5 when libdw (libdw.so.1) could not be loaded.
int plugind_symbolizer_run(int input, int output);

#endif
