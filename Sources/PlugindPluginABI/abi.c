/* The plugin ABI is a header; this file exists so SwiftPM builds the target. It records no ABI
 * note: the worker and hosts that link this target are no plugins. */
#define PLUGIND_PLUGIN_NO_ABI_NOTE
#include "plugind_plugin.h"
