/* libplugind's C API is implemented in Swift (Sources/PlugindHost, one @_cdecl function per
 * declaration); this file makes the C compiler check that the header stands on its own. */
#include "plugind/plugind.h"
