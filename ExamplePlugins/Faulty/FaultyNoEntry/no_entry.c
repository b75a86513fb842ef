// Exports a function but not plugind_plugin_entry.
#include <plugind_plugin.h>

PLUGIND_PLUGIN_EXPORT int not_an_entry_point(void) { return 0; }
